"""Verdicts for findings: for each finding the code it is about is extracted
(`verify.subjects`, with the repository's callers for inputs), sent with its recipes to
the warm worker, run as written and as fixed on each device, and judged (`verify.verdict`).

Probes run side by side, as many as the machine has cores (up to eight), most severe
findings first; a verdict already on disk (`verify.cache`) starts no probe. A review's
sandbox time has a budget: when it runs out, probes in flight are stopped (their findings
become `inconclusive`) and findings not yet sent are `not-run`, each saying so. Untrusted
code can make a probe fail, hang or be killed; that finding becomes `inconclusive` and the
review goes on. This process never imports torch.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import IO

from review_copies.model.findings import Finding, Status, Verification
from review_copies.rules import rule_by_code
from review_copies.sandbox import recipes as recipe_book
from review_copies.sandbox.protocol import ProbeAnswer, ProbeRequest, Subject
from review_copies.sandbox.verify import subjects, verdict
from review_copies.sandbox.verify.cache import VerdictCache, request_key
from review_copies.sandbox.verify.callers import Callers
from review_copies.sandbox.verify.client import Sandbox, SandboxUnavailable

MAX_PARALLEL = 8
NOT_RUN = Status.NOT_RUN.value


@dataclass(frozen=True)
class DeviceVerdict:
    """What the runs on one device decided."""

    device: str
    decision: verdict.Decision


@dataclass(frozen=True)
class Plan:
    """What to run for one finding: its subject and recipes."""

    finding: Finding
    subject: Subject
    recipes: tuple[str, ...]


@dataclass
class _Job:
    """One probe to send: a finding on one device, with or without the LLM's probe code."""

    index: int
    device: str
    request: ProbeRequest
    retry_without_probe: bool = False
    # Sent again once when the worker, not the probe, failed under it.
    resent: bool = False


@dataclass
class Outcome:
    """What `verify_all` found, with what it cost."""

    verifications: list[Verification]
    runs: int = 0
    cache_hits: int = 0
    over_budget: int = 0
    started: bool = False
    unavailable: str | None = None
    devices: list[str] = field(default_factory=list)


def gpu_visible() -> bool:
    """Whether the worker will find a GPU, read as it reads it (device files, not CUDA)."""
    if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0"):
        return True
    gpus = "/proc/driver/nvidia/gpus"
    return os.path.isdir(gpus) and bool(os.listdir(gpus))


def cores() -> int:
    try:
        return max(1, min(MAX_PARALLEL, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):
        return max(1, min(MAX_PARALLEL, os.cpu_count() or 1))


class Verifier:
    def __init__(
        self, sandbox: Sandbox, wanted: str, stderr: IO[str], callers: Callers | None = None,
        cache: VerdictCache | None = None, budget: float | None = None, parallel: int | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.wanted = wanted
        self.stderr = stderr
        self.callers = callers or Callers(None)
        self.cache = cache or VerdictCache(None)
        self.budget = budget
        self.parallel = parallel or cores()

    def devices(self) -> list[str]:
        """The devices to run on; before the worker started, as its device check will say."""
        cuda = self.sandbox.info.cuda if self.sandbox.alive and self.sandbox.info.torch else gpu_visible()
        if self.wanted == "cpu":
            return ["cpu"]
        if self.wanted == "cuda":
            return ["cuda"] if cuda else []
        return ["cpu", "cuda"] if cuda else ["cpu"]

    # ------------------------------------------------------------- one finding

    def plan(self, finding: Finding, text: str | None, devices: list[str]) -> Plan | Verification:
        """What to run, or the verdict when nothing can be run."""
        if text is None:
            return Verification(Status.NOT_RUN, None, "the new text of the file is not available")
        if not devices:
            return Verification(Status.NOT_RUN, None, "--device cuda was asked for, and no GPU is available")
        try:
            subject = subjects.build(finding, text, self.callers)
        except subjects.NotRunnable as exc:
            return Verification(Status.NOT_RUN, None, str(exc))
        except Exception as exc:  # the reviewed code can be anything: never fail the review
            return Verification(Status.INCONCLUSIVE, None, f"could not extract the code: {type(exc).__name__}: {exc}")
        rule = rule_by_code(finding.rule)
        if rule is not None and not rule.observable:
            return Verification(Status.NOT_RUN, None, "what this rule is about happens outside torch (in NumPy), where the sandbox cannot observe it")
        recipes = recipe_book.recipes_for(finding.category.value, rule.recipes if rule else ())
        if not recipes:
            return Verification(Status.NOT_RUN, None, f"no recipe for category {finding.category.value}")
        return Plan(finding, subject, recipes)

    def verification(self, finding: Finding, text: str | None, devices: list[str]) -> Verification:
        """One finding's verdict, its probes run one after the other."""
        return self.verify_all([(finding, text)], devices).verifications[0]

    # ------------------------------------------------------------- many findings

    def verify_all(self, items: list[tuple[Finding, str | None]], devices: list[str] | None = None) -> Outcome:
        started = time.monotonic()
        deadline = started + self.budget if self.budget is not None else None
        devices = self.devices() if devices is None else devices
        plans = [self.plan(f, text, devices) for f, text in items]
        decisions: list[dict[str, verdict.Decision]] = [{} for _ in items]
        outcome = Outcome([], devices=devices)
        queue: deque[_Job] = deque()
        order = sorted(range(len(items)), key=lambda i: (-items[i][0].severity.rank, i))
        for i in order:
            plan = plans[i]
            if isinstance(plan, Plan):
                for device in devices:
                    queue.append(self._job(i, plan, device, plan.finding.probe if device == "cpu" else ""))
        runs_before = self.sandbox.runs
        waiting: deque[_Job] = deque()
        for job in queue:
            cached = self.cache.get(self._key(job))
            if cached is None:
                waiting.append(job)
                continue
            decisions[job.index][job.device] = cached
            if job.retry_without_probe and cached.status == verdict.INCONCLUSIVE:
                plan = plans[job.index]
                assert isinstance(plan, Plan)
                retry = self._job(job.index, plan, job.device, "")
                again = self.cache.get(self._key(retry))
                if again is None:
                    waiting.append(retry)
                else:
                    self._keep(decisions[job.index], job.device, again)
        if waiting:
            try:
                self.sandbox.start()
                outcome.started = True
            except SandboxUnavailable as exc:
                outcome.unavailable = str(exc)
                for job in waiting:
                    decisions[job.index][job.device] = verdict.Decision(NOT_RUN, f"the sandbox could not start: {exc}")
                waiting.clear()
        self._run(waiting, plans, decisions, deadline, outcome)
        outcome.runs = self.sandbox.runs - runs_before
        outcome.cache_hits = self.cache.hits
        for i, plan in enumerate(plans):
            if not isinstance(plan, Plan):
                outcome.verifications.append(plan)
                continue
            found = [DeviceVerdict(d, decisions[i][d]) for d in devices if d in decisions[i]]
            outcome.verifications.append(_without_gpu(plan.finding, combine(found), devices))
        return outcome

    def _job(self, index: int, plan: Plan, device: str, probe: str) -> _Job:
        request = ProbeRequest(device=device, recipes=plan.recipes, subject=plan.subject, probe=probe, claims=tuple(sorted(plan.finding.claims)))
        return _Job(index, device, request, retry_without_probe=bool(probe) and device == "cpu")

    def _key(self, job: _Job) -> str:
        return request_key(replace(job.request, limits=self.sandbox.limits), self.sandbox.python)

    def _run(
        self, waiting: deque[_Job], plans: list[Plan | Verification], decisions: list[dict[str, verdict.Decision]],
        deadline: float | None, outcome: Outcome,
    ) -> None:
        in_flight: dict[int, _Job] = {}
        while waiting or in_flight:
            while waiting and len(in_flight) < self.parallel and (deadline is None or time.monotonic() < deadline):
                job = waiting.popleft()
                try:
                    sent = self.sandbox.submit(job.request)
                except SandboxUnavailable as exc:
                    decisions[job.index][job.device] = verdict.Decision(verdict.INCONCLUSIVE, f"the probe did not finish: {exc}")
                    continue
                in_flight[sent.id] = job
            if not in_flight:
                break
            answers = [a for a in [self.sandbox.collect(deadline)] if a is not None] + self.sandbox.failed()
            if not answers:
                break  # the budget ran out
            for answer in answers:
                job = in_flight.pop(answer.id, None)
                if job is None:
                    continue
                if not answer.ok and answer.error.startswith("the sandbox worker") and not job.resent:
                    job.resent = True
                    waiting.appendleft(job)
                    continue
                plan = plans[job.index]
                assert isinstance(plan, Plan)
                decision = self._decision(answer, plan, job)
                if answer.ok and answer.result is not None:
                    self.cache.put(self._key(job), decision)
                if job.retry_without_probe and decision.status == verdict.INCONCLUSIVE:
                    # The LLM's probe may be wrong; the searched inputs get their chance.
                    retry = self._job(job.index, plan, job.device, "")
                    cached = self.cache.get(self._key(retry))
                    if cached is None:
                        waiting.appendleft(retry)
                    elif cached.status != verdict.INCONCLUSIVE:
                        decision = cached
                self._keep(decisions[job.index], job.device, decision)
        if in_flight or waiting:
            self._over_budget(in_flight, waiting, decisions, outcome)

    @staticmethod
    def _keep(decided: dict[str, verdict.Decision], device: str, decision: verdict.Decision) -> None:
        """A device's decision; a later one (the searched inputs after the LLM's probe)
        replaces it only when it decides."""
        current = decided.get(device)
        if current is None or (current.status == verdict.INCONCLUSIVE and decision.status != verdict.INCONCLUSIVE):
            decided[device] = decision

    def _over_budget(self, in_flight: dict[int, _Job], waiting: deque[_Job], decisions: list[dict[str, verdict.Decision]], outcome: Outcome) -> None:
        budget = f"the review's sandbox budget of {self.budget:g} s ran out"
        more = "--sandbox-budget (or `sandbox-budget` in [tool.review-copies]) gives it more"
        self.sandbox.close()  # stops the probes still running
        for job in in_flight.values():
            if job.device not in decisions[job.index]:
                decisions[job.index][job.device] = verdict.Decision(verdict.INCONCLUSIVE, f"stopped when {budget} ({more})")
        for job in waiting:
            decisions[job.index].setdefault(job.device, verdict.Decision(NOT_RUN, f"not run: {budget} before this finding's turn ({more})"))
        outcome.over_budget = len({job.index for job in [*in_flight.values(), *waiting]})

    def _decision(self, answer: ProbeAnswer, plan: Plan, job: _Job) -> verdict.Decision:
        if not answer.ok or answer.result is None:
            return verdict.Decision(verdict.INCONCLUSIVE, f"the probe did not finish: {answer.error or 'no answer'}")
        try:
            return verdict.decide(answer.result, plan.recipes, plan.subject.fixed is not None, plan.finding.claims, plan.subject.original.watch)
        except Exception as exc:
            return verdict.Decision(verdict.INCONCLUSIVE, f"sandbox error: {type(exc).__name__}: {exc}")


def _without_gpu(finding: Finding, verification: Verification, devices: list[str]) -> Verification:
    """A claim about a GPU is never refuted, nor left unexplained, where no GPU ran it."""
    if "gpu" not in finding.claims or "cuda" in devices or verification.status in (Status.CONFIRMED, Status.NOT_RUN):
        return verification
    evidence = f"needs a CUDA device: this machine has none (on the CPU: {verification.evidence})" if verification.evidence else "needs a CUDA device: this machine has none"
    return Verification(Status.INCONCLUSIVE, verification.device, evidence)


def combine(outcomes: list[DeviceVerdict]) -> Verification:
    """One verdict from one or two devices, saying where they differ."""
    if not outcomes:
        return Verification(Status.NOT_RUN, None, "no probe ran")
    if len(outcomes) == 1:
        o = outcomes[0]
        return Verification(Status(o.decision.status), o.device, o.decision.evidence)
    by_status = {o.decision.status for o in outcomes}
    if len(by_status) == 1:
        first = outcomes[0]
        return Verification(Status(first.decision.status), "+".join(o.device for o in outcomes), first.decision.evidence)
    fix_refuted = next((o for o in outcomes if o.decision.status == verdict.REFUTED and o.decision.recipe == "fix"), None)
    lead = fix_refuted or next((o for o in outcomes if o.decision.status == verdict.CONFIRMED), None)
    lead = lead or next((o for o in outcomes if o.decision.status == verdict.REFUTED), outcomes[0])
    others = "; ".join(f"on {o.device} {o.decision.status}: {o.decision.evidence}" for o in outcomes if o is not lead)
    return Verification(Status(lead.decision.status), lead.device, f"{lead.decision.evidence} (on {lead.device}; {others})")
