"""The LLM reviewer: prompts built on the copy rules, any OpenAI-compatible model, and
nothing posted that has not been checked against the hunks it was shown.

`make_stage` is what the command line calls when the LLM is on. Nothing here opens a
connection before the stage runs on a change that has tensor hunks to review.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING

from review_copies.model.findings import Category, Report
from review_copies.rules import Rule

if TYPE_CHECKING:
    from review_copies.cli import Settings
    from review_copies.review.pipeline import StaticResult

__all__ = ["chosen_categories", "make_stage"]


def chosen_categories(select: Iterable[str], ignore: Iterable[str], rules: Sequence[type[Rule]]) -> list[Category]:
    """The categories the LLM is asked about: those the configuration selects (by name or
    through its selected rules), less those it ignores by name."""
    select, ignore = set(select), set(ignore)
    wanted = set(Category) if not select else {c for c in Category if c.value in select} | {r.category for r in rules}
    return [c for c in Category if c in wanted and c.value not in ignore]


def make_stage(settings: Settings, rules: Sequence[type[Rule]], stderr: IO[str]) -> Callable[[Report, StaticResult], Report]:
    from review_copies.cli import config_root
    from review_copies.llm.options import build_options
    from review_copies.llm.stage import LLMStage

    if settings.api_key is None:
        raise ValueError("the LLM stage needs an API key; the command line reviews offline without one")
    opts = build_options(settings.model, settings.api_key, settings.base_url, settings.llm, config_root(settings.request), dict(os.environ))
    return LLMStage(opts, rules, chosen_categories(settings.select, settings.ignore, rules), stderr)
