"""The static stage: stream the change's files, review each one (`review.engine`) in this
process or, for large changes, in a pool of processes, and gather what they found.

Files are read one at a time; only findings, notes and (when the LLM needs them) tensor
hunks are kept, with the new text of the files they are about.
"""

from __future__ import annotations

import fnmatch
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from review_copies.analysis.parse import SourceProblem, decode_source
from review_copies.model.findings import Finding, Note
from review_copies.model.report import StaticStats, Stats
from review_copies.review.engine import FileJob, FileResult, review_file
from review_copies.review.hunks import TensorHunk
from review_copies.rules import Rule
from review_copies.source.changes import Change, ChangeSet

# Below this many files a pool costs more than it saves.
POOL_THRESHOLD = 24


@dataclass(frozen=True)
class StaticOptions:
    """What the static stage needs to know."""

    rules: tuple[type[Rule], ...]
    exclude: tuple[str, ...] = ()
    want_hunks: bool = False
    workers: int = 0  # 0: one per core
    # Where the repository index caches what it read (None: no cache).
    index_cache: str | None = None
    # Hears the number of files reviewed so far (a progress line on a terminal).
    progress: Callable[[int], None] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class StaticResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    hunks: list[TensorHunk] = field(default_factory=list)
    # The new text of files that have findings or hunks (for the LLM and the sandbox).
    texts: dict[str, str] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)


@dataclass
class _Tally:
    """Counts kept while the files stream by; they become the report's `Stats`."""

    files: int = 0
    python_files: int = 0
    hunks: int = 0
    tensor_hunks: int = 0
    without_torch: int = 0
    suppressed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def stats(self) -> Stats:
        static = StaticStats(python_files_without_torch=self.without_torch, suppressed=self.suppressed)
        return Stats(files=self.files, python_files=self.python_files, hunks=self.hunks, tensor_hunks=self.tensor_hunks, skipped=dict(self.skipped), static=static)


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


def _jobs(changeset: ChangeSet, options: StaticOptions, tally: _Tally, notes: list[Note]) -> Iterator[FileJob]:
    codes = tuple(r.code for r in options.rules)
    for change in changeset.changes:
        tally.files += 1
        reason = _skip_reason(change, options.exclude)
        if reason is not None:
            tally.skip(reason)
            continue
        data = changeset.source.read(change)
        if data is None:
            tally.skip("unreadable")
            notes.append(Note("the new version of this file could not be read; skipped", change.path))
            continue
        try:
            text = decode_source(data)
        except SourceProblem as problem:
            tally.skip("undecodable" if "binary" not in str(problem) else "binary")
            notes.append(Note(str(problem), change.path))
            continue
        tally.python_files += 1
        tally.hunks += len(change.hunks) if not change.whole_file else 1
        yield FileJob(change.path, text, change.changed_lines, codes, options.want_hunks, _base(changeset, change), changeset.files, options.index_cache)


def _base(changeset: ChangeSet, change: Change) -> str | None:
    """The file before the change, for comparing a function with its earlier self."""
    if changeset.base is None or change.changed_lines is None:
        return None
    data = changeset.base.read(change)
    if data is None:
        return None
    try:
        return decode_source(data)
    except SourceProblem:
        return None


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


def run_static(changeset: ChangeSet, options: StaticOptions, first_finding: Callable[[], None] | None = None) -> StaticResult:
    """Every file of the change through the rules; `first_finding` is called once, as soon
    as there is a finding (a later stage may start getting ready)."""
    tally = _Tally()
    findings: list[Finding] = []
    notes: list[Note] = []
    hunks: list[TensorHunk] = []
    texts: dict[str, str] = {}
    workers = options.workers or (os.cpu_count() or 1)
    for done, (job, result) in enumerate(_results(_jobs(changeset, options, tally, notes), workers), start=1):
        if options.progress is not None:
            options.progress(done)
        tally.without_torch += not result.mentions_torch
        tally.suppressed += result.suppressed
        if result.findings and not findings and first_finding is not None:
            first_finding()
        findings.extend(result.findings)
        notes.extend(result.notes)
        tally.tensor_hunks += result.tensor_hunks
        if options.want_hunks:
            hunks.extend(result.hunks)
        if result.findings or (options.want_hunks and result.hunks):
            texts[job.path] = job.text
    return StaticResult(findings=findings, notes=notes, hunks=hunks, texts=texts, stats=tally.stats())
