"""What goes to the Actions runner itself: workflow-command annotations, the job summary
(`$GITHUB_STEP_SUMMARY`) and the step's outputs (`$GITHUB_OUTPUT`). None of these needs a
token, so they are also the channel when posting a review is impossible."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from review_copies.model.findings import Severity, Status
from review_copies.model.report import Report
from review_copies.output.context import RenderContext
from review_copies.output.markdown import render as render_markdown
from review_copies.output.workflow_commands import annotation, escape_data

# GitHub aborts the upload of a step summary over 1 MiB.
SUMMARY_LIMIT = 1024 * 1024 - 4096
# GitHub shows about 10 annotations per level and step and hides the rest.
SHOWN_PER_LEVEL = 10


def annotations(report: Report, note: str = "") -> str:
    lines = [annotation(f) for f in report.sorted().findings]
    counts = Counter(f.severity for f in report.findings)
    hidden = sum(max(0, n - SHOWN_PER_LEVEL) for n in counts.values())
    if hidden:
        text = f"GitHub shows {SHOWN_PER_LEVEL} annotations per level; {hidden} more are in the job summary."
        lines.append(f"::notice title=review-copies::{escape_data(text)}")
    if note:
        lines.append(f"::notice title=review-copies::{escape_data(note)}")
    return "\n".join(lines) + "\n" if lines else ""


def summary_markdown(report: Report, ctx: RenderContext, preface: Sequence[str] = ()) -> str:
    body = render_markdown(report.sorted(), ctx)
    text = "\n".join(preface) + "\n\n" + body if preface else body
    encoded = text.encode("utf-8")
    if len(encoded) <= SUMMARY_LIMIT:
        return text
    cut = encoded[:SUMMARY_LIMIT].decode("utf-8", "ignore")
    return cut[: cut.rfind("\n") + 1] + "\n\n*The report was cut here: a job summary holds at most 1 MiB. `--format json` gives all of it.*\n"


def append_summary(path: str | None, text: str) -> str | None:
    """Append to the job summary; returns a problem to mention, or None."""
    if not path:
        return None
    try:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        return f"could not write the job summary {path}: {exc.strerror}"
    return None


def step_outputs(report: Report, posted: int | None = None, review_url: str = "") -> dict[str, str]:
    by_severity = Counter(f.severity for f in report.findings)
    out = {
        "findings": str(len(report.findings)),
        "errors": str(by_severity[Severity.ERROR]),
        "warnings": str(by_severity[Severity.WARNING]),
        "infos": str(by_severity[Severity.INFO]),
        "confirmed": str(sum(1 for f in report.findings if f.verification.status is Status.CONFIRMED)),
        "dropped": str(len(report.dropped)),
    }
    if posted is not None:
        out["posted"] = str(posted)
    if review_url:
        out["review-url"] = review_url
    return out


def write_outputs(path: str | None, outputs: dict[str, str]) -> str | None:
    if not path:
        return None
    try:
        with Path(path).open("a", encoding="utf-8") as handle:
            for key, value in outputs.items():
                handle.write(f"{key}={' '.join(value.split())}\n")
    except OSError as exc:
        return f"could not write the step outputs {path}: {exc.strerror}"
    return None
