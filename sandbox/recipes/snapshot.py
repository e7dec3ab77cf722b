"""`snapshot`: the value taken on the finding's line changed afterwards (during the call,
or after a later in-place update of the inputs), or it is the live state's own memory."""

from __future__ import annotations

from review_copies.sandbox.protocol import Observation, VariantRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Recipe, num, ran


class Snapshot(Recipe):
    name = "snapshot"
    needs = frozenset({"watch", "later_step"})

    def decide(self, runs: tuple[VariantRun, ...], observation: Observation, has_fix: bool) -> Decision:
        any_ran = never = False
        for run in runs:
            o, f = run.original, run.fixed
            if not o.ok:
                continue
            if o.watch is None or not o.watch.ran:
                never = True
                continue
            any_ran = True
            changed, shares = o.watch.changed, o.watch.shares
            fixed_shares = (f.watch.shares if f.watch is not None else ()) if f is not None and f.ok else None
            if not changed and shares and fixed_shares == ():
                # Nothing changed it during the call, but it is the same memory as the live state.
                s0 = shares[0]
                return Decision(CONFIRMED, f"`{s0.path}` shares memory with {s0.other}, so it follows every in-place update of it; with the fix it does not")
            if not changed:
                continue
            c = changed[0]
            text = f"`{c.path}` changed {c.when} (max change {num(c.max_change)})"
            if not has_fix:
                return Decision(CONFIRMED, text + "; no fix is offered to compare")
            if ran(f) and f is not None and f.watch is not None and f.watch.ran and not f.watch.changed:
                return Decision(CONFIRMED, text + "; with the fix it did not")
        if any_ran:
            return Decision(REFUTED, "the value taken on the finding's line kept its values during the call and after a later in-place update of the inputs")
        if never:
            return Decision(INCONCLUSIVE, "the finding's line never ran with the synthesised inputs")
        return Decision(INCONCLUSIVE, "")
