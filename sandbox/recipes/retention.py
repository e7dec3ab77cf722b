"""`retention`: tensors attached to the graph outlive their step. The worker runs the code
for one step and for three, and counts the autograd nodes still reachable from what it
returns and what it keeps: a count that grows with the steps, nodes a finished step
leaves in the state, or a value on the finding's line that holds more and more nodes
whose backward already ran (freed saved tensors) while its loop goes on, is a graph kept
alive.

Refuted only with a witness: the value on the finding's line was attached to the graph
(it had a grad_fn), and no graph outlived its step."""

from __future__ import annotations

from collections.abc import Mapping

from review_copies.sandbox.protocol import Retention, StepsRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Measure, Recipe, Runs, short_error, size

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
    grown = next((r.watch for r in runs if r.watch is not None and r.watch.ran >= 2 and r.watch.spent[1] > r.watch.spent[0]), None)
    if grown is not None:
        # Within one call: the loop's own steps, which the 1-vs-3 comparison cannot see when
        # the subject takes no loader (each call runs its whole loop afresh).
        first, last = grown.spent
        return True, (f"the value on the finding's line reached {first} autograd nodes of steps whose backward had already run "
                      f"when the line first ran and {last} when it ran again: finished steps' graphs stay alive")
    return False, f"{one.nodes} autograd nodes reachable after 1 step and {three.nodes} after 3"


def _persists(runs: Runs) -> bool:
    """Does what the finding's line keeps survive from one step to the next in these runs:
    the line loops inside one call, or it keeps into `self`, a container or a module (the
    steps reuse those)?"""
    watch = runs.watch
    if watch is None:
        return False
    return watch.in_loop or watch.kind == "call" or any(n.startswith("self.") for n in watch.names)


class RetentionRecipe(Recipe):
    name = "retention"
    needs = frozenset({"retention"})

    def observe(self, measure: Measure) -> Mapping[str, object]:
        original = tuple(measure.steps("original", n) for n in STEPS)
        fixed = tuple(measure.steps("fixed", n) for n in STEPS) if measure.has_fix else None
        return {"retention": Retention(original, fixed)}

    def decide(self, runs: Runs) -> Decision:
        data = runs.observation.retention
        original = _kept(data.original if data else None)
        if original is None:
            error = next((r.error for r in (data.original if data else ()) if r.error), "")
            return Decision(INCONCLUSIVE, f"the steps did not run: {short_error(error)}" if error else "")
        present, text = original
        if not present:
            steps = data.original if data else ()
            if not any(r.watch is not None and r.watch.ran for r in steps):
                return Decision(INCONCLUSIVE, runs.tried("the finding's line never ran in the steps"))
            if not any(r.watch is not None and r.watch.attached for r in steps):
                return Decision(INCONCLUSIVE, runs.tried(f"the value on the finding's line was never attached to the graph ({text})"))
            if not _persists(runs):
                # An accumulator the caller passes in and gets back: the steps here cannot feed
                # one call's result to the next, so they cannot show it growing.
                return Decision(INCONCLUSIVE, runs.tried(f"what the finding's line keeps does not outlive one call here, so its growth across steps cannot show ({text})"))
            return Decision(REFUTED, f"the value on the finding's line was attached to the graph (it had a grad_fn), yet no graph outlives its step: {text}")
        if not runs.has_fix:
            return Decision(CONFIRMED, text + "; no fix is offered to compare")
        fixed = _kept(data.fixed if data else None)
        if fixed is None:
            return Decision(INCONCLUSIVE, text + "; the fix did not run")
        if fixed[0]:
            return Decision(INCONCLUSIVE, text + f"; with the fix still {fixed[1]}")
        return Decision(CONFIRMED, text + f"; with the fix {fixed[1]}")
