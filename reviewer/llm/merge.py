"""Merge the LLM's findings into the static ones: one problem, one finding.

When the model reports what a rule already found (same file, same category, lines that
overlap), or the same thing twice, the first finding stays (its id, source and fix, which the rule knows to be
safe or withholds on purpose) and keeps whichever message tells the author more about
the code on those lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from review_copies.model.findings import Finding

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Past this length a message is not better for being longer.
_USEFUL_CHARS = 600


@dataclass(frozen=True)
class Merged:
    findings: list[Finding]
    merged: int


def _overlap(a: Finding, b: Finding) -> bool:
    return a.path == b.path and a.line <= b.end_line and b.line <= a.end_line


def _score(message: str, code: str) -> tuple[int, int]:
    names = set(_IDENTIFIER.findall(code))
    mentioned = names & set(_IDENTIFIER.findall(message))
    return len(mentioned), min(len(message), _USEFUL_CHARS)


def better_message(static: Finding, llm: Finding) -> str:
    """The message that names more of the code on the finding's lines (ties: the static one)."""
    code = static.code or llm.code
    return llm.message if _score(llm.message, code) > _score(static.message, code) else static.message


def merge(static: Sequence[Finding], llm: Sequence[Finding]) -> Merged:
    out = list(static)
    merged = 0
    for finding in llm:
        # Against a rule's finding, or one the model gave already for an overlapping hunk.
        twin = next((i for i, s in enumerate(out) if s.category is finding.category and _overlap(s, finding)), None)
        if twin is None:
            out.append(finding)
            continue
        kept = out[twin]
        out[twin] = replace(kept, message=better_message(kept, finding), probe=kept.probe or finding.probe)
        merged += 1
    return Merged(out, merged)
