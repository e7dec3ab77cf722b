"""The probe-recipe vocabulary: which signature of a copy problem the sandbox looks for.

A rule names its recipe in `probe` (one name, or several separated by commas, any of
which may confirm); a finding without one (an LLM finding, or a rule that declares
none) gets its category's recipes. Each recipe says what the child must measure
(`NEEDS`), and `sandbox.verdict` holds how each one decides.

| recipe           | the original shows it when ...                                   |
| ---------------- | ---------------------------------------------------------------- |
| `input-mutation` | an argument was modified (version, dispatch write, or values)    |
| `alias`          | the finding's value shares memory with another name, or a write  |
|                  | on the finding's line reaches a tensor under another name        |
| `snapshot`       | the finding's value changed after it was taken (during the call  |
|                  | or after a later in-place step on the inputs)                    |
| `retention`      | tensors attached to the graph outlive their step: the autograd   |
|                  | nodes kept alive grow with the number of steps, or state keeps   |
|                  | them                                                             |
| `warning`        | torch warned (copy-construct warning and the like)               |
| `raises`         | the original raised where the fix ran                            |
| `backward`       | backward raised "modified by an inplace operation"               |
| `leaf-inplace`   | an in-place op on a leaf that requires grad raised               |
| `silent-grad`    | autograd's gradients disagree with finite differences, or a saved|
|                  | tensor was overwritten without a version bump                    |
| `copy-bytes`     | the fix copies fewer bytes (or records fewer copies in the graph)|

No torch here: the reviewer's process uses this module.
"""

from __future__ import annotations

from collections.abc import Sequence

RECIPES = (
    "input-mutation",
    "alias",
    "snapshot",
    "retention",
    "warning",
    "raises",
    "backward",
    "leaf-inplace",
    "silent-grad",
    "copy-bytes",
)

NEEDS: dict[str, frozenset[str]] = {
    "input-mutation": frozenset({"strided"}),
    "alias": frozenset({"watch", "later_step", "strided"}),
    "snapshot": frozenset({"watch", "later_step"}),
    "retention": frozenset({"retention"}),
    "warning": frozenset({"strict"}),
    "raises": frozenset({"strict"}),
    "backward": frozenset({"backward", "strict"}),
    "leaf-inplace": frozenset({"strict"}),
    "silent-grad": frozenset({"backward", "gradcheck", "saved"}),
    "copy-bytes": frozenset({"strict", "strided"}),
}

CATEGORY_RECIPES: dict[str, tuple[str, ...]] = {
    "alias-mutation": ("input-mutation", "alias"),
    "inplace-autograd": ("backward", "leaf-inplace", "silent-grad"),
    "graph-retention": ("retention",),
    "stale-snapshot": ("snapshot",),
    "copy-construct": ("warning", "alias"),
    "numpy-bridge": ("raises", "input-mutation"),
    "redundant-copy": ("copy-bytes",),
}


def recipes_for(category: str, declared: Sequence[str] = ()) -> tuple[str, ...]:
    """The recipes a rule declares (the known ones, in order), else its category's."""
    known = tuple(dict.fromkeys(n for n in declared if n in RECIPES))
    return known or CATEGORY_RECIPES.get(category, ())


def needs_for(recipes: list[str] | tuple[str, ...]) -> set[str]:
    out: set[str] = set()
    for name in recipes:
        out |= NEEDS.get(name, frozenset())
    return out
