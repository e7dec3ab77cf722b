"""The sandbox stage of the pipeline: every finding gets a verdict (contract section 3).

For each finding the code it is about is extracted (`sandbox.subjects`), sent with its
recipes to the warm worker, run as written and as fixed on each device, and judged
(`sandbox.verdict`). Refuted findings move to `dropped` with the reason. Untrusted code
can make a probe fail, hang or be killed; that finding becomes `inconclusive` and the
review goes on. This process never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO

from review_copies.model.findings import Dropped, Finding, Status, Verification
from review_copies.model.report import Report
from review_copies.review.static import StaticResult
from review_copies.rules import rule_by_code
from review_copies.sandbox import recipes as recipe_book
from review_copies.sandbox.protocol import Limits, ProbeRequest, Subject
from review_copies.sandbox.verify import subjects, verdict
from review_copies.sandbox.verify.client import Sandbox, SandboxUnavailable


@dataclass(frozen=True)
class DeviceVerdict:
    """What the runs on one device decided."""

    device: str
    decision: verdict.Decision


def sandbox_stage(device: str, stderr: IO[str], limits: Limits | None = None, sandbox: Sandbox | None = None) -> Callable[[Report, StaticResult], Report]:
    """The stage for `review`: `device` is auto, cpu or cuda; `sandbox` lets a caller reuse
    one warm worker."""

    def stage(report: Report, static: StaticResult) -> Report:
        if not report.findings:
            return replace(report, stats=replace(report.stats, sandbox=replace(report.stats.sandbox, state="on")))
        owned = sandbox is None
        worker = sandbox or Sandbox(limits)
        try:
            return Verifier(worker, device, stderr).verify(report, static.texts)
        finally:
            if owned:
                worker.close()

    return stage


class Verifier:
    def __init__(self, sandbox: Sandbox, wanted: str, stderr: IO[str]) -> None:
        self.sandbox = sandbox
        self.wanted = wanted
        self.stderr = stderr

    def devices(self) -> list[str]:
        if self.wanted == "cpu":
            return ["cpu"]
        if self.wanted == "cuda":
            return ["cuda"] if self.sandbox.info.cuda else []
        return ["cpu", "cuda"] if self.sandbox.info.cuda else ["cpu"]

    def verify(self, report: Report, texts: dict[str, str]) -> Report:
        stats = replace(report.stats.sandbox, state="on")
        try:
            info = self.sandbox.start()
        except SandboxUnavailable as exc:
            self.stderr.write(f"review-copies: the sandbox is unavailable ({exc}); findings are reported unverified\n")
            unverified = [f.with_verification(Verification(Status.NOT_RUN, None, f"the sandbox could not start: {exc}")) for f in report.findings]
            stats = replace(stats, network=f"not isolated: the sandbox did not start ({exc})")
            return replace(report, findings=unverified, stats=replace(report.stats, sandbox=stats))
        devices = self.devices()
        runs_before = self.sandbox.runs
        kept, dropped = [], list(report.dropped)
        for finding in report.findings:
            checked = finding.with_verification(self.verification(finding, texts.get(finding.path), devices))
            if checked.verification.status is Status.REFUTED:
                dropped.append(Dropped(checked, self._reason(checked)))
            else:
                kept.append(checked)
        stats = replace(
            stats,
            network=info.isolation.network,
            filesystem=info.isolation.filesystem,
            processes=info.isolation.processes,
            proc=info.isolation.proc,
            devices=", ".join(devices) or "none",
            torch=info.torch,
            runs=stats.runs + self.sandbox.runs - runs_before,
        )
        return replace(report, findings=kept, dropped=dropped, stats=replace(report.stats, sandbox=stats))

    @staticmethod
    def _reason(finding: Finding) -> str:
        return f"sandbox refuted: {finding.verification.evidence}"

    def verification(self, finding: Finding, text: str | None, devices: list[str]) -> Verification:
        if text is None:
            return Verification(Status.NOT_RUN, None, "the new text of the file is not available")
        if not devices:
            return Verification(Status.NOT_RUN, None, "--device cuda was asked for, and no GPU is available")
        try:
            subject = subjects.build(finding, text)
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
        verification = combine([DeviceVerdict(d, self._probe(finding, subject, recipes, d)) for d in devices])
        return self._without_gpu(finding, verification, devices)

    @staticmethod
    def _without_gpu(finding: Finding, verification: Verification, devices: list[str]) -> Verification:
        """A claim about a GPU is never refuted, nor left unexplained, where no GPU ran it."""
        if "gpu" not in finding.claims or "cuda" in devices or verification.status is Status.CONFIRMED:
            return verification
        evidence = f"needs a CUDA device: this machine has none (on the CPU: {verification.evidence})" if verification.evidence else "needs a CUDA device: this machine has none"
        return Verification(Status.INCONCLUSIVE, verification.device, evidence)

    def _probe(self, finding: Finding, subject: Subject, recipes: tuple[str, ...], device: str) -> verdict.Decision:
        try:
            decision = self._ask(subject, recipes, device, finding.probe if device == "cpu" else "", finding.claims)
            if finding.probe and device == "cpu" and decision.status == verdict.INCONCLUSIVE:
                # The LLM's probe may be wrong; the searched inputs get their chance.
                fallback = self._ask(subject, recipes, device, "", finding.claims)
                if fallback.status != verdict.INCONCLUSIVE:
                    return fallback
            return decision
        except Exception as exc:
            return verdict.Decision(verdict.INCONCLUSIVE, f"sandbox error: {type(exc).__name__}: {exc}")

    def _ask(self, subject: Subject, recipes: tuple[str, ...], device: str, probe: str, claims: frozenset[str]) -> verdict.Decision:
        answer = self.sandbox.run(ProbeRequest(device=device, recipes=recipes, subject=subject, probe=probe, claims=tuple(sorted(claims))))
        if not answer.ok or answer.result is None:
            return verdict.Decision(verdict.INCONCLUSIVE, f"the probe did not finish: {answer.error or 'no answer'}")
        return verdict.decide(answer.result, recipes, subject.fixed is not None, claims, subject.original.watch)


def combine(outcomes: list[DeviceVerdict]) -> Verification:
    """One verdict from one or two devices, saying where they differ."""
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
