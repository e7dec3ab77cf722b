"""Tensor methods: in-place writes (`add_`, `copy_`), views and maybe-views, `detach` and
`clone`, conversions that return the same tensor when nothing changes (`.to`, `.cpu`,
`.float`), `.numpy()`, and what autograd saves computing the rest."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.context import Context
from review_copies.analysis.events import Write
from review_copies.analysis.semantics import api
from review_copies.analysis.semantics.functions import index_result, pair_items, reduces_along_dim, saves_of
from review_copies.analysis.syntax import code_of, first_argument_false, keyword_is, short_code, sliced_inside, transposed
from review_copies.analysis.values import INTEGER, OTHER, SCALAR, UNKNOWN, Device, Kind, Tri, Value

_NEW_TENSORS = frozenset(("new_tensor", "new_zeros", "new_ones", "new_empty", "new_full"))
# A copy into another layout or memory, or the tensor itself when it is there already
# (`to_dense()` of a strided tensor, `pin_memory()` of a pinned one).
_LAYOUT_CONVERSIONS = frozenset(("to_dense", "to_sparse", "pin_memory"))
# What these return is a Python int (`x.size(0)`, `x.numel()`): `torch.arange` of it makes int64.
_COUNTS = frozenset(("dim", "numel", "nelement", "ndimension", "element_size"))


def call_tensor_method(cx: Context, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value], known: bool) -> Value:
    """`recv.method(...)` where `recv` is a tensor (`known`) or used only the way tensors are."""
    assert isinstance(node.func, cst.Attribute)
    recv_node = node.func.value
    origin = f"`{short_code(node)}`"
    if method == "requires_grad_":
        flag = not first_argument_false(node, "requires_grad")
        updated = recv.but(grad=Tri.YES if flag else Tri.NO, leaf=flag)
        cx.set_grad_flag(recv_node, updated)
        return updated
    if method == "detach_":
        updated = recv.but(grad=Tri.NO, leaf=False)
        cx.rebind(recv_node, updated)
        return updated
    if api.is_inplace_method(method) and method not in ("share_memory_", "retain_grad_"):
        cx.emit(Write, node, target=recv, target_node=recv_node, op=f".{method}()", source=args[0] if args else None)
        if not cx.no_grad and any(a.attached for a in args):
            updated = recv.but(grad=Tri.YES, graph=recv.graph.union(*(a.graph for a in args)))
            cx.rebind(recv_node, updated)
            return updated
        return recv.but(fresh=False)
    if method == "copy_":
        return recv
    if method == "detach":
        if not recv.certain and recv.via:
            # `k.to(dtype=d).detach()`: shares with `k` exactly when `.to` returned `k` itself.
            return recv.but(grad=Tri.NO, leaf=False, fresh=False, origin=origin)
        return recv.but(grad=Tri.NO, leaf=False, via="detach", fresh=False, certain=True, origin=origin)
    if method == "clone":
        return recv.but(roots=cx.new_root(node), fresh=True, leaf=False, via="", certain=True, origin=origin, line=cx.line(node))
    if method in api.VIEW_METHODS:
        return recv.but(via=recv.via or "view", fresh=False, leaf=False, origin=origin)
    if method in api.VIEW_TUPLE_METHODS:
        return Value(kind=Kind.TUPLE, grad=Tri.NO, element=recv.but(via=recv.via or "view", fresh=False, leaf=False, origin=origin))
    if method == "contiguous" and not args and transposed(recv_node):
        return cx.tensor(node, recv, origin=origin)  # a transposed view is never contiguous: this copies
    if method == "contiguous" and not args and sliced_inside(recv_node):
        # `x[:, a:b].contiguous()` copies, except for a size-1 leading dimension (a batch of
        # one), where the slice is contiguous already: a copy's roots, never called fresh.
        return cx.tensor(node, recv, origin=origin).but(fresh=False)
    if method in api.MAYBE_VIEW_METHODS:
        return recv.but(via=recv.via or "reshape", certain=False, fresh=False, leaf=False, origin=origin)
    if method in api.MAYBE_SELF_METHODS:
        return _conversion(cx, node, recv, method, args, kwargs, origin)
    if method == "numpy":
        return Value(kind=Kind.NDARRAY, grad=Tri.NO, device=Device.CPU, roots=recv.roots, via="numpy", certain=not keyword_is(node, "force", "True"), origin=origin)
    if method in api.SCALAR_METHODS:
        return INTEGER if method in _COUNTS or (method == "size" and args) else SCALAR
    if method in _NEW_TENSORS:
        return cx.tensor(node, recv, grad=Tri.NO, origin=origin)
    if method in _LAYOUT_CONVERSIONS:
        return recv.but(via=recv.via or "to", certain=False, fresh=False, origin=origin)
    returns = api.method_returns(method)
    if reduces_along_dim(method, args[0] if args else None, kwargs):
        returns = "tuple"  # `x.max(1)`: (values, indices)
    if method in api.INDEX_OPS:
        return index_result(cx, node, method, (recv,), origin)
    if api.is_view_op(method):
        # May share memory with the receiver (broadcast_to, as_strided, _values...): never fresh.
        return recv.but(via=recv.via or "view", certain=False, fresh=False, leaf=False, origin=origin)
    if not known or returns == "unknown":
        return UNKNOWN
    if returns == "other":
        return OTHER
    saves = saves_of(cx, node, method, recv, args[0] if args else UNKNOWN)
    result = cx.tensor(node, recv, *args, *kwargs.values(), origin=origin, saves=saves)
    if returns == "tuple":
        return Value(kind=Kind.TUPLE, grad=Tri.NO, element=result.but(fresh=False), roots=cx.new_root(node, "list"), fresh=True, items=pair_items(cx, node, method, result))
    if method in api.SAVES_OUTPUT and result.grad is not Tri.NO:
        result = cx.with_save(result, cx.save(result, node, f"`.{method}()`", result.attached))
    return result


def _conversion(cx: Context, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value], origin: str) -> Value:
    """`.to()`, `.cpu()`, `.float()`...: the same tensor when nothing changes, else a copy."""
    target_device: Device | None = None
    target_dtype: str | None = None
    target_flag = ""
    if method == "cpu":
        target_device = Device.CPU
    elif method == "cuda":
        target_device = Device.CUDA
    elif method in api.DTYPE_METHODS:
        target_dtype = api.DTYPE_METHODS[method]
    elif method == "to":
        if keyword_is(node, "copy", "True"):
            return cx.tensor(node, recv, origin=origin).but(device=recv.device)
        # `.to(y.dtype)`, `.to(compute_dtype)`: spelled as a dtype, whatever the analysis knows of it.
        given = [a.value for a in node.args if a.keyword is None and not a.star]
        keys = ["dtype" if _spelled_a_dtype(g) else None for g in given]
        for key, value in (*zip(keys, args), *((k, v) for k, v in kwargs.items() if k in ("device", "dtype", "other"))):
            if key == "dtype":
                # (`dtype=int`, a name it cannot resolve: a dtype still, never a device)
                target_dtype = value.dtype if value.dtype is not None and value.kind is Kind.OTHER else target_dtype
            elif value.kind is Kind.DEVICE:
                target_device, target_flag = value.device, value.gpu_if
            elif value.dtype is not None and value.kind is Kind.OTHER:
                target_dtype = value.dtype
            elif value.kind is Kind.TENSOR:
                target_device, target_dtype = value.device, value.dtype
            elif value.kind is Kind.UNKNOWN:
                target_device = Device.MAYBE_CUDA
    same_device = target_device is None or (target_device is recv.device and target_device in (Device.CPU, Device.CUDA))
    differs_device = target_device is not None and {target_device, recv.device} == {Device.CPU, Device.CUDA}
    same_dtype = target_dtype is None or target_dtype == recv.dtype
    differs_dtype = target_dtype is not None and recv.dtype is not None and target_dtype != recv.dtype
    # `if x.dtype != D: x = x.to(D)`: the test says the conversion changes the dtype.
    spelled = [code_of(a.value) for a in node.args if a.keyword is None or a.keyword.value == "dtype"]
    if recv.not_dtype and (recv.not_dtype == target_dtype or recv.not_dtype in spelled):
        differs_dtype = True
    device = target_device if target_device is not None else recv.device
    if device is Device.MAYBE_CUDA and recv.device is Device.CUDA:
        device = Device.CUDA
    dtype = target_dtype or recv.dtype
    flag = target_flag or (recv.gpu_if if target_device is None else "")  # `.to(device)` with `device = "cuda" if use_gpu else "cpu"`
    # An integer or bool tensor cannot require grad: `.byte()`, `.long()` end the graph.
    grad = Tri.NO if dtype is not None and not dtype.startswith(_DIFFERENTIABLE_DTYPES) else None
    if differs_device or differs_dtype:
        return cx.tensor(node, recv, origin=origin, grad=grad).but(device=device or Device.UNKNOWN, dtype=dtype, gpu_if=flag, vector=recv.vector)
    converted = recv.but(via=recv.via or "to", certain=same_device and same_dtype, fresh=False, device=device or Device.UNKNOWN, dtype=dtype, origin=origin, gpu_if=flag, vector=recv.vector)
    return converted.but(grad=grad, vector=converted.vector) if grad is not None else converted


_DIFFERENTIABLE_DTYPES = ("float", "bfloat", "complex", "half", "double")


def maybe_self(cx: Context, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    """`x.to(device)`, `x.cpu()`, `x.view(...)` on something unknown: whatever it is, the
    result may be `x` itself (or share its memory), and it says where it lives."""
    device = recv.device
    if method == "cuda":
        device = Device.CUDA
    elif method == "cpu":
        device = Device.CPU
    elif method == "to":
        for value in (*args, *(v for k, v in kwargs.items() if k == "device")):
            if value.kind in (Kind.DEVICE, Kind.UNKNOWN, Kind.TENSOR):
                device = cx.device_of(value)
    via = "view" if method in api.VIEW_METHODS else "reshape" if method in api.MAYBE_VIEW_METHODS else "to"
    return recv.but(device=device, via=recv.via or via, certain=via == "view" and recv.certain, fresh=False, leaf=False, origin=f"`{short_code(node)}`")


def _spelled_a_dtype(expr: cst.BaseExpression) -> bool:
    """`y.dtype`, `dtype`, `absmax_dtype`, `self.compute_dtype`: a name that says dtype."""
    name = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else ""
    return name == "dtype" or name.endswith("_dtype")
