"""`alias`: the value bound on the finding's line shares memory with another name (and
changed with it), or a write on that line reached a tensor under two names at once.

Sharing is both the precondition and the bug: without it a run shows nothing, so this
recipe confirms or says what it could not establish, and never refutes."""

from __future__ import annotations

import re

from review_copies.sandbox.protocol import SideRun
from review_copies.sandbox.recipes.base import CONFIRMED, Decision, Recipe, Runs, num, ran


def _bases(names: tuple[str, ...]) -> set[str]:
    return {re.sub(r"^input `([^`]*)`$", r"\1", n).split(".")[0].split("[")[0] for n in names}


def alias_seen(side: SideRun) -> str | None:
    """The sharing the watch saw on the finding's line, in words."""
    watch = side.watch
    if watch is None:
        return None
    if watch.shares:
        share = watch.shares[0]
        changed = next((c for c in watch.changed if c.path == share.path), None)
        what = "the result" + share.path[len("return value"):] if share.path.startswith("return value") else f"`{share.path}`"
        text = f"{what} shares memory with {share.other}"
        if changed:
            text += f" and changed {changed.when} (max change {num(changed.max_change)})"
        return text
    for hit in watch.line_hits:
        if len(_bases(hit)) >= 2:
            return f"the in-place write on the finding's line changed {', '.join(f'`{n}`' if not n.startswith('input') else n for n in hit)} at once"
    return None


class AliasRecipe(Recipe):
    name = "alias"
    needs = frozenset({"watch", "later_step", "strided"})

    def decide(self, runs: Runs) -> Decision:
        for run in runs.variants:
            o, f = run.original, run.fixed
            if not o.ok or o.watch is None or not o.watch.ran:
                continue
            seen = alias_seen(o)
            if seen is None:
                continue
            if not runs.has_fix:
                return Decision(CONFIRMED, seen + "; no fix is offered to compare")
            if ran(f) and f is not None and alias_seen(f) is None:
                return Decision(CONFIRMED, seen + "; with the fix it is a separate tensor")
        return runs.not_established("the value on the finding's line shared memory with no input or other name")
