"""`copy-bytes`: the fix copies fewer bytes than the original (or records fewer copies in
the autograd graph) and gives the same values: the copy was redundant.

Refuted only with a witness: the copy on the finding's line ran, and the fix copies as
much as the original."""

from __future__ import annotations

from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, VARIANT_WORDS, Decision, Recipe, Runs, size


class CopyBytesRecipe(Recipe):
    name = "copy-bytes"
    needs = frozenset({"strict", "strided"})

    def decide(self, runs: Runs) -> Decision:
        if not runs.has_fix:
            return Decision(INCONCLUSIVE, "no fix is offered to compare the copies with")
        witness = None
        for run in runs.variants:
            o, f = run.original, run.fixed
            if not (o.ok and f is not None and f.ok):
                continue
            words = VARIANT_WORDS.get(run.variant, "")
            if f.copy_bytes < o.copy_bytes:
                ops = ", ".join(f"{k}×{v}" for k, v in sorted(o.copy_ops.items()))
                return Decision(CONFIRMED, f"the fix copies {size(f.copy_bytes)} instead of {size(o.copy_bytes)} per call ({ops} in the original, {words}) and gives the same values")
            if f.graph_copies < o.graph_copies:
                text = f"the original records {o.graph_copies} copy in the autograd graph ({words}), the fix {f.graph_copies}"
                return Decision(CONFIRMED, text + ", with the same bytes copied and the same values")
            line_bytes = o.watch.copy_bytes if o.watch else 0
            if line_bytes and witness is None:
                witness = (
                    f"the copy on the finding's line ran ({size(line_bytes)}), and the fix copies as much as the original "
                    f"({size(f.copy_bytes)} vs {size(o.copy_bytes)} per call): the copy is not redundant"
                )
        if witness:
            return Decision(REFUTED, witness)
        return runs.not_established("the finding's line copied nothing")
