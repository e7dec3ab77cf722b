"""What the redundant-copy rules share."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.syntax import call_method_name, receiver_of
from review_copies.analysis.values import Kind, Value


def clone_receiver(call: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `x.clone()` (with no arguments), else None."""
    if isinstance(call, cst.Call) and call_method_name(call) == "clone" and not call.args:
        return receiver_of(call)
    return None


def new_and_unshared(value: Value) -> bool:
    """A tensor just computed that nothing else refers to (`a.index_select(0, i)`, `x * 2`):
    cloning it copies it a second time (RC341's finding)."""
    return value.kind is Kind.TENSOR and value.fresh and value.certain and not value.via
