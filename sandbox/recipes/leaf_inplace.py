"""`leaf-inplace`: an in-place op on a leaf that requires grad raised, with inputs that
require grad, and the fix ran.

Such an op always raises in grad mode, so the precondition is the bug: this recipe
confirms or says what it could not establish, and never refutes."""

from __future__ import annotations

from review_copies.sandbox.recipes.base import Decision, Recipe, Runs, raised_in

LEAF = r"leaf Variable that requires grad|view of a leaf Variable"


class LeafInplaceRecipe(Recipe):
    name = "leaf-inplace"
    needs = frozenset({"strict"})
    signature = LEAF

    def decide(self, runs: Runs) -> Decision:
        found = raised_in(tuple(r for r in runs.variants if r.variant == "grad"), runs.has_fix, LEAF)
        if found is not None:
            return found
        return runs.not_established("the in-place op on the finding's line never met a leaf that requires grad, with inputs that require grad")
