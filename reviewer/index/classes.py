"""What the repository's own class definitions say about their instances: a class that
derives from nothing but `object` makes no `nn.Module`, so calling one of its instances runs
its `__call__`, not a forward pass that returns a tensor."""

from __future__ import annotations

from review_copies.index.calls import CallIndex, class_definitions


def plain_class(index: CallIndex, name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Every class the repository defines under `name` derives, through classes it also
    defines, from `object` alone. False when it defines none, or one of them has a base it
    does not define (`nn.Module`, a library's class): then the index cannot tell."""
    found = False
    for cls in class_definitions(index, name):
        found = True
        for base in cls.get("bases", []):
            short = base.rsplit(".", 1)[-1]
            if short == "object":
                continue
            if short in seen or short == name or not plain_class(index, short, seen | {name}):
                return False
    return found
