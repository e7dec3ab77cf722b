"""`raises`: the original raised where the fix ran (`.numpy()` on a tensor that requires
grad or lives on a GPU). The meta device stands in for a GPU on a machine without one: it
may confirm an error, never refute one.

A conversion given a tensor that requires grad always raises, so the precondition is the
bug: this recipe confirms or says what it could not establish (the converted tensor never
required grad; the claim is about a GPU and these runs are on the CPU), and never refutes."""

from __future__ import annotations

from review_copies.sandbox.recipes.base import Decision, Recipe, Runs, raised_in

_CONVERTS = ("numpy", "__array__")


class RaisesRecipe(Recipe):
    name = "raises"
    needs = frozenset({"strict"})
    signature = r"Can't call numpy\(\) on Tensor that requires grad|can't convert \w+(:\d+)? device type tensor to numpy"

    def decide(self, runs: Runs) -> Decision:
        # Every run counts here, the meta device's included: an error is an error anywhere.
        found = raised_in(runs.observation.variants, runs.has_fix, None)
        if found is not None:
            return found
        calls = [c for r in runs.variants if r.original.watch for c in r.original.watch.calls if c.name in _CONVERTS]
        converted = [c for c in calls if c.tensor]
        if "gpu" in runs.claims and not any(c.device == "cuda" for c in converted):
            return runs.not_established("the claim is about a tensor on a GPU, and no converted tensor was on one")
        if not converted:
            return runs.not_established("the conversion on the finding's line was never given a tensor")
        return runs.not_established("the tensor converted on the finding's line never required grad")
