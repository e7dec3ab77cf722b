"""What the redundant-copy rules share."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.syntax import call_method_name, receiver_of


def clone_receiver(call: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `x.clone()` (with no arguments), else None."""
    if isinstance(call, cst.Call) and call_method_name(call) == "clone" and not call.args:
        return receiver_of(call)
    return None
