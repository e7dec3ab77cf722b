"""`snapshot`: the value taken on the finding's line changed afterwards (during the call,
or after a later in-place update of the inputs), or it is the live state's own memory.

Refuted only with a witness: the state the value was taken from changed after it was
taken (the statement's sources are watched too), and the value kept its values."""

from __future__ import annotations

from review_copies.sandbox.recipes.base import CONFIRMED, REFUTED, Decision, Recipe, Runs, num, ran


class SnapshotRecipe(Recipe):
    name = "snapshot"
    needs = frozenset({"watch", "later_step"})

    def decide(self, runs: Runs) -> Decision:
        witness = None
        for run in runs.variants:
            o, f = run.original, run.fixed
            if not o.ok or o.watch is None or not o.watch.ran:
                continue
            watch = o.watch
            fixed_shares = (f.watch.shares if f.watch is not None else ()) if f is not None and f.ok else None
            if not watch.changed and watch.shares and fixed_shares == ():
                # Nothing changed it during the call, but it is the same memory as the live state.
                s0 = watch.shares[0]
                return Decision(CONFIRMED, f"`{s0.path}` shares memory with {s0.other}, so it follows every in-place update of it; with the fix it does not")
            if watch.changed:
                c = watch.changed[0]
                text = f"`{c.path}` changed {c.when} (max change {num(c.max_change)})"
                if not runs.has_fix:
                    return Decision(CONFIRMED, text + "; no fix is offered to compare")
                if ran(f) and f is not None and f.watch is not None and f.watch.ran and not f.watch.changed:
                    return Decision(CONFIRMED, text + "; with the fix it did not")
                continue
            if watch.sources_changed and not watch.shares and witness is None:
                s = watch.sources_changed[0]
                witness = f"`{s.path}`, which the value on the finding's line was taken from, changed {s.when} (max change {num(s.max_change)}), and the value kept its values"
        if witness:
            return Decision(REFUTED, witness)
        return runs.not_established("what the value on the finding's line was taken from never changed after it was taken")
