"""`review-copies rules` and `review-copies rule CODE`: the rules as a user looks them up."""

from __future__ import annotations

from collections import Counter

from review_copies.model.findings import Finding
from review_copies.output.common import plain_explanation
from review_copies.rules import Rule


def rules_table(rules: tuple[type[Rule], ...]) -> str:
    """One line per rule: code, name, category, severity, and whether it offers a fix."""
    width = max(len(r.name) for r in rules)
    cat_width = max(len(r.category.value) for r in rules)
    lines = [f"{'code':<6} {'name':<{width}}  {'category':<{cat_width}}  severity  fix"]
    for r in rules:
        fix = "yes" if any(getattr(example, "fix", None) for example in r.INVALID) else "-"
        lines.append(f"{r.code:<6} {r.name:<{width}}  {r.category.value:<{cat_width}}  {r.severity.value:<8}  {fix}")
    return "\n".join(lines) + "\n"


def rule_page(rule: type[Rule]) -> str:
    head = f"{rule.code} {rule.name} ({rule.category.value}, {rule.severity.value})"
    return f"{head}\n\n{plain_explanation(rule)}\n"


def statistics(findings: list[Finding], rules: tuple[type[Rule], ...]) -> str:
    """Counts per rule, most frequent first, as `ruff --statistics` prints them."""
    names = {r.code: r.name for r in rules}
    counts = Counter(f.rule or (f.category.value if f.category else "?") for f in findings)
    fixable = Counter(f.rule for f in findings if f.suggestion is not None)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if not rows:
        return "no findings\n"
    width = len(str(rows[0][1]))
    out = []
    for code, n in rows:
        mark = "[*]" if fixable[code] == n else "[-]" if fixable[code] else "   "
        category = next((f.category.value for f in findings if f.rule == code and f.category), "")
        out.append(f"{n:>{width}}\t{code}\t{mark} {names.get(code, category)} ({category})")
    return "\n".join(out) + "\n"
