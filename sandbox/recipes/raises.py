"""`raises`: the original raised where the fix ran (`.numpy()` on a tensor that requires
grad or lives on a GPU). The meta device stands in for a GPU on a machine without one."""

from __future__ import annotations

from review_copies.sandbox.protocol import Observation, VariantRun
from review_copies.sandbox.recipes.base import Decision, Recipe, raises_with


class Raises(Recipe):
    name = "raises"
    needs = frozenset({"strict"})
    signature = r"Can't call numpy\(\) on Tensor that requires grad|can't convert \w+(:\d+)? device type tensor to numpy"

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        # Every run counts here, the meta device's included: an error is an error anywhere.
        return raises_with(observation.variants, has_fix, None, "the original")
