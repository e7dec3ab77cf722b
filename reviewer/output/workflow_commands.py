"""GitHub workflow commands: the Actions runner turns them into annotations."""

from __future__ import annotations

from review_copies.model.findings import Finding, Severity
from review_copies.model.report import Report
from review_copies.output.common import headline, stats_line, verdict_line
from review_copies.output.context import RenderContext

NAME = "github"

_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding) -> str:
    props = ",".join(
        [
            f"file={escape_property(f.path)}",
            f"line={f.line}",
            f"endLine={f.end_line}",
            f"title={escape_property(f'{f.rule} {f.category.value}')}",
        ]
    )
    body = f"{f.message}\n{verdict_line(f)}"
    if f.suggestion is not None:
        body += "\nsuggested replacement:\n" + f.suggestion.replacement.rstrip("\n")
    return f"::{_COMMAND[f.severity]} {props}::{escape_data(body)}"


def render(report: Report, ctx: RenderContext) -> str:
    lines = [annotation(f) for f in report.findings]
    for note in report.notes:
        props = f"file={escape_property(note.path)}," if note.path else ""
        lines.append(f"::notice {props}title=review-copies note::{escape_data(note.message)}")
    for line in report.coverage:
        lines.append(f"::notice title=review-copies coverage::{escape_data(line)}")
    lines.append(f"::notice title=review-copies::{escape_data(headline(report) + ' — ' + stats_line(report.stats))}")
    return "\n".join(lines) + "\n"
