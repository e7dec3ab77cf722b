"""`warning`: torch warned in the original (the copy-construct warning and the like), and
the fix ran without that warning."""

from __future__ import annotations

from review_copies.sandbox.protocol import Observation, VariantRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Recipe, ran, short_error


class TorchWarning(Recipe):
    name = "warning"
    needs = frozenset({"strict"})

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        any_ran, both = False, None
        for run in runs:
            o, f = run.original, run.fixed
            if not o.ok:
                continue
            any_ran = True
            warned = set(o.warnings)
            if not warned:
                continue
            first = sorted(warned)[0]
            if not has_fix:
                return Decision(CONFIRMED, f'the original warned "{short_error(first)}"; no fix is offered to compare')
            if not ran(f) or f is None:
                continue
            gone = warned - set(f.warnings)
            if gone:
                return Decision(CONFIRMED, f'the original warned "{short_error(sorted(gone)[0], 230)}"; the fix ran without the warning and gave the same values')
            both = f'the original warned "{short_error(first)}", and so did the fix'
        if both:
            return Decision(INCONCLUSIVE, both)
        if any_ran:
            return Decision(REFUTED, "the original ran without any warning")
        return Decision(INCONCLUSIVE, "")
