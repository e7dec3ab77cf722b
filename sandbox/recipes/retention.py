"""`retention`: tensors attached to the graph outlive their step. The worker runs the code
for one step and for three, and counts the autograd nodes still reachable from what it
returns and what it keeps: a count that grows with the steps, or nodes a finished step
leaves in the state, is a graph kept alive."""

from __future__ import annotations

from collections.abc import Mapping

from review_copies.sandbox.protocol import Observation, Retention, StepsRun, VariantRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Measure, Recipe, short_error, size

STEPS = (1, 3)


def _kept(runs: tuple[StepsRun, ...] | None) -> tuple[bool, str] | None:
    """Whether a graph outlives its step across `runs`, in words; None when they did not run."""
    if not runs or len(runs) < 2 or not all(r.ok for r in runs):
        return None
    one, three = runs[0].retained, runs[-1].retained
    holders = ", ".join("the result" if h == "result" else f"`{h}`" for h in three.holders) or "the result"
    if three.nodes > one.nodes:
        saved = f", {size(three.saved_bytes)} of saved tensors" if three.saved_bytes else ""
        return True, f"autograd nodes kept alive by {holders}: {one.nodes} after 1 step, {three.nodes} after 3{saved}"
    if one.state_nodes > 0:
        return True, f"{holders} keeps {one.state_nodes} autograd nodes of a finished step alive"
    return False, f"{one.nodes} autograd nodes reachable after 1 step and {three.nodes} after 3"


class RetentionRecipe(Recipe):
    name = "retention"
    needs = frozenset({"retention"})

    def observe(self, measure: Measure) -> Mapping[str, object]:
        original = tuple(measure.steps("original", n) for n in STEPS)
        fixed = tuple(measure.steps("fixed", n) for n in STEPS) if measure.has_fix else None
        return {"retention": Retention(original, fixed)}

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        data = observation.retention
        original = _kept(data.original if data else None)
        if original is None:
            error = next((r.error for r in (data.original if data else ()) if r.error), "")
            return Decision(INCONCLUSIVE, f"the steps did not run: {short_error(error)}" if error else "")
        present, text = original
        if not present:
            return Decision(REFUTED, f"no graph outlives its step: {text}")
        if not has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        fixed = _kept(data.fixed if data else None)
        if fixed is None:
            return Decision(INCONCLUSIVE, text + "; the fix did not run")
        if fixed[0]:
            return Decision(INCONCLUSIVE, text + f"; with the fix still {fixed[1]}")
        return Decision(CONFIRMED, text + f"; with the fix {fixed[1]}")
