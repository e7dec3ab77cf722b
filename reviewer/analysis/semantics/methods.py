"""A method called on a value: dispatched by what the receiver is (a module, an optimizer,
a container, an array, a tensor) or, when unknown, by what only one kind of value has."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context
from review_copies.analysis.events import Backward
from review_copies.analysis.guesses import DATA_PIPELINE_NAME, SCHEDULER_NAME
from review_copies.analysis.semantics import api, containers
from review_copies.analysis.semantics.modules import call_module_method, call_optimizer_method
from review_copies.analysis.semantics.tensors import call_tensor_method, maybe_self
from review_copies.analysis.syntax import code_of, dotted, retains_graph
from review_copies.analysis.values import NONE, SCALAR, UNKNOWN, Device, Kind, Tri, Value

_CONTAINERS = (Kind.STATE_DICT, Kind.DICT, Kind.PARAMETER_LIST, Kind.LIST, Kind.TUPLE)


def call_method(cx: Context, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    func = node.func
    assert isinstance(func, cst.Attribute)
    if method == "backward":
        cx.emit(Backward, node, value=recv, retains=retains_graph(node), outputs=func.value)
        return NONE
    if method in api.SPARSE_MATRIX_METHODS and recv.kind is not Kind.TENSOR:
        return Value(kind=Kind.OTHER, grad=Tri.NO)  # `adj.tocoo()`: a SciPy matrix, never a tensor
    if recv.kind is Kind.MODULE:
        return call_module_method(cx, node, recv, method, args, kwargs)
    if recv.kind is Kind.OPTIMIZER:
        return call_optimizer_method(cx, node, recv, method)
    if recv.kind in _CONTAINERS:
        return containers.call_container_method(cx, node, recv, method, args)
    if recv.kind is Kind.NDARRAY:
        if method == "copy":
            return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=cx.new_root(node, "np"), fresh=True)
        if method in ("astype", "flatten"):
            # A new array (`astype` copies unless told not to); not called fresh, because what
            # is kept of it (a dataset's cache) is as shared as any other array.
            return Value(kind=Kind.NDARRAY, grad=Tri.NO)
        if method in ("view", "reshape", "ravel", "transpose", "squeeze", "swapaxes", "T"):
            return recv.but(fresh=False)
        return UNKNOWN
    if recv.kind is Kind.TENSOR or (recv.kind is Kind.UNKNOWN and method in api.TENSOR_ONLY_METHODS):
        return call_tensor_method(cx, node, recv if recv.kind is Kind.TENSOR else recv.but(kind=Kind.TENSOR), method, args, kwargs, known=recv.kind is Kind.TENSOR)
    if recv.kind is not Kind.UNKNOWN:
        return UNKNOWN
    if method == "item":
        return SCALAR
    if method == "astype":
        # Only NumPy arrays (and pandas objects) have `astype`; a tensor has none.
        return Value(kind=Kind.NDARRAY, grad=Tri.NO)
    if method == "state_dict":
        owner = dotted(func.value).rpartition(".")[2]
        if DATA_PIPELINE_NAME.search(owner) or SCHEDULER_NAME.search(owner):
            return UNKNOWN  # `train_loader.state_dict()`, `lr_scheduler.state_dict()`: positions and rates, not tensors
        # Named by its expression when it has no dotted name: `unwrap_model(model)` and
        # `unwrap_model(model_ema)` are two modules, not one unnamed module (RepVGG's EMA).
        named = dotted(func.value) or "".join(code_of(func.value).split())
        as_module = recv.but(kind=Kind.MODULE, roots=recv.roots or frozenset((roots.parameters(named),)))
        return call_module_method(cx, node, as_module, method, args, kwargs)
    if method in api.MAYBE_SELF_METHODS or method in api.VIEW_METHODS or method in api.MAYBE_VIEW_METHODS:
        return maybe_self(cx, node, recv, method, args, kwargs)
    if (recv.device is not Device.UNKNOWN or recv.grad is Tri.YES) and api.method_returns(method) in ("tensor", "tuple"):
        # Moved to a device or attached to the graph: it is a tensor.
        return call_tensor_method(cx, node, recv.but(kind=Kind.TENSOR), method, args, kwargs, known=True)
    return UNKNOWN
