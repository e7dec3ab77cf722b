"""What autograd keeps and when it lets go: saved tensors still needed at a write, and the
`backward()` calls between two events."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import Backward, Bind, Call, FunctionFlow, Return, Saved, Store, Write
from review_copies.analysis.queries.aliasing import declared_class, name_of
from review_copies.analysis.roots import overlaps
from review_copies.analysis.semantics import api
from review_copies.analysis.values import Kind, Tri, Value


def backpropagated(flow: FunctionFlow, roots: frozenset[str], after: int = -1) -> bool:
    return any(isinstance(e, Backward) and e.index > after and e.value.roots & roots for e in flow.events)


def backward_between(flow: FunctionFlow, start: int, end: int, saved: int | None = None) -> bool:
    """Did a backward run between the two events that freed the saved tensor `saved`?
    (A backward frees its own graph only; one of unknown provenance may have freed anything;
    one told to retain the graph frees nothing.)"""
    return any(
        isinstance(e, Backward) and not e.retains and start < e.index < end and (saved is None or not e.value.graph or saved in e.value.graph)
        for e in flow.events
    )


def backward_later(flow: FunctionFlow, after: int, saved: int) -> bool:
    """A backward after `after` that goes through the saved tensor (and so will fail)."""
    return any(isinstance(e, Backward) and e.index > after and saved in e.value.graph for e in flow.events)


def saved_before(flow: FunctionFlow, write: Write) -> Saved | None:
    """A tensor autograd saved before this write, still needed (no backward freed it)."""
    for saved in flow.saved:
        needed = saved.index < write.index and not flow.left_between(saved.arms, write.arms) and not backward_between(flow, saved.index, write.index, saved.index)
        if (
            needed
            and overlaps(saved.roots, write.target.roots)
            and (saved.attached or saved.in_forward)
            and not _rebound(flow, saved, write)
            and not _other_arm(flow, saved, write)
        ):
            if write.op == "optimizer.step()" and not backward_later(flow, write.index, saved.index):
                continue  # stepping with a graph still alive is harmless unless it is backpropagated after
            if write.op == "optimizer.step()" and _stepped_by_another(flow, write, saved):
                continue
            return saved
    return None


def _stepped_by_another(flow: FunctionFlow, write: Write, saved: Saved) -> bool:
    """`critic1_loss.backward(); critic1_optim.step()`, with `critic2`'s parameters saved for a
    later backward: an optimizer whose parameters this function cannot see steps what the
    backward just before it reached (that is what its gradients are for). When nothing that
    backward went through shares memory with what was saved, the step is another module's.
    (A GAN's `opt_d.step()` after `d_loss.backward()` still reaches `D`'s weights saved for
    `g_loss`: `d_loss` went through `D` too.)"""
    if roots.ANY_PARAMS not in write.target.roots:
        return False
    before = [e for e in flow.events if isinstance(e, Backward) and e.index < write.index]
    if not before or not before[-1].value.graph:
        return False
    reached = [s for s in flow.saved if s.index in before[-1].value.graph]
    return bool(reached) and not any(overlaps(s.roots, saved.roots) for s in reached)


def _rebound(flow: FunctionFlow, saved: Saved, write: Write) -> bool:
    """After the save the written name was bound to another tensor: where the save happened
    (one arm of an `if`), the write reaches that other tensor; merging the arms must not pair
    the save with the write."""
    name = name_of(write.target_node)
    return any(
        isinstance(e, Bind) and e.name == name and saved.index < e.index < write.index and not overlaps(e.value.roots, saved.roots) for e in flow.events
    )


def _other_arm(flow: FunctionFlow, saved: Saved, write: Write) -> bool:
    """`soft = proj(x) if x.size(-1) == d else x`, then `soft[m] = e`: the write reaches `x`
    only through the arm that never called `proj`, and the arm that saved `x` gives a new
    tensor. The two arms exclude each other, so the save and the write never meet."""
    name = name_of(write.target_node)
    binds = [e for e in flow.events if isinstance(e, Bind) and e.name == name and e.index < write.index]
    if not binds or not isinstance(binds[-1].expr, cst.IfExp) or saved.node is None:
        return False
    expr = binds[-1].expr
    for arm in (expr.body, expr.orelse):
        if _holds(arm, saved.node):
            return not overlaps(flow.value(arm).roots, saved.roots)
    return False


def _holds(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    found = False

    class Find(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            nonlocal found
            found = found or n is node
            return not found

    tree.visit(Find())
    return found


def reaches_a_backward(flow: FunctionFlow, saved: Saved) -> bool:
    """Can a backward ever run through what autograd saved here: is it backpropagated in
    this function, or does a value whose graph holds it leave the function (returned,
    stored, handed to anything but a torch op the analysis follows)? A distance that only
    feeds an `argmax` (`_, ind = (-dist).max(1)`) never is: its graph is dropped unused."""
    for event in flow.events:
        if isinstance(event, (Return, Store, Backward)) and saved.index in _graph(event.value):
            return True
        if isinstance(event, Call):
            inputs = (*event.args, *(v for _, v in event.kwargs), *((event.receiver,) if event.receiver is not None else ()))
            if (
                any(saved.index in _graph(v) for v in inputs)
                and not _followed(event, saved.index)
                and not _into_graphless_helper(flow, event)
                and not _method_into_indices(flow, event)
            ):
                return True
    return False


def _into_graphless_helper(flow: FunctionFlow, call: Call) -> bool:
    """`gumbel_sample(dist)`: a plain function of the repository whose every `return` can hold
    no graph (an `argmax`, a `torch.zeros`): what it was handed goes no further than the call
    (it has no `self` to keep it on)."""
    return graphless_helper_call(flow, call.call)


def _method_into_indices(flow: FunctionFlow, call: Call) -> bool:
    """`self.compute_pred(proj(x), embs).argmax(-1)`: a method of this class that keeps none
    of its arguments (the index: nothing stored on `self`), whose result goes straight into
    an op with no gradient (`argmax`): the graph it was handed ends there."""
    func = call.call.func
    scope = flow.scope
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return False
    if scope is None or scope.class_node is None or flow.index is None:
        return False
    info = ((flow.index.facts(flow.file.path) or {}).get("classes", {}).get(scope.class_node.name.value) or {}).get("methods", {})
    method = info.get(func.attr.value)
    if method is None or method.get("keeps") or method.get("stub"):
        return False
    return any(
        isinstance(e, Call) and isinstance(e.call.func, cst.Attribute) and e.call.func.value is call.node and e.method in api.INDEX_OPS
        for e in flow.events
    )


def graphless_helper_call(flow: FunctionFlow, node: cst.BaseExpression) -> bool:
    """`accuracy(scores, labels)`: a call of a plain function of the repository whose every
    `return` can hold no graph (an `argmax`, a list of `.item()` numbers)."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Name) or flow.index is None:
        return False
    name = node.func.value
    return bool(flow.file.once(f"no graph from {name}", lambda: flow.index.returns_no_graph(name)))


def graphless_method_call(flow: FunctionFlow, node: cst.BaseExpression, before: int) -> bool:
    """`sae.training_step(batch, optimizer)`: a call of a method whose result holds no graph
    (`callee_returns_no_graph`): no forward pass of a submodule, whatever its arguments."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and flow.index is not None and callee_returns_no_graph(flow, node.func, before)


def callee_returns_no_graph(flow: FunctionFlow, func: cst.Attribute | cst.Name, before: int) -> bool:
    """What `func` calls returns only values that can hold no graph (a dict of `float(...)`
    numbers, an `argmax`) or runs under `no_grad`: for a method, as the receiver's class
    (declared or built here) defines it, else as every definition of that name does."""
    assert flow.index is not None
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value
    cls = declared_class(flow, func.value, before) if isinstance(func, cst.Attribute) else ""
    known = flow.index.method_returns_no_graph(cls, name) if cls else None
    return bool(known if known is not None else flow.file.once(f"no graph from {name}", lambda: flow.index.returns_no_graph(name)))


def another_objects_result(flow: FunctionFlow, node: cst.BaseExpression) -> bool:
    """`model.crf_decode(outputs, mask)`: a call of a method that the repository defines
    only to hand back what an object it holds computes (`return self.crf.decode(...)`): its
    result is not a submodule's forward output, and whether it holds a graph is unknown."""
    if not isinstance(node, cst.Call) or not isinstance(node.func, cst.Attribute) or flow.index is None:
        return False
    name = node.func.attr.value
    return bool(flow.file.once(f"another object's result from {name}", lambda: flow.index.hands_on_another_objects_result(name)))


def _graph(value: Value) -> frozenset[int]:
    """The saved records a value's graph holds, its items' and elements' included. A value
    that does not require grad (`sigmoid(x).detach().numpy()`: memory shared with a saved
    output, but no `grad_fn`) leads no backward to them."""
    parts = (value, *(value.items or ()), *((value.element,) if value.element is not None else ()))
    return frozenset().union(*(part.graph for part in parts if part.grad is not Tri.NO))


# Torch ops that return (values, indices): only the values are differentiable.
_VALUES_AND_INDICES = frozenset("max min topk sort kthvalue mode median nanmedian cummax cummin".split())


def _followed(call: Call, index: int) -> bool:
    """Is `call` a torch op whose result shows where the saved record goes: on in the result's
    graph, or nowhere (a number, a non-differentiable result, values unpacked into `_`)?"""
    name = call.method or (call.qualnames[0].rpartition(".")[2] if call.qualnames else "")
    torch_op = (call.method is not None and call.receiver is not None and call.receiver.is_tensor) or (
        bool(call.qualnames) and all(q.startswith("torch.") for q in call.qualnames)
    )
    if not torch_op:
        return False
    stmt = call.stmt
    if isinstance(stmt, cst.Assign) and stmt.value is call.node and isinstance(stmt.targets[0].target, cst.Tuple):
        # Unpacked: `_, ind = x.max(1)` throws the values away; anything else keeps them.
        first = stmt.targets[0].target.elements[0].value
        return name in _VALUES_AND_INDICES and len(stmt.targets) == 1 and isinstance(first, cst.Name) and first.value == "_"
    result = call.result
    if result.kind in (Kind.SCALAR, Kind.OTHER, Kind.NONE):
        return True
    if result.kind is Kind.TENSOR:
        return index in result.graph or result.grad is Tri.NO
    return False
