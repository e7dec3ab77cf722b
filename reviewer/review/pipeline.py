"""The review, end to end: the change's files through the static rules, then each further
stage in turn (the LLM, the sandbox), each a function from the report so far to a new one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from review_copies.model.report import Report
from review_copies.review.static import StaticOptions, StaticResult, run_static
from review_copies.source.changes import ChangeSet


class Stage(Protocol):
    def __call__(self, report: Report, static: StaticResult) -> Report:
        """The next report: this stage's findings, verdicts and stats added to `report`."""


def _warm_up(stages: Sequence[Stage]) -> None:
    """Stages that can get ready early (the sandbox's worker imports torch) start now."""
    for stage in stages:
        warm_up = getattr(stage, "warm_up", None)
        if callable(warm_up):
            warm_up()


def review(changeset: ChangeSet, options: StaticOptions, stages: Sequence[Stage] = ()) -> Report:
    """The whole review: the static stage, then `stages` in order (the LLM's, the sandbox's;
    none when offline and without the sandbox)."""
    started = time.perf_counter()
    static = run_static(changeset, options, first_finding=lambda: _warm_up(stages))
    if static.hunks:
        _warm_up(stages)  # the LLM may find what the rules did not
    report = Report(findings=list(static.findings), notes=list(static.notes), stats=static.stats)
    for stage in stages:
        report = stage(report, static)
    return replace(report, stats=replace(report.stats, seconds=time.perf_counter() - started))
