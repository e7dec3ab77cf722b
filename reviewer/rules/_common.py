"""Fixes more than one category offers: make the binding of an alias a copy, or write an
in-place statement out of place."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.events import Bind, Write
from review_copies.analysis.rewrite import atom, kwarg, method, out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import call_method_name


def attribute_source(expr: cst.BaseExpression) -> bool:
    """`bn.running_mean`, `self.weight`: a module's state, not a local tensor."""
    return isinstance(expr, cst.Attribute) and expr.attr.value not in ("data", "T", "mT", "H", "mH", "real", "imag")


def copy_at_binding(bind: Bind | None, ndarray: bool = False) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """Make the binding a copy: `b = a` -> `b = a.clone()`; `y = x.to(d)` -> `x.to(d, copy=True)`."""
    if bind is None or bind.expr is None:
        return None
    expr = bind.expr
    if call_method_name(expr) == "to" and isinstance(expr, cst.Call) and not any(a.keyword is not None and a.keyword.value == "copy" for a in expr.args):
        args = [*expr.args[:-1], expr.args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))] if expr.args else []
        return expr, expr.with_changes(args=[*args, kwarg("copy", cst.Name("True"))])
    return expr, method(atom(expr), "copy" if ndarray else "clone")


def write_fix(write: Write, bind: Bind | None, ndarray: bool = False) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    return copy_at_binding(bind, ndarray) or out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor")
