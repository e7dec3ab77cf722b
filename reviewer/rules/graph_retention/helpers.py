"""What the graph-retention rules share."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Accumulate, Backward, Bind, FunctionFlow, Loop, Use
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.queries.loops import trains_inside
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import dotted, names_in
from review_copies.analysis.values import Kind, Tri


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


def combined_after(flow: FunctionFlow, name: str, loop: Loop) -> bool:
    """`for k in range(self.n_steps): pieces.append(step(k))` (or `states = torch.cat([states,
    s])`), then the name read after the loop: a loop taken for training steps by its bound's
    name alone (nothing in it backpropagates or steps an optimizer), whose list or sum is
    this call's material (an RNN cell's states, its result), not a log."""
    node = loop.node
    if not isinstance(node, cst.For):
        return False
    counted = isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Name) and node.iter.func.value == "range"
    if not (counted or _chunks(flow, node.iter, loop)) or trains_inside(flow, loop):
        return False
    return any(isinstance(e, Use) and e.name == name and e.line > loop.end for e in flow.events)


_SPLITTING = frozenset(("split", "chunk", "tensor_split", "unbind"))


def _chunks(flow: FunctionFlow, expr: cst.BaseExpression, loop: Loop) -> bool:
    """`for batch in batches:` over pieces of a tensor this call holds (`batches = [embedded]`,
    `get_minibatches(embedded, chunk)`, `embedded.split(chunk)`): one forward, chunked to fit
    in memory, whose outputs the call puts back together; not a loader's batches, which the
    loop takes for steps. Each binding of the name before the loop must be such."""
    if isinstance(expr, cst.Name):
        binds = [e for e in flow.of(Bind) if e.name == expr.value and e.line < loop.start]
        return bool(binds) and all(b.expr is not None and _chunks(flow, b.expr, loop) for b in binds)

    def tensor(node: cst.BaseExpression) -> bool:
        return flow.value(node).kind is Kind.TENSOR

    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(tensor(e.value) for e in expr.elements)
    if not isinstance(expr, cst.Call) or re.search(r"(?i)loader|dataset|sampler", dotted(expr.func) or ""):
        return False
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SPLITTING:
        return tensor(expr.func.value) or dotted(expr.func.value) == "torch"
    return any(tensor(arg.value) for arg in expr.args if arg.keyword is None)


def cut_later_this_pass(flow: FunctionFlow, acc: Accumulate) -> bool:
    """Later in the same pass of its loop, on every path on from the update, the name is set
    to a value that holds no graph (`images = images.detach().requires_grad_(True)` in an
    attack's step, a leaf): the sum's graph does not reach the next pass."""
    if not acc.loops:
        return False
    end = flow.loops[acc.loops[-1]].end if acc.loops[-1] in flow.loops else acc.line
    return any(
        isinstance(e, Bind)
        and e.name == acc.name
        and acc.index < e.index
        and e.line <= end
        and e.loops == acc.loops
        and acc.arms[: len(e.arms)] == e.arms
        and (e.value.grad is Tri.NO or e.value.leaf)
        for e in flow.events
    )


def differentiated(flow: FunctionFlow, acc: Accumulate) -> bool:
    """A backward pass runs through the sum (`total.backward()`, `torch.autograd.grad(total /
    n, params)`): an in-graph sum built to be differentiated. One after the name was started
    afresh (`total = 0.0`) differentiates another sum, not this one."""
    for backward in backward_on(flow, acc.name):
        if backward.index < acc.index:
            return True  # in a loop: last pass's backward, or the sum's own
        restarted = any(
            isinstance(e, Bind) and e.name == acc.name and acc.index < e.index < backward.index and (e.expr is None or acc.name not in names_in(e.expr, attributes=True))
            for e in flow.events
        )
        if not restarted:
            return True
    return False


def trimmed(flow: FunctionFlow, container: str) -> bool:
    """RoboFlamingo's action head appends each step's feature to `self.history_memory` and
    pops the oldest once it holds more than `history_len`: `container.pop(...)`, `del
    container[...]` or `container = container[-n:]` in the same method keeps a bounded
    window, not a list that grows with every call."""
    scope = flow.scope
    if scope is None:
        return False
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("pop", "popleft") and dotted(func.value) == container:
                found = True

        def visit_Del(self, node: cst.Del) -> None:
            nonlocal found
            targets = [e.target for e in node.target.elements] if isinstance(node.target, cst.Tuple) else [node.target]
            found = found or any(isinstance(t, cst.Subscript) and dotted(t.value) == container for t in targets)

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            value = node.value
            if isinstance(value, cst.Subscript) and dotted(value.value) == container and any(dotted(t.target) == container for t in node.targets):
                found = True

    scope.node.visit(_Find())
    return found


# Conversions that return their receiver when nothing changes (`contiguous` too): applied to a
# name's own value again and again, they convert it once.
_IDEMPOTENT_CONVERSIONS = api.MAYBE_SELF_METHODS | {"contiguous"}


def converted_in_place_of_itself(acc: Accumulate) -> bool:
    """vlmaps' LSeg: `self.logit_scale = self.logit_scale.to(x.device)` on every call. After the
    first call the conversion returns the tensor itself: no node is added, nothing piles up."""
    node = acc.value_node
    seen = False
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _IDEMPOTENT_CONVERSIONS:
        node, seen = node.func.value, True
    return seen and dotted(node) == acc.name


def carries_only_detached(acc: Accumulate) -> bool:
    """HAWQ's folded batch norm: `self.bn.running_mean = self.bn.running_mean.detach() * m + (1
    - m) * batch_mean`. The value before enters only through `.detach()` (or `.data`,
    `.item()`): no graph is carried from one call to the next, each call's replaces the last."""
    found = _OldValue(acc.name)
    acc.value_node.visit(found)
    return found.cut > 0 and found.raw == 0


class _OldValue(cst.CSTVisitor):
    """Counts where an expression reads `name`: cut off from its graph, or as it is."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cut = 0
        self.raw = 0

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("detach", "item") and dotted(func.value) == self.name:
            self.cut += 1
            return False
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value == "data" and dotted(node.value) == self.name:
            self.cut += 1
            return False
        return self._read(node)

    def visit_Name(self, node: cst.Name) -> bool:
        return self._read(node)

    def _read(self, node: cst.BaseExpression) -> bool:
        if dotted(node) == self.name:
            self.raw += 1
            return False
        return True
