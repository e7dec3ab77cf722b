"""`alias`: the value bound on the finding's line shares memory with another name (and
changed with it), or a write on that line reached a tensor under two names at once."""

from __future__ import annotations

import re

from review_copies.sandbox.protocol import Observation, SideRun, VariantRun
from review_copies.sandbox.recipes.base import CONFIRMED, INCONCLUSIVE, REFUTED, Decision, Recipe, num, ran


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


class Alias(Recipe):
    name = "alias"
    needs = frozenset({"watch", "later_step", "strided"})

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
            seen = alias_seen(o)
            if seen is None:
                continue
            if not has_fix:
                return Decision(CONFIRMED, seen + "; no fix is offered to compare")
            if ran(f) and f is not None and alias_seen(f) is None:
                return Decision(CONFIRMED, seen + "; with the fix it is a separate tensor")
        if any_ran:
            return Decision(REFUTED, "the value bound on the finding's line shares memory with no input or other name, and no write there reached another name")
        if never:
            return Decision(INCONCLUSIVE, "the finding's line never ran with the synthesised inputs")
        return Decision(INCONCLUSIVE, "")
