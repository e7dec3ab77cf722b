"""What a format needs besides the report: the rules that ran (for explanations), colour, and
a one-line description of what was reviewed, how wide the terminal is, and whether the rules'
explanations are wanted (`--explain`)."""

from __future__ import annotations

from dataclasses import dataclass

from review_copies.rules import Rule


@dataclass(frozen=True)
class RenderContext:
    rules: tuple[type[Rule], ...]
    color: bool = False
    description: str = ""
    # Columns the text report wraps to (the terminal's width, or COLUMNS, else 100).
    width: int = 100
    explain: bool = False
