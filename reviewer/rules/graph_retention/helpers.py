"""What the graph-retention rules share."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Backward, FunctionFlow
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.syntax import names_in


def detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x.detach()`; `list(x.detach())` for `list(x)` (a list has no `detach`)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1 and not expr.args[0].star:
        return expr.with_changes(args=[expr.args[0].with_changes(value=chain(atom(expr.args[0].value), "detach"))])
    return chain(atom(expr), "detach")


def backward_on(flow: FunctionFlow, name: str) -> Iterator[Backward]:
    """The backward passes through `name` in the function: `name.backward()`,
    `(name / n).backward()`, `torch.autograd.grad(name, params)`."""
    for event in flow.of(Backward):
        if event.outputs is not None and (name_of(event.outputs) == name or name in names_in(event.outputs, attributes=True)):
            yield event
