"""Pieces every reporter shares: counts, verdict wording, the rule explanations."""

from __future__ import annotations

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
        parts.append(f"LLM: {stats.llm_calls} call{'s' if stats.llm_calls != 1 else ''}, {stats.prompt_tokens} prompt + {stats.completion_tokens} completion tokens")
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
