"""`leaf-inplace`: an in-place op on a leaf that requires grad raised, with inputs that
require grad, and the fix ran."""

from __future__ import annotations

from review_copies.sandbox.protocol import Observation, VariantRun
from review_copies.sandbox.recipes.base import REFUTED, Decision, Recipe, raises_with

LEAF = r"leaf Variable that requires grad|view of a leaf Variable"


class LeafInplace(Recipe):
    name = "leaf-inplace"
    needs = frozenset({"strict"})
    signature = LEAF

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        decision = raises_with(tuple(r for r in runs if r.variant == "grad"), has_fix, LEAF, "the in-place op")
        if decision.status == REFUTED:
            return Decision(REFUTED, "no in-place op on a leaf that requires grad: the original ran with inputs that require grad")
        return decision
