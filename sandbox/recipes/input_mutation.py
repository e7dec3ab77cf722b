"""`input-mutation`: the call modified an argument (its version counter moved, a dispatch
write reached it, or its values changed), and with the fix it did not."""

from __future__ import annotations

from review_copies.sandbox.protocol import Mutation, Observation, VariantRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, VARIANT_WORDS, Decision, Recipe, num, ran


def _what(m: Mutation, variant: str) -> str:
    what = f"input `{m.name}` was modified: version {m.v0}→{m.v1}, max change {num(m.max_change)}"
    if m.ops:
        what += f" (by {', '.join(m.ops)})"
    if variant != "plain":
        what += f" {VARIANT_WORDS.get(variant, '')}"
    return what


class InputMutation(Recipe):
    name = "input-mutation"
    needs = frozenset({"strided"})

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        any_ran, same_in_fix = False, None
        for run in runs:
            o, f = run.original, run.fixed
            if not o.ok:
                continue
            any_ran = True
            f_mutated = {m.name for m in f.mutated} if f is not None and f.ok else set()
            for m in o.mutated:
                what = _what(m, run.variant)
                if not has_fix:
                    return Decision(CONFIRMED, what + "; no fix is offered to compare")
                if not ran(f):
                    continue
                if m.name in f_mutated:
                    same_in_fix = f"the original modifies input `{m.name}`, and so does the fix"
                    continue
                return Decision(CONFIRMED, what + "; with the fix it was not")
        if same_in_fix:
            return Decision(INCONCLUSIVE, same_in_fix)
        if any_ran:
            return Decision(REFUTED, "no input was modified: versions and values of every argument are unchanged after the call")
        return Decision(INCONCLUSIVE, "")
