"""What a format needs besides the report: the rules that ran (for explanations), colour, and
a one-line description of what was reviewed."""

from __future__ import annotations

from dataclasses import dataclass

from review_copies.rules import Rule


@dataclass(frozen=True)
class RenderContext:
    rules: tuple[type[Rule], ...]
    color: bool = False
    description: str = ""
