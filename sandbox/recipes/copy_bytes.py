"""`copy-bytes`: the fix copies fewer bytes than the original (or records fewer copies in
the autograd graph) and gives the same values: the copy was redundant."""

from __future__ import annotations

from review_copies.sandbox.protocol import Observation, VariantRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, VARIANT_WORDS, Decision, Recipe, size


class CopyBytes(Recipe):
    name = "copy-bytes"
    needs = frozenset({"strict", "strided"})

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        if not has_fix:
            return Decision(INCONCLUSIVE, "no fix is offered to compare the copies with")
        compared = []
        for run in runs:
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
            compared.append((o.copy_bytes, f.copy_bytes))
        if compared:
            ob, fb = compared[0]
            return Decision(REFUTED, f"the fix copies as much as the original ({size(fb)} vs {size(ob)} per call): the copy is not redundant")
        return Decision(INCONCLUSIVE, "")
