"""How much of a long function the model needs to see around the changed lines.

A short function goes whole. Of a long one the model gets its signature, a window around
every changed line, and the other lines that name what the changed lines name (where a
tensor came from, and what is later done to it), with the gaps marked. The lines left
out are not "shown": a finding that points into them is dropped like any other line
outside the hunk.
"""

from __future__ import annotations

import builtins
import itertools
import keyword
import re
from dataclasses import replace

from review_copies.review.hunks import TensorHunk

WHOLE_UP_TO = 40  # lines
WINDOW = 8  # lines either side of a changed line
MAX_LINES = 70
# A gap this small costs fewer tokens shown than marked.
_SMALL_GAP = 2
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMON = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {"self", "cls", "torch", "nn", "F", "np", "i", "j", "k", "x", "_"}


def _names(text: str) -> set[str]:
    code = text.split("#", 1)[0]
    return {n for n in _IDENTIFIER.findall(code) if n not in _COMMON}


def _signature(hunk: TensorHunk) -> list[int]:
    """The decorators and the `def ...:` header, when the hunk starts with them."""
    out = []
    in_header = False
    for number, text in hunk.lines[:12]:
        out.append(number)
        code = text.split("#", 1)[0].rstrip()
        in_header = in_header or code.lstrip().startswith(("def ", "async def ", "class "))
        if in_header and code.endswith(":"):
            return out
    return []


def focus(hunk: TensorHunk) -> TensorHunk:
    if len(hunk.lines) <= WHOLE_UP_TO:
        return hunk
    numbers = [n for n, _ in hunk.lines]
    text = dict(hunk.lines)
    changed = set(hunk.changed)
    keep = set(_signature(hunk)) | changed
    near = {n for c in changed for n in range(c - WINDOW, c + WINDOW + 1) if n in text}
    keep |= near
    names = set().union(*(_names(text[c]) for c in changed if c in text))
    related = sorted((n for n in numbers if n not in keep and names & _names(text[n])), key=lambda n: min(abs(n - c) for c in changed))
    keep |= set(related[: max(0, MAX_LINES - len(keep))])
    # Fill gaps too small to be worth a marker.
    ordered = sorted(keep)
    for a, b in itertools.pairwise(ordered):
        if 1 < b - a <= _SMALL_GAP + 1:
            keep.update(range(a + 1, b))
    return replace(hunk, lines=tuple((n, text[n]) for n in numbers if n in keep))
