"""What the graph-retention rules share."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Backward, FunctionFlow
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.rewrite import atom, chain


def detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    return chain(atom(expr), "detach")


def backward_on(flow: FunctionFlow, name: str) -> Iterator[Backward]:
    """`name.backward(...)` calls in the function."""
    for event in flow.of(Backward):
        func = event.node.func if isinstance(event.node, cst.Call) else None
        if isinstance(func, cst.Attribute) and name_of(func.value) == name:
            yield event
