"""The text of inline comments and of the review body, each under GitHub's size limit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from review_copies.github import markers
from review_copies.github.diff_positions import Inline
from review_copies.model.findings import Dropped, Finding, Verification
from review_copies.model.report import Report, Stats
from review_copies.output.common import shown_path, stats_line
from review_copies.output.markdown import code_span, fence, summary_table, text_of, verdict

# GitHub refuses bodies over 65,536 characters; the margin absorbs its own counting.
BODY_LIMIT = 60_000
MESSAGE_LIMIT = 6_000
EVIDENCE_LIMIT = 6_000
_SHORT_EVIDENCE = 240
ENTRY_LIMIT = 700


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------------ comments


def comment_body(spot: Inline) -> str:
    f = spot.finding
    body = _comment(f, spot, with_fix=True)
    if len(body) > BODY_LIMIT:
        body = _comment(f, replace(spot, committable=False), with_fix=False)
    return body


def _comment(f: Finding, spot: Inline, with_fix: bool) -> str:
    parts = [f"**{f.category.value}** · `{f.rule}` · {f.severity.value}", "", markers.defuse(text_of(_clip(f.message.strip(), MESSAGE_LIMIT))), "", _verdict_block(f)]
    if f.suggestion is not None:
        parts += ["", *(_fix_block(f, spot) if with_fix else ["The suggested fix is too long to show here; see the job summary."])]
    parts += ["", markers.finding_marker(f)]
    return "\n".join(parts)


def _verdict_block(f: Finding) -> str:
    evidence = markers.defuse(_clip(f.verification.evidence.strip(), EVIDENCE_LIMIT))
    if len(evidence) <= _SHORT_EVIDENCE and "\n" not in evidence:
        return f"**{verdict(f.with_verification(replace(f.verification, evidence=evidence)))}**"
    headline = verdict(f.with_verification(Verification(f.verification.status, f.verification.device, "")))
    return f"<details><summary><b>{headline}</b></summary>\n\n{fence(evidence, 'text')}\n\n</details>"


def _fix_block(f: Finding, spot: Inline) -> list[str]:
    s = f.suggestion
    assert s is not None
    if spot.committable:
        return ["Suggested fix:", "", suggestion_fence(s.replacement)]
    diff = "".join(f"-{ln}\n" for ln in s.original.splitlines()) + "".join(f"+{ln}\n" for ln in s.replacement.splitlines())
    where = f"line {s.start_line}" if s.start_line == s.end_line else f"lines {s.start_line}–{s.end_line}"
    return [f"Suggested fix for {where} (not offered as a one-click suggestion: it does not apply cleanly to these lines):", "", fence(diff, "diff")]


def suggestion_fence(replacement: str) -> str:
    """A `suggestion` block replacing the commented lines with `replacement` whole; an
    empty replacement deletes them."""
    if replacement == "":
        return "```suggestion\n```"
    return fence(replacement, "suggestion")


# --------------------------------------------------------------------- review body


@dataclass
class ReviewSummary:
    head_sha: str
    run_key: str
    new: list[Finding]
    inline: list[Inline]
    listed: list[tuple[Finding, str]]
    report: Report
    already_posted: int = 0
    resolved: int = 0
    description: str = ""
    notes: list[str] = field(default_factory=list)


def review_body(summary: ReviewSummary) -> str:
    head = [markers.review_marker(summary.head_sha, summary.run_key), _headline(summary), ""]
    if summary.description:
        head += [f"Reviewed {markers.defuse(summary.description)}.", ""]
    if summary.new:
        head += [summary_table(Report(findings=list(summary.new))), ""]
    head += _tallies(summary)
    while head[-1] == "":
        head.pop()
    footer = ["", f"<sub>{stats_line(summary.report.stats)}</sub>"]
    # Findings listed here count as posted on later runs; in the rare review that lists
    # thousands, those past the marker's share of the body may be listed again later.
    fps = _fitting([f.fingerprint for f, _ in summary.listed], BODY_LIMIT // 3)
    marker = [markers.listed_marker(fps)] if fps else []
    budget = BODY_LIMIT - sum(len(x) + 1 for x in head + footer + marker) - 200
    entries = _listed_entries(summary.listed, budget)
    return "\n".join([*head, *entries, *footer, *marker])


def _headline(s: ReviewSummary) -> str:
    n = len(s.new)
    if n == 0:
        return "### review-copies: nothing new"
    return f"### review-copies: {n} new finding{'s' if n != 1 else ''}"


def _tallies(s: ReviewSummary) -> list[str]:
    lines = []
    if s.inline and s.listed:
        lines.append(f"{len(s.inline)} commented inline, {len(s.listed)} listed below.")
    if s.already_posted:
        lines.append(f"Not repeated: {_count(s.already_posted, 'finding')} already posted on this pull request.")
    if s.resolved:
        lines.append(f"Resolved: {_count(s.resolved, 'earlier comment')} whose code changed and whose finding is gone.")
    dropped, skipped = len(s.report.dropped), _skipped(s.report.stats)
    if dropped:
        lines.append(f"Dropped: {_count(dropped, 'finding')} not posted ({_drop_reasons(s.report.dropped)}).")
    if skipped:
        lines.append(f"Skipped: {skipped}.")
    lines += s.notes
    return [f"- {line}" for line in lines] if len(lines) > 1 else lines


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _skipped(stats: Stats) -> str:
    total = sum(stats.skipped.values())
    if not total:
        return ""
    detail = ", ".join(f"{k}: {v}" for k, v in sorted(stats.skipped.items()))
    return f"{_count(total, 'file')} ({detail})"


def _drop_reasons(dropped: Sequence[Dropped]) -> str:
    refuted = sum(1 for d in dropped if "refuted" in d.reason)
    other = len(dropped) - refuted
    parts = ([f"{refuted} refuted by the sandbox"] if refuted else []) + ([f"{other} failed validation"] if other else [])
    return ", ".join(parts) + "; the job summary lists them"


def listed_entry(f: Finding, reason: str) -> str:
    text = _clip(_one_line(f"{text_of(f.message)} — {verdict(f)}"), ENTRY_LIMIT)
    return f"- **{code_span(f'{shown_path(f.path)}:{f.line}')}** · {f.category.value} · `{f.rule}` ({f.severity.value}), *{reason}*: {markers.defuse(text)}"


def _listed_entries(listed: Sequence[tuple[Finding, str]], budget: int) -> list[str]:
    if not listed:
        return []
    out = ["", "#### Not commented inline", ""]
    used = sum(len(x) + 1 for x in out)
    for i, (f, reason) in enumerate(listed):
        entry = listed_entry(f, reason)
        if used + len(entry) + 1 > budget:
            out.append(f"- … and {len(listed) - i} more, listed in the job summary.")
            break
        out.append(entry)
        used += len(entry) + 1
    return out


def _fitting(fingerprints: Sequence[str], budget: int) -> list[str]:
    count = max(0, budget // 17)
    return list(fingerprints[:count])
