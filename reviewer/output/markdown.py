"""Markdown for a pull-request comment, a job summary, or any code host."""

from __future__ import annotations

import re
from collections import Counter

from review_copies.model.findings import Finding, Status
from review_copies.model.report import Report
from review_copies.output.common import VERDICT_WORD, headline, no_workflow_commands, rules_used, shown_path, stats_line
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


def code_span(text: str) -> str:
    """Inline code that no backtick inside can close early."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


# Outside code spans, what Markdown would turn into markup: emphasis, links and images,
# HTML and entities, headings and issue references, tables, strikethrough.
_MARKUP = re.compile(r"([\\`*_\[\]<>#!|~&])")
# ...and what GitHub turns into links or notifications: `http://x`, `www.x`, `@team`.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=\bwww)(?=\.)", re.IGNORECASE)
MENTION = re.compile(r"(?<![\w`])@(?=[A-Za-z0-9-])")
ZERO_WIDTH_SPACE = "\u200b"


def text_of(untrusted: str) -> str:
    """Text from the reviewed repository or a model, written so Markdown shows it as is:
    its balanced code spans stay code (nothing renders inside them), everything else is
    escaped, and `@team` cannot notify anyone. One line: newlines become spaces."""
    text = re.sub(r"[\r\n\u2028\u2029]+", " ", untrusted)
    out, i = [], 0
    for m in re.finditer(r"(`+)(.+?)(?<!`)\1(?!`)", text):
        out.append(_plain(text[i : m.start()]))
        out.append(code_span(m.group(2).strip(" ") or " "))
        i = m.end()
    out.append(_plain(text[i:]))
    joined = "".join(out)
    if joined[:1] in ("-", "+"):
        return "\\" + joined  # not a list item
    return re.sub(r"^(\d+)([.)])", r"\1\\\2", joined)


def _plain(text: str) -> str:
    text = _MARKUP.sub(r"\\\1", text)
    text = _AUTOLINK.sub(ZERO_WIDTH_SPACE, text)
    return MENTION.sub("@" + ZERO_WIDTH_SPACE, text)


def verdict(f: Finding) -> str:
    v = f.verification
    where = f" on {v.device}" if v.device else ""
    evidence = f" — {text_of(v.evidence)}" if v.evidence else ""
    return f"{_VERDICT_ICON[v.status]} sandbox {VERDICT_WORD[v.status]}{where}{evidence}"


def finding_block(f: Finding, heading: str = "###") -> str:
    parts = [f"{heading} {code_span(f'{shown_path(f.path)}:{f.line}')} · {f.category.value} · {f.rule} ({f.severity.value})", "", text_of(f.message), "", f"**{verdict(f)}**"]
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
        out += [f"- {code_span(f'{shown_path(d.finding.path)}:{d.finding.line}')} {d.finding.category_label}: {text_of(d.reason)}" for d in report.dropped]
        out += ["", "</details>", ""]
    if report.notes:
        out += ["**Notes**", ""] + [f"- {text_of(str(n))}" for n in report.notes] + [""]
    if report.coverage:
        out += ["**Coverage**", ""] + [f"- {c}" for c in report.coverage] + [""]
    for rule in rules_used(report, ctx.rules):
        out += [f"<details><summary>{rule.code} {rule.name}: why this matters</summary>", "", rule.doc(), "", "</details>", ""]
    out.append(f"<sub>{stats_line(report.stats)}</sub>")
    return no_workflow_commands("\n".join(out) + "\n")
