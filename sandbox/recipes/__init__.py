"""The recipes: each one signature of a copy problem the sandbox can look for, in one
module with what it asks the worker to measure and how it decides. A rule names its
recipes (`Rule.recipes`); a finding without them (an LLM finding) gets its category's.

| recipe           | the original shows it when ...                                   |
| ---------------- | ---------------------------------------------------------------- |
| `input-mutation` | an argument was modified (version, dispatch write, or values)    |
| `alias`          | the finding's value shares memory with another name, or a write  |
|                  | on the finding's line reaches a tensor under another name        |
| `snapshot`       | the finding's value changed after it was taken                   |
| `retention`      | autograd nodes kept alive grow with the steps, or state keeps them |
| `warning`        | torch warned (copy-construct warning and the like)               |
| `raises`         | the original raised where the fix ran                            |
| `backward`       | backward raised "modified by an inplace operation"               |
| `leaf-inplace`   | an in-place op on a leaf that requires grad raised               |
| `silent-grad`    | gradients disagree with finite differences, or a saved tensor    |
|                  | was overwritten without a version bump                           |
| `copy-bytes`     | the fix copies fewer bytes (or records fewer copies in the graph)|

Adding a recipe is adding a module here. No torch: the reviewer's process uses these.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from functools import cache

from review_copies.sandbox.recipes.base import Recipe

CATEGORY_RECIPES: dict[str, tuple[str, ...]] = {
    "alias-mutation": ("input-mutation", "alias"),
    "inplace-autograd": ("backward", "leaf-inplace", "silent-grad"),
    "graph-retention": ("retention",),
    "stale-snapshot": ("snapshot",),
    "copy-construct": ("warning", "alias"),
    "numpy-bridge": ("raises", "input-mutation"),
    "redundant-copy": ("copy-bytes",),
}


@cache
def registry() -> dict[str, Recipe]:
    found: dict[str, Recipe] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Recipe) and obj is not Recipe and obj.__module__ == module.__name__:
                found[obj.name] = obj()
    return found


def recipe(name: str) -> Recipe:
    return registry()[name]


def names() -> tuple[str, ...]:
    return tuple(sorted(registry()))


def recipes_for(category: str, declared: Sequence[str] = ()) -> tuple[str, ...]:
    """The recipes a rule declares (the known ones, in order), else its category's."""
    known = tuple(dict.fromkeys(n for n in declared if n in registry()))
    return known or CATEGORY_RECIPES.get(category, ())


def needs_for(recipes: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for name in recipes:
        if name in registry():
            out |= registry()[name].needs
    return out
