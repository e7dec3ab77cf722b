"""The sandbox stage of the pipeline: every finding gets a verdict (contract section 3),
refuted findings move to `dropped` with the reason, and the stage's stats say how the
probes were isolated, how many ran, how many verdicts came from the cache and how long it
took. The worker can be launched early (`warm_up`), so that torch imports while the static
rules run. This process never imports torch.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import IO

from review_copies.model.findings import Dropped, Finding, Status
from review_copies.model.report import Report
from review_copies.model.settings import DEFAULT_SANDBOX_BUDGET
from review_copies.review.static import StaticResult
from review_copies.sandbox.protocol import Limits
from review_copies.sandbox.verify.cache import VerdictCache
from review_copies.sandbox.verify.callers import Callers
from review_copies.sandbox.verify.client import Sandbox, SandboxUnavailable
from review_copies.sandbox.verify.verifier import Verifier
from review_copies.source.tree import RepoFiles


class SandboxStage:
    """The stage for `review`: `device` is auto, cpu or cuda; `budget` caps the review's
    sandbox seconds (None: no cap); `files` are the repository's, where callers of a
    function are found; `cache_dir` keeps verdicts across runs (None: no cache); `sandbox`
    lets a caller reuse one warm worker (it is then the caller's to close); `parallel` is
    how many probes run at once (None: one per core); `keep_warm` is how long the worker
    waits for the next review (0: it ends with this one); `unsafe_local` runs probes even
    on a host without namespaces (otherwise every finding there is `not-run`); on an
    `untrusted` change (a stranger's pull request) a refutation never removes a static
    finding: the code that was run could have lied to the observer in its own process;
    `hide`: the reviewed checkout, which probes never read."""

    def __init__(
        self, device: str, stderr: IO[str], *, limits: Limits | None = None, sandbox: Sandbox | None = None,
        files: RepoFiles | None = None, budget: float | None = DEFAULT_SANDBOX_BUDGET, cache_dir: Path | None = None, parallel: int | None = None,
        keep_warm: float = 0.0, unsafe_local: bool = False, untrusted: bool = False, hide: tuple[str, ...] = (),
    ) -> None:
        self.untrusted = untrusted
        self.parallel = parallel
        self.device = device
        self.stderr = stderr
        self.owned = sandbox is None
        self.sandbox = sandbox or Sandbox(limits, keep_warm=keep_warm, unsafe_local=unsafe_local, hide=hide)
        self.files = files
        self.budget = budget
        self.cache_dir = cache_dir

    def warm_up(self) -> None:
        """Start the worker now, without waiting for it: there will be findings to check."""
        with contextlib.suppress(SandboxUnavailable):  # said once, when the stage runs
            self.sandbox.launch()

    def __call__(self, report: Report, static: StaticResult) -> Report:
        try:
            if not report.findings:
                return replace(report, stats=replace(report.stats, sandbox=replace(report.stats.sandbox, state="on")))
            return self.verify(report, static.texts)
        finally:
            if self.owned:
                self.sandbox.close()

    def verify(self, report: Report, texts: dict[str, str]) -> Report:
        """The findings of `report` with their verdicts, the refuted ones dropped."""
        started = time.monotonic()
        cache = VerdictCache(self.cache_dir)
        verifier = Verifier(self.sandbox, self.device, self.stderr, Callers(self.files), cache, self.budget, self.parallel)
        outcome = verifier.verify_all([(f, texts.get(f.path)) for f in report.findings])
        if outcome.unavailable:
            self.stderr.write(f"review-copies: the sandbox is unavailable ({outcome.unavailable}); findings are reported unverified\n")
        if cache.problem:
            self.stderr.write(f"review-copies: warning: {cache.problem}\n")
        if outcome.over_budget:
            self.stderr.write(
                f"review-copies: the sandbox budget of {self.budget:g} s ran out: {outcome.over_budget} finding(s) are shown without a verdict "
                "(--sandbox-budget gives it more)\n"
            )
        kept: list[Finding] = []
        dropped = list(report.dropped)
        for finding, verification in zip(report.findings, outcome.verifications):
            checked = finding.with_verification(verification)
            if verification.status is Status.REFUTED and self.untrusted and finding.source == "static":
                kept.append(finding.with_verification(replace(
                    verification, status=Status.INCONCLUSIVE,
                    evidence=f"not confirmed: the run showed no effect ({verification.evidence}), but the code under review ran in the "
                    "observer's process and could hide it, so on a pull request a run never removes a static finding",
                )))
            elif verification.status is Status.REFUTED:
                dropped.append(Dropped(checked, f"sandbox refuted: {verification.evidence}"))
            else:
                kept.append(checked)
        stats = replace(report.stats.sandbox, state="on", runs=report.stats.sandbox.runs + outcome.runs, cache_hits=outcome.cache_hits,
                        seconds=round(time.monotonic() - started, 3), over_budget=outcome.over_budget)
        info = self.sandbox.info
        if outcome.unavailable:
            stats = replace(stats, network=f"not isolated: the sandbox did not start ({outcome.unavailable})")
        elif outcome.started or info.torch:
            isolation = info.isolation
            stats = replace(stats, network=isolation.network, filesystem=isolation.filesystem, processes=isolation.processes, proc=isolation.proc,
                            devices=", ".join(outcome.devices) or "none", torch=info.torch,
                            worker="kept warm by an earlier review" if info.reused else f"started in {info.start_seconds:.1f} s")
        else:
            stats = replace(stats, network="not started: every verdict came from the cache", devices=", ".join(outcome.devices) or "none")
        return replace(report, findings=kept, dropped=dropped, stats=replace(report.stats, sandbox=stats))
