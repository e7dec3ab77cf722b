"""What the redundant-copy rules share."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow, Loop, Store, Write
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.semantics import api
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


def held_roots(value: Value, depth: int = 3) -> frozenset[str]:
    """The storages a value keeps, its items' included: `children.append((child, label))`
    keeps `label`'s clone inside the tuple it appends."""
    held = value.roots
    if depth > 0:
        for item in (*(value.items or ()), *((value.element,) if value.element is not None else ())):
            held |= held_roots(item, depth - 1)
    return held


def read_only_copy(flow: FunctionFlow, bind: Bind, loop: Loop, source: cst.BaseExpression) -> bool:
    """After the copy, nothing in the loop's body writes into it or into its source, and it
    goes only to torch's own functions and tensor methods (`torch.cat([h[:, :k], h[:, k + 1:]])`),
    not to a call that might write into it: the copy is not needed at all."""
    copied = bind.value.roots
    origin = flow.value(source)
    if not copied:
        return False
    source_roots = origin.roots if origin is not None else frozenset()
    later = [e for e in flow.events if bind.index < e.index and e.line <= loop.end]
    # (A source the analysis knows no storage of, a parameter of unknown type, is matched by name.)
    name = name_of(source)
    if any(
        (isinstance(e, Write) and (e.target.roots & (copied | source_roots) or name_of(e.target_node) == name))
        or (isinstance(e, Store) and e.container == name)
        or (isinstance(e, Call) and e.method is not None and api.is_inplace_method(e.method) and e.receiver_node is not None and name_of(e.receiver_node) == name)
        for e in later
    ):
        return False
    return not any(
        isinstance(e, Call)
        and not any(q.startswith("torch.") for q in e.qualnames)
        and not (e.receiver is not None and e.receiver.kind is Kind.TENSOR)
        and any(held_roots(a) & copied for a in (*e.args, *(v for _, v in e.kwargs)))
        for e in later
    )
