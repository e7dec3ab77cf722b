"""The input search: candidates of each input (`worker.inputs`) tried one change at a time,
the inputs an error is about first, keeping a change when the original gets further,
until it runs or reaches the finding's own error; then, if it stopped there, until the fix
runs too. Imported only in probe processes."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from review_copies.sandbox.protocol import SearchReport
from review_copies.sandbox.recipes import recipe
from review_copies.sandbox.worker import inputs as synth
from review_copies.sandbox.worker.load import SubjectError, error_text, load
from review_copies.sandbox.worker.runner import Runner, Trial

MAX_TRIES = 12  # calls of the original while searching inputs
MAX_FIX_TRIES = 6  # more calls, of both, when the original stops at the finding's own error
SEARCH_SECONDS = 6.0  # of the probe's 30 s wall clock


@dataclass
class Search:
    choice: dict[str, int]
    tries: int
    best: Trial
    described: dict[str, str] = field(default_factory=dict)
    callers: tuple[str, ...] = ()

    def report(self) -> SearchReport:
        return SearchReport(
            tries=self.tries, limit=MAX_TRIES, fix_limit=MAX_FIX_TRIES, ran=self.best.stage == "ok",
            inputs=dict(list(self.described.items())[:12]), error=self.best.error if self.best.stage != "ok" else None,
            callers=self.callers,
        )


def search(original: Runner, fixed: Runner | None, recipes: tuple[str, ...], device: str) -> Search:
    try:
        return _search(original, fixed, recipes, device)
    except Exception as exc:  # a bug here must not cost the verdict: the first candidates remain
        return Search({}, 0, Trial("inputs", f"the input search failed: {error_text(exc)}"))


def _good(trial: Trial, signatures: str | None) -> bool:
    return trial.stage == "ok" or bool(trial.stage == "call" and signatures and re.search(signatures, trial.error))


def _priority(plan: synth.Plan, trial: Trial) -> list[synth.Slot]:
    """The slots to change first: those the error names, then the rest, in order."""

    def score(slot: synth.Slot) -> int:
        if any(slot.path == b or (b.endswith(":") and slot.path.startswith(b)) for b in trial.blame):
            return 0
        if slot.names & trial.names:
            return 1
        if trial.stage == "inputs" and slot.path.startswith("init:") and "construct" in trial.error:
            return 1
        return 2

    return sorted(plan.coordinates(), key=lambda slot: (score(slot), slot.certainty))


def _without_callers(plan: synth.Plan) -> dict[str, int]:
    """The choice that skips every caller's value: each such slot's first invented candidate."""
    out = {}
    for path, slot in plan.slots.items():
        if slot.cands and slot.cands[0].kind == "caller":
            first = next((i for i, c in enumerate(slot.cands) if c.kind != "caller"), None)
            if first is not None:
                out[path] = first
    return out


def _normal(choice: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in choice.items() if v}


Score = Callable[[dict[str, int]], tuple[Trial, tuple[int, ...], bool]]


class _Climb:
    """Hill-climbing over the choices, one slot's candidate at a time."""

    def __init__(self, plan: synth.Plan, started: float) -> None:
        self.plan = plan
        self.started = started
        self.tries = 1
        self.seen: set[frozenset[tuple[str, int]]] = {frozenset()}

    def run(self, choice: dict[str, int], score: Score, current: tuple[Trial, tuple[int, ...], bool], budget: int) -> tuple[dict[str, int], Trial, bool]:
        base, (trial, value, done) = dict(choice), current
        used = 0
        while not done and used < budget and time.monotonic() - self.started < SEARCH_SECONDS:
            moved = False
            for slot in _priority(self.plan, trial):
                for k in range(len(slot.cands)):
                    if k == base.get(slot.path, 0):
                        continue
                    new = _normal({**base, slot.path: k})
                    key = frozenset(new.items())
                    if key in self.seen:
                        continue
                    self.seen.add(key)
                    t, v, d = score(new)
                    self.tries += 1
                    used += 1
                    if d or v > value:
                        base, trial, value, done, moved = new, t, v, d, True
                        break
                    if used >= budget:
                        break
                if moved or used >= budget:
                    break
            if not moved:
                break
        return base, trial, done


def _search(original: Runner, fixed: Runner | None, recipes: tuple[str, ...], device: str) -> Search:
    signatures = "|".join(s for name in recipes if (s := recipe(name).signature)) or None
    variant = synth.Variant("plain", device=device)
    try:
        plan = original.plan(load(original.side))
    except (SubjectError, synth.Unbuildable):
        return Search({}, 0, Trial("load"))
    climb = _Climb(plan, time.monotonic())
    choice: dict[str, int] = {}
    best = original.trial(variant, choice)
    invented = _without_callers(plan)
    if invented and not _good(best, signatures):
        # The callers' values may not fit the invented rest (a caller's 3-channel mean
        # beside a 4-feature world): unless they get further, the search starts where it
        # would without them.
        other = original.trial(variant, invented)
        climb.tries += 1
        climb.seen.add(frozenset(invented.items()))
        if _good(other, signatures) or other.progress() >= best.progress():
            choice, best = invented, other

    def original_score(c: dict[str, int]) -> tuple[Trial, tuple[int, ...], bool]:
        t = original.trial(variant, c)
        return t, t.progress(), _good(t, signatures)

    if not _good(best, signatures):
        choice, best, _ = climb.run(choice, original_score, (best, best.progress(), False), MAX_TRIES - 1)
    if fixed is not None and best.stage == "call" and _good(best, signatures):
        # The original stopped at the finding's error: the rest of the code is the fix's to run.
        def both(c: dict[str, int]) -> tuple[Trial, tuple[int, ...], bool]:
            o = original.trial(variant, c)
            if not _good(o, signatures):
                return o, (-1, 0), False
            f = fixed.trial(variant, c)
            return f, f.progress(), f.stage == "ok"

        first = fixed.trial(variant, choice)
        climb.tries += 1
        if first.stage != "ok":
            found, _, done = climb.run(choice, both, (first, first.progress(), False), MAX_FIX_TRIES)
            if done:
                choice = found
    return Search(choice, climb.tries, best, plan.describe(choice), plan.callers(choice))
