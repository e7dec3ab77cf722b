"""`# review-copies: ignore` and `# review-copies: ignore[CATEGORY-or-RULE, ...]` comments."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping

from review_copies.model.findings import Finding

_DIRECTIVE = re.compile(r"#\s*review-copies\s*:\s*ignore(?:\[(?P<names>[^\]]*)\])?", re.IGNORECASE)
ALL = frozenset({"*"})


def directives(text: str) -> Mapping[int, frozenset[str]]:
    """Line -> what it silences (ALL, or rule codes / categories). Only real comments count."""
    if "review-copies" not in text:
        return {}
    found: dict[int, frozenset[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = _DIRECTIVE.search(token.string)
            if match is None:
                continue
            names = match.group("names")
            value = ALL if names is None else frozenset(n.strip().lower() for n in names.split(",") if n.strip())
            found[token.start[0]] = found.get(token.start[0], frozenset()) | value
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return found
    return found


def is_suppressed(finding: Finding, table: Mapping[int, frozenset[str]]) -> bool:
    for line in range(finding.line, finding.end_line + 1):
        names = table.get(line)
        if names is None:
            continue
        if names is ALL or "*" in names:
            return True
        if finding.rule.lower() in names or finding.category.value in names:
            return True
    return False
