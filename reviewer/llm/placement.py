"""Put an LLM finding on the lines it is about, trusting the quoted code over the numbers.

Models misnumber lines (old-file numbers, off by a few, counting from the hunk), but they
quote well. A finding that quotes its code is placed where the quote stands in the hunk
its line number points into: at that line if the quote is there, else at the nearest
place in that hunk where it is. A line outside every hunk shown, or a quote found nowhere
in the hunk, is not guessed at: the finding is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from review_copies.review.hunks import TensorHunk

_NUMBER_COLUMN = re.compile(r"^\s*>?\s*\d+\| ?")
# A quote shorter than this could match anywhere: only whole lines count for it.
_MIN_FRAGMENT = 6


@dataclass(frozen=True)
class Placed:
    """Where the finding goes, and how far the model's own numbers were off."""

    line: int
    end_line: int
    hunk: TensorHunk
    shift: int


def strip_number_column(lines: Sequence[str]) -> list[str]:
    """Drop the `>  41| ` column when a model copied it with the code (on every line)."""
    if lines and all(_NUMBER_COLUMN.match(line) for line in lines if line.strip()):
        return [_NUMBER_COLUMN.sub("", line, count=1) for line in lines]
    return list(lines)


def quote_lines(code: str | None) -> list[str]:
    if not code:
        return []
    lines = [line.rstrip() for line in code.replace("\r\n", "\n").split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return [line.rstrip() for line in strip_number_column(lines)]


def _level(text: str, quoted: str, single: bool) -> int | None:
    """0: the same line; 1: the same but for indentation; 2: a fragment of the line."""
    if text.rstrip() == quoted:
        return 0
    if text.strip() == quoted.strip():
        return 1
    fragment = quoted.strip()
    if single and len(fragment) >= _MIN_FRAGMENT and fragment in text:
        return 2
    return None


def _matches(hunk: TensorHunk, quote: Sequence[str]) -> list[tuple[int, int]]:
    """(first line, worst level) of every place in the hunk where the quote stands."""
    numbers = [n for n, _ in hunk.lines]
    texts = [t for _, t in hunk.lines]
    out = []
    for i in range(len(texts) - len(quote) + 1):
        if numbers[i + len(quote) - 1] - numbers[i] != len(quote) - 1:
            continue  # the quote would span lines that were not shown
        levels = [_level(texts[i + j], quote[j], len(quote) == 1) for j in range(len(quote))]
        if all(level is not None for level in levels):
            out.append((numbers[i], max(level for level in levels if level is not None)))
    return out


def _shown(hunk: TensorHunk, first: int, last: int) -> bool:
    numbers = {n for n, _ in hunk.lines}
    return all(n in numbers for n in range(first, last + 1))


def _span(hunks: Sequence[TensorHunk]) -> str:
    return ", ".join(f"{h.start}-{h.end}" for h in hunks)


def place(line: int, end_line: int, code: str | None, hunks: Sequence[TensorHunk]) -> Placed | str:
    """The finding's lines inside one hunk of its file, or why it cannot be placed."""
    around = [h for h in hunks if h.start <= line <= h.end]
    if not around:
        return f"line {line} is outside the hunks shown for this file (lines {_span(hunks)})"
    quote = quote_lines(code)
    if not quote:
        last = max(line, end_line)
        inside = next((h for h in around if _shown(h, line, last)), None)
        if inside is None:
            return f"lines {line}-{last} are not all among the lines shown (hunk lines {_span(around)})"
        return Placed(line, last, inside, 0)
    candidates = [(abs(start - line), level, start, h) for h in around for start, level in _matches(h, quote)]
    if not candidates:
        return f"the quoted code is not in the hunk around line {line} (lines {_span(around)})"
    _, _, start, hunk = min(candidates, key=lambda c: (c[0], c[1], c[2]))
    return Placed(start, start + len(quote) - 1, hunk, start - line)
