"""The copy rules: one folder per category, one module per rule (`rc321_*.py` holds RC321),
and the category's shared code in its `helpers.py`. `all_rules()` finds them, so adding a
rule is adding a file; code shared by several categories lives in `_common.py` or in
`analysis.queries`, never in a sibling rule."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from functools import cache

from review_copies.model.findings import Category
from review_copies.rules.base import Hit, Invalid, Rule, Valid

__all__ = ["Hit", "Invalid", "Rule", "Valid", "all_rules", "known_selector", "rule_by_code", "select_rules"]


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: dict[str, type[Rule]] = {}
    for info in sorted(pkgutil.walk_packages(__path__, f"{__name__}."), key=lambda m: m.name):
        if info.ispkg or not info.name.rsplit(".", 1)[-1].startswith("rc"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__ and not obj.__name__.startswith("_"):
                if obj.code in found:
                    raise RuntimeError(f"rule code {obj.code} is used twice ({found[obj.code].__name__}, {obj.__name__})")
                found[obj.code] = obj
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    return next((r for r in all_rules() if r.code == code), None)


def _matches(rule: type[Rule], selector: str) -> bool:
    selector = selector.strip()
    return rule.category.value == selector or rule.code.startswith(selector.upper()) or rule.name == selector


def known_selector(selector: str) -> bool:
    return selector in {c.value for c in Category} or any(_matches(r, selector) for r in all_rules())


def select_rules(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> tuple[type[Rule], ...]:
    """Rules picked by category, code or code prefix (RC2, RC201), or rule name."""
    select, ignore = list(select), list(ignore)
    chosen = [r for r in all_rules() if not select or any(_matches(r, s) for s in select)]
    return tuple(r for r in chosen if not any(_matches(r, s) for s in ignore))
