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


def review(changeset: ChangeSet, options: StaticOptions, stages: Sequence[Stage] = ()) -> Report:
    """The whole review: the static stage, then `stages` in order (the LLM's, the sandbox's;
    none when offline and without the sandbox)."""
    started = time.perf_counter()
    static = run_static(changeset, options)
    report = Report(findings=list(static.findings), notes=list(static.notes), stats=static.stats)
    for stage in stages:
        report = stage(report, static)
    return replace(report, stats=replace(report.stats, seconds=time.perf_counter() - started))
