"""`input-mutation`: the call modified an argument (its version counter moved, a dispatch
write reached it, or its values changed), and with the fix it did not.

The bug's precondition, a write into memory an argument shares, is its effect: a run
cannot show the precondition without the bug, so this recipe confirms or says what it
could not establish, and never refutes."""

from __future__ import annotations

from review_copies.sandbox.protocol import Mutation
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, VARIANT_WORDS, Decision, Recipe, Runs, num, ran


def _what(m: Mutation, variant: str) -> str:
    what = f"input `{m.name}` was modified: version {m.v0}→{m.v1}, max change {num(m.max_change)}"
    if m.ops:
        what += f" (by {', '.join(m.ops)})"
    if variant != "plain":
        what += f" {VARIANT_WORDS.get(variant, '')}"
    return what


class InputMutationRecipe(Recipe):
    name = "input-mutation"
    needs = frozenset({"strided"})

    def decide(self, runs: Runs) -> Decision:
        any_ran, same_in_fix, wrote = False, None, False
        for run in runs.variants:
            o, f = run.original, run.fixed
            if not o.ok:
                continue
            any_ran = True
            wrote = wrote or bool(o.watch and o.watch.writes)
            f_mutated = {m.name for m in f.mutated} if f is not None and f.ok else set()
            for m in o.mutated:
                what = _what(m, run.variant)
                if not runs.has_fix:
                    return Decision(CONFIRMED, what + "; no fix is offered to compare")
                if not ran(f):
                    continue
                if m.name in f_mutated:
                    same_in_fix = f"the original modifies input `{m.name}`, and so does the fix"
                    continue
                return Decision(CONFIRMED, what + "; with the fix it was not")
        if same_in_fix:
            return Decision(INCONCLUSIVE, same_in_fix)
        if not any_ran:
            return Decision(INCONCLUSIVE, "")
        if wrote:
            return runs.not_established("the finding's line wrote in place, but never into memory an input shares")
        return runs.not_established("no in-place write reached an input's memory")
