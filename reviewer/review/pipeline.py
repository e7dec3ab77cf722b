"""The review, end to end: change -> files -> rules (+ LLM) -> sandbox -> report.

Data flows one way. Files are streamed from the change and reviewed one at a time (or
by a process pool for large changes); only findings, notes and, when the LLM needs
them, tensor hunks are kept.
"""

from __future__ import annotations

import fnmatch
import multiprocessing
import os
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from review_copies.model.findings import Finding, Note, Report, Stats
from review_copies.review.engine import FileJob, FileResult, review_file
from review_copies.review.hunks import TensorHunk
from review_copies.rules import Rule
from review_copies.source.changes import Change, ChangeSet
from review_copies.analysis.parse import SourceProblem, decode

# Below this many files a pool costs more than it saves.
POOL_THRESHOLD = 24


@dataclass(frozen=True)
class Plan:
    """What the static stage needs to know."""

    rules: tuple[type[Rule], ...]
    exclude: tuple[str, ...] = ()
    want_hunks: bool = False
    workers: int = 0  # 0: one per core


@dataclass
class StaticResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    hunks: list[TensorHunk] = field(default_factory=list)
    # The new text of files that have findings or hunks (for the LLM and the sandbox).
    texts: dict[str, str] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)


def _skip_reason(change: Change, exclude: tuple[str, ...]) -> str | None:
    if change.status == "deleted":
        return "deleted"
    if change.submodule:
        return "submodule"
    if change.symlink:
        return "symlink"
    if not change.is_python:
        return "not-python"
    if change.binary:
        return "binary"
    if any(fnmatch.fnmatch(change.path, pattern) for pattern in exclude):
        return "excluded"
    if not change.whole_file and not change.changed_lines:
        return "no-added-lines"
    return None


def _jobs(changeset: ChangeSet, plan: Plan, stats: Stats, notes: list[Note]) -> Iterator[FileJob]:
    codes = tuple(r.code for r in plan.rules)
    for change in changeset.changes:
        stats.files += 1
        reason = _skip_reason(change, plan.exclude)
        if reason is not None:
            stats.skip(reason)
            continue
        data = changeset.source.read(change)
        if data is None:
            stats.skip("unreadable")
            notes.append(Note("the new version of this file could not be read; skipped", change.path))
            continue
        try:
            text = decode(data)
        except SourceProblem as problem:
            stats.skip("undecodable" if "binary" not in str(problem) else "binary")
            notes.append(Note(str(problem), change.path))
            continue
        stats.python_files += 1
        stats.hunks += len(change.hunks) if not change.whole_file else 1
        yield FileJob(change.path, text, change.changed_lines, codes, plan.want_hunks)


def _run_serial(jobs: Iterable[FileJob]) -> Iterator[tuple[FileJob, FileResult]]:
    for job in jobs:
        yield job, review_file(job)


def _run_pooled(jobs: Iterator[FileJob], workers: int) -> Iterator[tuple[FileJob, FileResult]]:
    """Results in submission order, with a bounded number of files in flight."""
    context = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
    in_flight: list[tuple[FileJob, Future[FileResult]]] = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        for job in jobs:
            in_flight.append((job, pool.submit(review_file, job)))
            if len(in_flight) >= workers * 4:
                done_job, future = in_flight.pop(0)
                yield done_job, future.result()
        for done_job, future in in_flight:
            yield done_job, future.result()


def _results(jobs: Iterator[FileJob], workers: int) -> Iterator[tuple[FileJob, FileResult]]:
    head: list[FileJob] = []
    for job in jobs:
        head.append(job)
        if len(head) >= POOL_THRESHOLD:
            break
    if len(head) < POOL_THRESHOLD or workers <= 1:
        yield from _run_serial(head)
        yield from _run_serial(jobs)
        return

    def chained() -> Iterator[FileJob]:
        yield from head
        yield from jobs

    yield from _run_pooled(chained(), workers)


def run_static(changeset: ChangeSet, plan: Plan) -> StaticResult:
    out = StaticResult()
    workers = plan.workers or (os.cpu_count() or 1)
    files_without_torch = 0
    suppressed = 0
    for job, result in _results(_jobs(changeset, plan, out.stats, out.notes), workers):
        files_without_torch += not result.mentions_torch
        suppressed += result.suppressed
        out.findings.extend(result.findings)
        out.notes.extend(result.notes)
        out.stats.tensor_hunks += len(result.hunks)
        if plan.want_hunks:
            out.hunks.extend(result.hunks)
        if result.findings or (plan.want_hunks and result.hunks):
            out.texts[job.path] = job.text
    out.stats.extra["python_files_without_torch"] = files_without_torch
    out.stats.extra["suppressed"] = suppressed
    return out


def review(changeset: ChangeSet, plan: Plan, llm_stage=None, sandbox_stage=None) -> Report:
    """The whole review. The LLM and sandbox stages are callables that take the report so
    far and return the next one; either may be None (offline, --no-sandbox)."""
    started = time.perf_counter()
    static = run_static(changeset, plan)
    report = Report(findings=static.findings, notes=static.notes, stats=static.stats)
    if llm_stage is not None:
        report = llm_stage(report, static)
    if sandbox_stage is not None:
        report = sandbox_stage(report, static)
    report.stats.seconds = time.perf_counter() - started
    return report
