"""`backward`: backward raised "modified by an inplace operation" with inputs that require
grad, and with the fix it ran."""

from __future__ import annotations

import re

from review_copies.sandbox.protocol import Observation, VariantRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, NOT_APPLICABLE, REFUTED, Decision, Recipe, raised, ran, short_error

INPLACE = r"modified by an inplace operation"


class Backward(Recipe):
    name = "backward"
    needs = frozenset({"backward", "strict"})
    signature = INPLACE

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        tried_clean = False
        for run in runs:
            if run.variant != "grad":
                continue
            o, f = run.original, run.fixed
            error = raised(o, INPLACE) or (o.backward.error if o.backward else None)
            if error and re.search(INPLACE, error):
                text = f"backward raised: {short_error(error)}"
                if not has_fix:
                    return Decision(CONFIRMED, text + "; no fix is offered to compare")
                fb = f.backward if f is not None else None
                if ran(f) and not (fb and fb.error):
                    return Decision(CONFIRMED, text + "; with the fix backward ran" + ("" if fb and fb.tried else " (the fix's call includes it)"))
                return Decision(INCONCLUSIVE, text + "; the fix failed as well")
            if o.ok and o.backward is not None and o.backward.tried:
                tried_clean = True
        if tried_clean:
            return Decision(REFUTED, "forward and backward ran without error with inputs that require grad")
        return Decision(NOT_APPLICABLE, "")
