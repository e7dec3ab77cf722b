"""`warning`: torch warned in the original (the copy-construct warning and the like), and
the fix ran without that warning.

Refuted only with a witness: `torch.tensor()` on the finding's line was given a tensor
and torch did not warn."""

from __future__ import annotations

from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Recipe, Runs, ran, short_error


class WarningRecipe(Recipe):
    name = "warning"
    needs = frozenset({"strict"})

    def decide(self, runs: Runs) -> Decision:
        both, given_tensor = None, False
        for run in runs.variants:
            o, f = run.original, run.fixed
            if not o.ok:
                continue
            given_tensor = given_tensor or any(c.name == "tensor" and c.tensor for c in (o.watch.calls if o.watch else ()))
            warned = set(o.warnings)
            if not warned:
                continue
            first = sorted(warned)[0]
            if not runs.has_fix:
                return Decision(CONFIRMED, f'the original warned "{short_error(first)}"; no fix is offered to compare')
            if not ran(f) or f is None:
                continue
            gone = warned - set(f.warnings)
            if gone:
                return Decision(CONFIRMED, f'the original warned "{short_error(sorted(gone)[0], 230)}"; the fix ran without the warning and gave the same values')
            both = f'the original warned "{short_error(first)}", and so did the fix'
        if both:
            return Decision(INCONCLUSIVE, both)
        if given_tensor:
            return Decision(REFUTED, "`torch.tensor()` on the finding's line was given a tensor, and torch did not warn")
        return runs.not_established("the constructor on the finding's line was never given a tensor")
