"""`backward`: backward raised "modified by an inplace operation" with inputs that require
grad, and with the fix it ran.

Refuted only with a witness: the tensor written on the finding's line had been saved for
backward, and forward and backward ran without error. A saved tensor overwritten without a
version bump (saved through `.data`) is no witness: backward cannot raise there."""

from __future__ import annotations

import re
from collections.abc import Mapping

from review_copies.sandbox.protocol import Overwrite, SavedChecks
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Measure, Recipe, Runs, raised, ran, short_error

INPLACE = r"modified by an inplace operation"


def saved_on_line(runs: Runs) -> Overwrite | None:
    """A tensor saved for backward that the finding's line wrote (from the hooks' run)."""
    saved = runs.observation.saved
    if saved is None or runs.watch is None:
        return None
    start, end = runs.watch.span
    return next((s for s in saved.original if s.line is not None and start <= s.line <= end), None)


def silent_on_line(runs: Runs) -> Overwrite | None:
    """A saved tensor overwritten without a version bump, on the finding's line when it is known."""
    saved = runs.observation.saved
    if saved is None:
        return None
    span = runs.watch.span if runs.watch is not None else None
    return next((s for s in saved.original if s.silent and (span is None or (s.line is not None and span[0] <= s.line <= span[1]))), None)


class BackwardRecipe(Recipe):
    name = "backward"
    needs = frozenset({"backward", "strict", "saved"})
    signature = INPLACE

    def observe(self, measure: Measure) -> Mapping[str, object]:
        fixed = measure.saved_overwrites("fixed") if measure.has_fix else None
        return {"saved": SavedChecks(measure.saved_overwrites("original"), fixed)}

    def decide(self, runs: Runs) -> Decision:
        clean = False
        for run in runs.variants:
            if run.variant != "grad":
                continue
            o, f = run.original, run.fixed
            error = raised(o, INPLACE) or (o.backward.error if o.backward else None)
            if error and re.search(INPLACE, error):
                text = f"backward raised: {short_error(error)}"
                if not runs.has_fix:
                    return Decision(CONFIRMED, text + "; no fix is offered to compare")
                fb = f.backward if f is not None else None
                if ran(f) and not (fb and fb.error):
                    return Decision(CONFIRMED, text + "; with the fix backward ran" + ("" if fb and fb.tried else " (the fix's call includes it)"))
                return Decision(INCONCLUSIVE, text + "; the fix failed as well")
            clean = clean or (o.ok and o.backward is not None and o.backward.tried and not o.backward.error)
        silent = silent_on_line(runs)
        if silent is not None:
            # `.data` has a version counter of its own: nothing raises, and backward reads the
            # new values. A clean run is then the bug, not a witness against it; whether the
            # gradients are wrong is silent-grad's to measure.
            at = f" at line {silent.line}" if silent.line else ""
            return Decision(
                INCONCLUSIVE,
                f"backward did not raise, but a tensor saved for backward by {silent.saved_by} was overwritten by {silent.written_by}{at} "
                "without a version bump, so backward silently reads the new values",
            )
        saved = saved_on_line(runs)
        if clean and saved is not None:
            return Decision(REFUTED, f"the tensor written on the finding's line had been saved for backward (by {saved.saved_by}), and forward and backward ran without error")
        return runs.not_established("no tensor the finding's line wrote had been saved for backward, with inputs that require grad")
