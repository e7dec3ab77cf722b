"""Pieces every reporter shares: counts, verdict wording, the rule explanations, and the
neutralising of text that comes from the reviewed repository (paths, quoted code, LLM
messages), which an attacker writes."""

from __future__ import annotations

import re
from collections import Counter

from review_copies.model.findings import Finding, Severity, Status
from review_copies.model.report import Report, Stats
from review_copies.rules import Rule, rule_by_code

VERDICT_WORD = {
    Status.CONFIRMED: "confirmed",
    Status.REFUTED: "refuted",
    Status.INCONCLUSIVE: "inconclusive",
    Status.NOT_RUN: "not run",
}


def verdict_line(finding: Finding) -> str:
    v = finding.verification
    where = f" on {v.device}" if v.device else ""
    evidence = f": {v.evidence}" if v.evidence else ""
    return f"sandbox {VERDICT_WORD[v.status]}{where}{evidence}"


def severity_counts(findings: list[Finding]) -> str:
    counts = Counter(f.severity for f in findings)
    parts = [f"{counts[s]} {s.value}{'s' if counts[s] != 1 else ''}" for s in (Severity.ERROR, Severity.WARNING, Severity.INFO) if counts[s]]
    return ", ".join(parts)


def headline(report: Report) -> str:
    n = len(report.findings)
    if n == 0:
        return "no findings"
    return f"{n} finding{'s' if n != 1 else ''} ({severity_counts(report.findings)})"


def stats_line(stats: Stats) -> str:
    parts = [
        f"{stats.files} file{'s' if stats.files != 1 else ''}",
        f"{stats.python_files} Python",
        f"{stats.hunks} hunk{'s' if stats.hunks != 1 else ''}",
        f"{stats.tensor_hunks} tensor hunk{'s' if stats.tensor_hunks != 1 else ''}",
    ]
    skipped = sum(stats.skipped.values())
    if skipped:
        parts.append(f"{skipped} skipped ({', '.join(f'{k}: {v}' for k, v in sorted(stats.skipped.items()))})")
    if stats.llm_calls or stats.llm.model not in ("off", "offline"):
        cached = f" ({stats.llm.cached_prompt_tokens} from the server's prefix cache)" if stats.llm.cached_prompt_tokens else ""
        parts.append(f"LLM: {stats.llm_calls} call{'s' if stats.llm_calls != 1 else ''}, {stats.prompt_tokens} prompt{cached} + {stats.completion_tokens} completion tokens")
        if stats.llm.cost_usd is not None:
            parts.append(f"about ${stats.llm.cost_usd:.4f}")
    else:
        parts.append("LLM: off")
    parts.append(f"sandbox: {stats.sandbox_runs} run{'s' if stats.sandbox_runs != 1 else ''}" if stats.sandbox.state != "off" else "sandbox: off")
    parts.append(f"{stats.seconds:.1f} s")
    return "; ".join(parts)


def rules_used(report: Report, catalogue: tuple[type[Rule], ...]) -> list[type[Rule]]:
    codes = sorted({f.rule for f in report.findings})
    out = []
    for code in codes:
        rule = next((r for r in catalogue if r.code == code), None) or rule_by_code(code)
        if rule is not None:
            out.append(rule)
    return out


def plain_explanation(rule: type[Rule]) -> str:
    """The rule's docstring as plain text: headings as lines, code fences indented."""
    out = []
    in_code = False
    for line in rule.doc().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if line.startswith("## "):
            out.append(line[3:].rstrip(":") + ":")
        elif in_code:
            out.append("    " + line)
        else:
            out.append(line)
    return "\n".join(out).strip()


# Characters that would start a new line or move the cursor when printed: C0 and C1
# controls, DEL, and Unicode's own line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown_path(path: str) -> str:
    """A path as a report shows it: one line, control characters escaped as git quotes them
    (`evil\\n::error::x.py`), so a file name cannot write a line of its own."""
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"), path)


# A line the GitHub Actions runner reads as a workflow command (`::error::`, `::add-mask::`,
# `::stop-commands::`) or as the older `##[command]` form, after leading whitespace.
_COMMAND_START = re.compile(r"^(\s*)(:)(:)|^(\s*)(#)(#\[)", re.MULTILINE)
ZERO_WIDTH_SPACE = "\u200b"


def no_workflow_commands(text: str) -> str:
    """Break every line start a runner would obey: a zero-width space between the two
    characters, invisible to a reader, is no command to the runner."""
    return _COMMAND_START.sub(lambda m: f"{m.group(1) or m.group(4) or ''}{m.group(2) or m.group(5)}{ZERO_WIDTH_SPACE}{m.group(3) or m.group(6)}", text)
