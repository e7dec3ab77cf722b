"""The stage that stands for the LLM when there is none (`--offline`, or no API key): it
says so in the coverage, and imports no client."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from review_copies.llm import coverage
from review_copies.model.report import Report
from review_copies.review.static import StaticResult


def offline_stage(reason: str) -> Callable[[Report, StaticResult], Report]:
    def stage(report: Report, static: StaticResult) -> Report:
        llm = replace(report.stats.llm, model="offline")
        line = coverage.offline_line(reason, report.stats.tensor_hunks)
        return replace(report, stats=replace(report.stats, llm=llm), coverage=[*report.coverage, line])

    return stage
