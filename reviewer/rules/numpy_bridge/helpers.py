"""What the NumPy-bridge rules know of a tensor's graph beyond the function: what the
repository's functions return, who calls this one, and the grad mode of the conversion."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.events import Bind, Event, FunctionFlow
from review_copies.analysis.queries.aliasing import declared_class
from review_copies.analysis.queries.autograd import callee_returns_no_graph
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.handed import classes_bound, classes_handed, frozen_handed
from review_copies.analysis.queries.loops import opposite_arms
from review_copies.analysis.semantics import api
from review_copies.analysis.values import Tri, Value
from review_copies.index.classes import plain_class


def graph_as_known(flow: FunctionFlow, value: Value, expr: cst.BaseExpression, use: Event) -> Value:
    """The tensor as the repository knows it: what a method or function defined under
    `@torch.no_grad()` returned (`actor.select_action(obs).cpu()`, or a name bound to it), or
    one that returns only values that can carry none (`x.new_zeros(n, dtype=torch.long)`),
    carries no graph, whatever a guess about calling a module said; nor does anything in a
    function every caller of which runs it with autograd off (followed a few calls up). Nor
    does the conversion itself under `no_grad`: `.numpy()` refuses a tensor that requires grad
    only while grad mode is on (torch 2.13 converts it under `no_grad` and `inference_mode`)."""
    if use.no_grad:
        return value.but(grad=Tri.NO)
    if value.grad is not Tri.YES or flow.index is None:
        return value
    if called_grad_off_in_repository(flow):
        return value.but(grad=Tri.NO)
    tensor_methods = api.tensor_methods()
    for _ in range(8):
        if isinstance(expr, cst.Name):
            bind = _reaching_bind(flow, expr.value, use)
            if bind is None or bind.expr is None:
                return value
            expr, use = bind.expr, bind
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in tensor_methods:
            expr = expr.func.value  # `.squeeze(0)`, `.cpu()`, `.float()`: a graph passes through
        elif isinstance(expr, cst.Subscript):
            expr = expr.value  # `pred[:, :, 0, 0]`, `model(x)[0]`: so does indexing
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and _a_plain_object(flow, expr.func, use.index):
            return value.but(grad=Tri.MAYBE)  # `model: Client`: a plain class's `__call__` (a socket client), not a forward pass
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and _frozen_module(flow, expr.func, use.index):
            return value.but(grad=Tri.MAYBE)  # its graph, if any, comes from its input
        elif isinstance(expr, cst.Call) and isinstance(expr.func, (cst.Attribute, cst.Name)):
            if callee_returns_no_graph(flow, expr.func, use.index):
                return value.but(grad=Tri.NO)
            func = expr.func
            if isinstance(func, cst.Attribute) and flow.index.hands_on_another_objects_result(func.attr.value, declared_class(flow, func.value, use.index)):
                return value.but(grad=Tri.MAYBE)  # `model.get_labels(logits)`: what `self.loss_fct.get_label(...)` makes of them
            return value
        else:
            return value
    return value


def _reaching_bind(flow: FunctionFlow, name: str, use: Event) -> Bind | None:
    """The binding of `name` that the use reads: the last one before it, but not one in the
    other arm of an `if` around the use when the same iteration of the loop around both
    binds the name first on every path (`pred = model(batch)[0]` at the top of the loop,
    `pred = pca.transform(pred)` in the `if` arm, `pred.numpy()` in the `else` arm)."""
    binds = [e for e in flow.events if isinstance(e, Bind) and e.name == name and e.index < use.index]
    for i in range(len(binds) - 1, -1, -1):
        bind = binds[i]
        killed = any(k.loops == use.loops and set(k.arms) <= set(use.arms) for k in binds[:i])
        if not (killed and opposite_arms(flow, bind.line, use.line)):
            return bind
    return None


def _frozen_module(flow: FunctionFlow, module: cst.Name, before: int) -> bool:
    """Whether the module called is built, here or by every caller that hands it over (a few
    calls up), from a class of the repository whose constructor turns off grad for all its
    parameters (pytorch-fid's `InceptionV3`, built with `requires_grad=False`)."""
    assert flow.index is not None
    if module.value in flow.params and frozen_handed(flow.file, flow.scope, module.value):
        return True  # StyleGAN's `G_ema = copy.deepcopy(G).eval()` of a `G` built with `.requires_grad_(False)`
    own = declared_class(flow, module, before)
    classes = frozenset((own,)) if own else None
    if classes is None and flow.scope is not None:
        classes = classes_handed(flow.file, flow.scope, module.value) if module.value in flow.params else classes_bound(flow.scope, module.value)
    return bool(classes) and all(flow.index.builds_frozen(c) for c in classes)


def _a_plain_object(flow: FunctionFlow, callee: cst.Name, before: int) -> bool:
    """The callee is declared or built as a repository class that derives from `object` alone."""
    cls, index = declared_class(flow, callee, before), flow.index
    return bool(cls) and index is not None and bool(flow.file.once(("plain class", cls), lambda: plain_class(index, cls)))
