"""Markdown for a pull-request comment, a job summary, or any code host."""

from __future__ import annotations

from collections import Counter

from review_copies.model.findings import Finding, Status
from review_copies.model.report import Report
from review_copies.output.common import VERDICT_WORD, headline, rules_used, stats_line
from review_copies.output.context import RenderContext

NAME = "markdown"

_VERDICT_ICON = {Status.CONFIRMED: "✅", Status.REFUTED: "❌", Status.INCONCLUSIVE: "❔", Status.NOT_RUN: "➖"}


def fence(text: str, lang: str = "") -> str:
    """A code fence longer than any run of backticks inside the text."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{ticks}{lang}\n{body}{ticks}"


def verdict(f: Finding) -> str:
    v = f.verification
    where = f" on {v.device}" if v.device else ""
    evidence = f" — {v.evidence}" if v.evidence else ""
    return f"{_VERDICT_ICON[v.status]} sandbox {VERDICT_WORD[v.status]}{where}{evidence}"


def finding_block(f: Finding, heading: str = "###") -> str:
    parts = [f"{heading} `{f.path}:{f.line}` · {f.category.value} · {f.rule} ({f.severity.value})", "", f.message, "", f"**{verdict(f)}**"]
    if f.suggestion is not None:
        diff = "".join(f"-{line}\n" for line in f.suggestion.original.splitlines()) + "".join(f"+{line}\n" for line in f.suggestion.replacement.splitlines())
        parts += ["", f"Suggested fix (lines {f.suggestion.start_line}–{f.suggestion.end_line}):", "", fence(diff, "diff")]
    return "\n".join(parts)


def summary_table(report: Report) -> str:
    by_category = Counter(f.category.value for f in report.findings)
    by_status = Counter(f.verification.status for f in report.findings)
    rows = ["| category | findings |", "| --- | ---: |"] + [f"| {c} | {n} |" for c, n in sorted(by_category.items())]
    verdicts = ", ".join(f"{_VERDICT_ICON[s]} {n} {VERDICT_WORD[s]}" for s, n in sorted(by_status.items(), key=lambda kv: kv[0].value))
    return "\n".join(rows) + (f"\n\nSandbox: {verdicts}" if verdicts else "")


def render(report: Report, ctx: RenderContext) -> str:
    out = [f"## review-copies: {headline(report)}", ""]
    if ctx.description:
        out += [f"Reviewed {ctx.description}.", ""]
    if report.findings:
        out += [summary_table(report), ""]
        for f in report.findings:
            out += [finding_block(f), ""]
    if report.dropped:
        out += [f"<details><summary>{len(report.dropped)} not posted</summary>", ""]
        out += [f"- `{d.finding.path}:{d.finding.line}` {d.finding.category_label}: {d.reason}" for d in report.dropped]
        out += ["", "</details>", ""]
    if report.notes:
        out += ["**Notes**", ""] + [f"- {n}" for n in report.notes] + [""]
    if report.coverage:
        out += ["**Coverage**", ""] + [f"- {c}" for c in report.coverage] + [""]
    for rule in rules_used(report, ctx.rules):
        out += [f"<details><summary>{rule.code} {rule.name}: why this matters</summary>", "", rule.doc(), "", "</details>", ""]
    out.append(f"<sub>{stats_line(report.stats)}</sub>")
    return "\n".join(out) + "\n"
