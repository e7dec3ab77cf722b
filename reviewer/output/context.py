"""What a format needs besides the report: the rules that ran (for explanations), colour, and
a one-line description of what was reviewed, how wide the terminal is, and whether the rules'
explanations are wanted (`--explain`)."""

from __future__ import annotations

from dataclasses import dataclass

from review_copies.rules import Rule

# A width no line reaches: text that is not for a terminal is not wrapped.
NO_WRAP = 1 << 20


@dataclass(frozen=True)
class RenderContext:
    rules: tuple[type[Rule], ...]
    color: bool = False
    description: str = ""
    # Columns the text report wraps to (the terminal's width, or COLUMNS; NO_WRAP off a terminal).
    width: int = NO_WRAP
    explain: bool = False
