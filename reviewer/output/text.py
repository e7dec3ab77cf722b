"""The terminal report, in ruff's manner: `file:line:col: RULE category [severity]`, the
source lines with a caret under the spot, the message wrapped to the terminal, the verdict,
the fix as a small diff; the rules' explanations only when asked (`--explain`)."""

from __future__ import annotations

from review_copies.model.findings import Finding, Severity
from review_copies.model.report import Report
from review_copies.model.settings import PROG
from review_copies.output.common import headline, no_workflow_commands, plain_explanation, rules_used, shown_path, stats_line, verdict_line
from review_copies.output.context import RenderContext

NAME = "text"

_COLORS = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "cyan": "36", "magenta": "35"}
_SEVERITY_COLOR = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}


class _Paint:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        codes = ";".join(_COLORS[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"


def _finding(f: Finding, paint: _Paint, width: int) -> list[str]:
    head = f"{paint(f'{shown_path(f.path)}:{f.line}:{f.column}', 'bold')}: {paint(f.rule, _SEVERITY_COLOR[f.severity], 'bold')} {f.category.value} [{f.severity.value}]"
    if f.source == "llm":
        head += " (LLM)"
    lines = [head]
    lines += _source_block(f, paint)
    lines += [f"  {part}" for part in _wrap(f.message, width - 2)]
    lines += [paint(f"  {part}", "dim") for part in _wrap(verdict_line(f), width - 2)]
    if f.suggestion is not None:
        lines.append(f"  suggestion (lines {f.suggestion.start_line}-{f.suggestion.end_line}):")
        for old in f.suggestion.original.splitlines():
            lines.append(paint(f"    - {old}", "red"))
        for new in f.suggestion.replacement.splitlines():
            lines.append(paint(f"    + {new}", "green"))
    return lines


# Source lines shown under a finding's heading; a longer span is cut with an ellipsis.
_MAX_SOURCE_LINES = 4


def _source_block(f: Finding, paint: _Paint) -> list[str]:
    code = f.code.splitlines()
    if not code:
        return []
    shown = code[:_MAX_SOURCE_LINES]
    gutter = len(str(f.line + len(shown) - 1))
    bar = paint(" " * gutter + " |", "blue")
    out = [bar]
    for offset, text in enumerate(shown):
        number = paint(f"{f.line + offset:>{gutter}} |", "blue")
        out.append(f"{number} {shown_path(text.expandtabs(4))}".rstrip())
        if offset == 0:
            start, end = _caret_span(text.expandtabs(4), f.column)
            out.append(f"{bar} {' ' * start}{paint('^' * (end - start), _SEVERITY_COLOR[f.severity], 'bold')}")
    if len(code) > len(shown):
        out.append(f"{bar} ...")
    out.append(bar)
    return out


def _caret_span(text: str, column: int) -> tuple[int, int]:
    """Where to underline on the finding's first line: from its column to the end of the
    code on that line (a trailing comment left out)."""
    start = min(max(column - 1, 0), max(len(text.rstrip()) - 1, 0))
    code = text
    quote: str | None = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            code = text[:i]
            break
    end = max(len(code.rstrip()), start + 1)
    return start, end


def _hanging(text: str, width: int, indent: str) -> list[str]:
    """`text` wrapped to `width`, its first line at `indent` and the rest two columns in."""
    lines = _wrap(text, width - len(indent) - 2)
    return [f"{indent}{lines[0]}", *(f"{indent}  {line}" for line in lines[1:])] if lines else []


def _wrap(text: str, width: int) -> list[str]:
    width = max(width, 40)
    words, lines, current = text.split(), [], ""
    for word in words:
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return lines


def render(report: Report, ctx: RenderContext) -> str:
    paint = _Paint(ctx.color)
    out: list[str] = []
    if ctx.description:
        out.append(paint(f"review-copies: {ctx.description}", "bold"))
        out.append("")
    for finding in report.findings:
        out += _finding(finding, paint, ctx.width)
        out.append("")
    if report.dropped:
        out.append(paint(f"Not posted ({len(report.dropped)}):", "bold"))
        for d in report.dropped:
            f = d.finding
            out += _hanging(f"{shown_path(f.path)}:{f.line}: {f.rule or f.category_label} {f.category_label}: {d.reason}", ctx.width, "  ")
        out.append("")
    if report.notes:
        out.append(paint("Notes:", "bold"))
        for note in report.notes:
            out += _hanging(str(note), ctx.width, "  ")
        out.append("")
    for line in report.coverage:
        out += [paint(part, "dim") for part in _hanging(f"Coverage: {line}", ctx.width, "")]
    if report.coverage:
        out.append("")
    used = rules_used(report, ctx.rules) if ctx.explain else []
    if used:
        out.append(paint("Explanations:", "bold"))
        for rule in used:
            out.append(paint(f"{rule.code} {rule.name} ({rule.category.value})", "cyan"))
            out += [f"  {line}" if line else "" for line in plain_explanation(rule).splitlines()]
            out.append("")
    if report.findings and not ctx.explain:
        out.append(paint(f"What a rule finds and why: `{PROG} rule CODE`, or --explain.", "dim"))
    summary = _hanging(f"{headline(report)} — {stats_line(report.stats)}", ctx.width, "")
    out.append(summary[0].replace(headline(report), paint(headline(report), "bold"), 1))
    out += summary[1:]
    return no_workflow_commands("\n".join(out) + "\n")
