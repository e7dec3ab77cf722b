"""Functions known by their qualified name: torch factories and legacy constructors, the
functions that share memory (`from_numpy`, `as_tensor`), views, `torch.nn.functional`,
module and optimizer constructors, `copy.deepcopy`, NumPy."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context
from review_copies.analysis.events import Backward, Write
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import keyword, keyword_is, last, retains_graph, short_code
from review_copies.analysis.values import OTHER, SCALAR, UNKNOWN, Device, Kind, Tri, Value, a_loader, index_tuple

_FLOAT_FACTORIES = frozenset(("zeros", "ones", "empty", "rand", "randn", "full", "linspace", "logspace", "eye", "normal"))
_JOINS = frozenset(("cat", "stack", "concat", "concatenate", "hstack", "vstack"))


def call_function(cx: Context, node: cst.Call, quals: tuple[str, ...], args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    qual = next((q for q in quals if q.startswith(("torch", "numpy", "copy"))), quals[0])
    short = last(qual)
    first = args[0] if args else UNKNOWN
    origin = f"`{short_code(node)}`"
    if qual in api.FACTORIES:
        return _factory(cx, node, qual, args, kwargs)
    if qual in api.LEGACY_CONSTRUCTORS:
        if first.kind is Kind.TENSOR:
            return first.but(via="alias", fresh=False, leaf=False, origin=origin)
        return Value(kind=Kind.TENSOR, grad=Tri.NO, dtype=api.LEGACY_DTYPES.get(short), device=Device.CUDA if ".cuda." in qual else Device.CPU, roots=cx.new_root(node), fresh=True)
    if qual in api.SHARING_FUNCTIONS:
        return _sharing(cx, node, qual, first, kwargs)
    if qual in api.LOADER_CLASSES:
        return a_loader(origin)
    if qual in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        off = kwargs.get("requires_grad") is not None and keyword_is(node, "requires_grad", "False")
        return first.but(kind=Kind.TENSOR, grad=Tri.NO if off else Tri.YES, leaf=True, fresh=False, via="", origin=origin)
    if qual.startswith("torch.nn.init.") and short.endswith("_") and args:
        cx.emit(Write, node, target=first, target_node=node.args[0].value, op=qual.replace("torch.nn.", "nn."), source=None)
        return first
    if qual.startswith(("torch.nn.", "torch.optim.")) and short[:1].isupper() and "functional" not in qual:
        return _construct(cx, node, qual, short, args, kwargs)
    if qual == "copy.deepcopy":
        element = first.element.but(roots=cx.new_root(node, "copy"), via="", certain=True) if first.element is not None else None
        return first.but(roots=cx.new_root(node, "copy"), via="", certain=True, fresh=True, element=element, items=None)
    if qual == "copy.copy":
        if first.kind is Kind.NDARRAY:
            # ndarray.__copy__ copies the data (a tensor's shares its storage: measured).
            return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=cx.new_root(node, "np"), fresh=True)
        return first.but(fresh=False, roots=first.roots | cx.new_root(node, "shallow"), via=first.via or "shallow-copy")
    if qual in api.DIFFERENTIATE_FUNCTIONS and args:
        # Runs backward through `outputs` as `outputs.backward()` does (and frees that graph
        # unless told to keep it); the gradients it returns are not followed.
        given = node.args[1].value if len(node.args) > 1 and node.args[1].keyword is None else keyword(node, "inputs")
        inputs = given if qual == "torch.autograd.grad" else None
        cx.emit(Backward, node, value=first, retains=retains_graph(node), outputs=node.args[0].value, inputs=inputs, function=True)
        return UNKNOWN
    if qual == "functools.partial" and first.kind is not Kind.MODULE:
        # `partial(VariableSizeImageTransform(size=n), max_num_chunks=k)`: a callable with
        # arguments bound, kept on a module without being one of its submodules.
        return Value(kind=Kind.OTHER, grad=Tri.NO, origin=origin)
    if qual == "torch.device":
        return Value(kind=Kind.DEVICE, grad=Tri.NO, device=cx.device_of(first), gpu_if=first.gpu_if)
    if qual in api.ACCELERATOR_DEVICE_FUNCTIONS:
        return Value(kind=Kind.DEVICE, grad=Tri.NO, device=Device.CUDA)
    if qual == "torch.clone":
        return first.but(roots=cx.new_root(node), fresh=True, leaf=False, via="", certain=True) if first.kind is Kind.TENSOR else UNKNOWN
    if qual.startswith("torch.") and short in api.VIEW_METHODS | api.MAYBE_VIEW_METHODS and first.kind is Kind.TENSOR:
        return first.but(via=first.via or "view", fresh=False, leaf=False, certain=first.certain and short not in api.MAYBE_VIEW_METHODS, origin=origin)
    if qual.startswith("torch.") and short in api.VIEW_TUPLE_METHODS and first.kind is Kind.TENSOR:
        return Value(kind=Kind.TUPLE, grad=Tri.NO, element=first.but(via=first.via or "view", fresh=False, leaf=False))
    if qual.count(".") == 1 and qual.startswith("torch.") and api.is_view_op(short):
        if first.kind is Kind.TENSOR:
            return first.but(via=first.via or "view", certain=False, fresh=False, leaf=False, origin=origin)
        return UNKNOWN if first.kind is not Kind.UNKNOWN else first.but(via=first.via or "view", certain=False, fresh=False)
    if qual.startswith("torch.nn.functional.") or (qual.count(".") == 1 and qual.startswith("torch.")):
        returns = api.function_returns(short) if qual.count(".") == 1 else "tensor"
        if qual.count(".") == 1 and reduces_along_dim(short, args[1] if len(args) > 1 else None, kwargs):
            returns = "tuple"  # `torch.max(x, 1)`: (values, indices)
        if returns == "tensor" or (returns == "tuple" and short in api.VIEW_TUPLE_METHODS):
            return _tensor_function(cx, node, short, args, kwargs)
        if returns == "tuple":
            element = _tensor_function(cx, node, short, args, kwargs).but(fresh=False)
            return Value(kind=Kind.TUPLE, grad=Tri.NO, element=element, roots=cx.new_root(node, "list"), fresh=True, items=pair_items(cx, node, short, element))
        return OTHER if returns == "other" else UNKNOWN
    if qual.startswith("numpy.random.") and short in api.NUMPY_RANDOM_SIZE_AT:
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if not any(a.keyword is not None and a.keyword.value == "size" for a in node.args) and len(positional) <= api.NUMPY_RANDOM_SIZE_AT[short]:
            return SCALAR  # one draw: a number
    if qual.startswith("numpy."):
        if short in ("asarray", "asanyarray") and first.kind in (Kind.TENSOR, Kind.NDARRAY):
            return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=first.roots, certain=False, via="numpy", device=Device.CPU)
        return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=cx.new_root(node, "np"), fresh=True) if short[:1].islower() else OTHER
    if all(q.startswith(api.NON_TORCH_LIBRARIES) for q in quals) or any(api.PREPROCESSOR_CLASS.match(q) for q in quals):
        return OTHER
    if qual.startswith(api.DATASET_LIBRARIES) and short[:1].isupper():
        return OTHER
    return UNKNOWN


# Factories whose result is int64 unless a dtype is given (`torch.arange` when its bounds are ints).
_INTEGER_FACTORIES = frozenset(("randperm", "randint", "tril_indices", "triu_indices"))
# Factories whose result always has a dimension.
_VECTOR_FACTORIES = frozenset(("arange", "randperm", "linspace", "logspace", "tril_indices", "triu_indices"))


def _whole_numbers(cx: Context, node: cst.Call, args: tuple[Value, ...], kwargs: dict[str, Value]) -> bool:
    """`torch.arange(T)` with every bound a Python int (a literal, `len(...)`, `x.size(0)`, a
    parameter annotated `int` or defaulting to one), which makes int64; a float bound makes
    float32."""
    given = [a for a in node.args if a.keyword is None]
    if not given or len(given) != len(args) or any(a.star for a in node.args):
        return False
    bounds = [*zip(given, args), *((a, kwargs[a.keyword.value]) for a in node.args if a.keyword is not None and a.keyword.value in ("start", "end", "step"))]
    for arg, value in bounds:
        if value.kind is Kind.SCALAR and value.dtype == "int64":
            continue
        if isinstance(arg.value, cst.Name) and arg.value.value in cx.integer_params and value.roots == frozenset((roots.argument(arg.value.value),)):
            continue
        return False
    return True


def _factory(cx: Context, node: cst.Call, qual: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    first = args[0] if args else UNKNOWN
    requires = keyword_is(node, "requires_grad", "True")
    device = cx.device_of(kwargs["device"]) if "device" in kwargs else Device.CPU
    dtype_val = kwargs.get("dtype")
    dtype = dtype_val.dtype if dtype_val is not None else None
    if qual.endswith("_like") and first.kind is Kind.TENSOR:
        device = first.device if "device" not in kwargs else device
        dtype = dtype or first.dtype
    elif dtype is None and last(qual) in _FLOAT_FACTORIES:
        dtype = "float32"
    elif dtype is None and (last(qual) in _INTEGER_FACTORIES or (last(qual) == "arange" and _whole_numbers(cx, node, args, kwargs))):
        dtype = "int64"
    if qual == "torch.tensor" and first.kind is Kind.TENSOR:
        device = first.device if "device" not in kwargs else device
        dtype = dtype or first.dtype
    placed = kwargs["device"] if "device" in kwargs else first if qual.endswith("_like") or qual == "torch.tensor" else None
    return Value(
        kind=Kind.TENSOR,
        grad=Tri.YES if requires else Tri.NO,
        leaf=requires,
        device=device,
        gpu_if=placed.gpu_if if placed is not None and device.may_be_gpu else "",
        dtype=dtype,
        roots=cx.new_root(node),
        fresh=True,
        origin=f"`{short_code(node)}`",
        line=cx.line(node),
        vector=last(qual) in _VECTOR_FACTORIES or (qual == "torch.tensor" and first.kind is Kind.LIST),
    )


def _sharing(cx: Context, node: cst.Call, qual: str, first: Value, kwargs: dict[str, Value]) -> Value:
    """`from_numpy`, `as_tensor`, `from_dlpack`: the same memory when nothing needs converting."""
    via = api.SHARING_FUNCTIONS[qual]
    origin = f"`{short_code(node)}`"
    if first.kind in (Kind.TENSOR, Kind.NDARRAY):
        certain = not (kwargs.get("dtype") or kwargs.get("device"))
        device = Device.CPU if first.kind is Kind.NDARRAY else first.device
        if kwargs.get("device") is not None:
            device = cx.device_of(kwargs["device"])
        return Value(kind=Kind.TENSOR, grad=first.grad if first.kind is Kind.TENSOR else Tri.NO, device=device, roots=first.roots, certain=certain, via=via, origin=origin)
    if qual == "torch.from_numpy" and first.kind is Kind.UNKNOWN and first.roots:
        return Value(kind=Kind.TENSOR, grad=Tri.NO, device=Device.CPU, roots=first.roots, via="from_numpy", origin=origin)
    # `torch.as_tensor(v)` of something that may itself be a tensor may hand `v` back, and
    # `torch.from_numpy(a)` always shares `a`'s memory: neither is a tensor nobody else holds.
    fresh = first.kind is not Kind.UNKNOWN and qual != "torch.from_numpy"
    return Value(kind=Kind.TENSOR, grad=Tri.NO, device=Device.CPU if qual == "torch.from_numpy" else Device.UNKNOWN, roots=cx.new_root(node), fresh=fresh)


def _construct(cx: Context, node: cst.Call, qual: str, short: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    origin = f"`{short_code(node)}`"
    if qual.startswith(api.SCHEDULER_PREFIXES):
        # A learning-rate scheduler: its `step()` sets the optimizer's rates, never a parameter.
        return Value(kind=Kind.OTHER, grad=Tri.NO, origin=origin)
    if qual.startswith("torch.optim."):
        target = args[0] if args else kwargs.get("params", UNKNOWN)
        owned = target.roots if target.kind in (Kind.PARAMETER_LIST, Kind.MODULE) else frozenset()
        # Its moment buffers are this object's own: another optimizer over the same parameters has others.
        state = frozenset(roots.optimizer_state(r) for r in cx.new_root(node, "opt"))
        return Value(kind=Kind.OPTIMIZER, grad=Tri.NO, roots=owned | state, fresh=True, origin=origin)
    has_params = Tri.NO if short in api.PARAMETERLESS_MODULES else Tri.YES if qual.startswith("torch.nn.") and short[:1].isupper() else Tri.MAYBE
    via = "inplace" if short in api.INPLACE_MODULES and keyword_is(node, "inplace", "True") else ""
    return Value(kind=Kind.MODULE, grad=Tri.NO, has_params=has_params, roots=cx.new_root(node, "params"), via=via, device=Device.CPU, fresh=True, op=short, origin=origin)


def _tensor_function(cx: Context, node: cst.Call, short: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    first = args[0] if args else UNKNOWN
    origin = f"`{short_code(node)}`"
    if short in api.INPLACE_FUNCTIONAL and keyword_is(node, "inplace", "True") and first.kind is Kind.TENSOR:
        cx.emit(Write, node, target=first, target_node=node.args[0].value, op=f"{short}(inplace=True)", source=None)
        return first
    out = kwargs.get("out")
    if out is not None and out.kind is Kind.TENSOR:
        out_node = next(a.value for a in node.args if a.keyword is not None and a.keyword.value == "out")
        cx.emit(Write, node, target=out, target_node=out_node, op="out=", source=None)
        return out
    if short in _JOINS and first.kind in (Kind.LIST, Kind.TUPLE):
        return cx.tensor(node, first.element or UNKNOWN, origin=origin)
    if short in api.SCALAR_METHODS:
        return SCALAR
    if short in api.INDEX_OPS or (short == "where" and len(node.args) == 1):
        # (`torch.where(cond)` alone is `cond.nonzero(as_tuple=True)`: int64 indices, not a choice between tensors)
        return index_result(cx, node, short, args, origin)
    saves = saves_of(cx, node, short, first, args[1] if len(args) > 1 else UNKNOWN)
    result = cx.tensor(node, *args, *kwargs.values(), origin=origin, saves=saves)
    if short in api.SAVES_OUTPUT and result.grad is not Tri.NO:
        result = cx.with_save(result, cx.save(result, node, f"`{short}`", result.attached))
    if short == "where" and len(args) == 3:
        # `torch.where(cond, x, y)` has the values' dtype, not the condition's bool
        chosen = {v.dtype for v in args[1:] if v.kind is Kind.TENSOR}
        result = result.but(dtype=chosen.pop() if len(chosen) == 1 else None)
    return result


def reduces_along_dim(name: str, dim: Value | None, kwargs: dict[str, Value]) -> bool:
    """`x.max(1)`, `torch.max(x, dim=1)`: a (values, indices) pair, where `x.max()` is one
    tensor and `x.max(y)` of a tensor `y` the elementwise maximum."""
    return name in api.PAIR_ALONG_DIM and ("dim" in kwargs or (dim is not None and dim.kind is Kind.SCALAR))


def pair_items(cx: Context, node: cst.Call, name: str, element: Value) -> tuple[Value, ...] | None:
    """`values, indices = x.topk(k)`: two new tensors, each with its own memory (the indices
    int64), when the op is one that returns such a pair; None for the others."""
    if name not in api.PAIR_RESULTS or element.kind is not Kind.TENSOR:
        return None
    second = element.but(roots=cx.new_root(node), fresh=False)
    if name in api.INDEX_PAIR_RESULTS:
        second = second.but(dtype="int64", grad=Tri.NO, graph=frozenset())  # indices hold no graph
    return (element.but(roots=cx.new_root(node), fresh=False), second)


def saves_of(cx: Context, node: cst.CSTNode, short: str, first: Value, second: Value) -> list[int | None]:
    """What autograd saves of the inputs of `short` (an op or method of that name)."""
    if cx.no_grad:
        return []
    saves = []
    if short in api.SAVES_INPUTS and first.kind is Kind.TENSOR and first.grad is not Tri.NO:
        saves.append(cx.save(first, node, f"`{short}`", first.attached))
    if short in api.SAVES_OTHER_OPERAND:
        if second.kind is Kind.TENSOR and second.grad is not Tri.NO:
            saves.append(cx.save(first, node, f"`{short}`", second.attached))
        if first.kind is Kind.TENSOR and first.grad is not Tri.NO:
            saves.append(cx.save(second, node, f"`{short}`", first.attached))
    return saves


def index_result(cx: Context, node: cst.Call, name: str, inputs: tuple[Value, ...], origin: str) -> Value:
    """What an index op gives (`argmax`, `nonzero`, `torch.where(cond)`): int64 indices, not
    attached; for `torch.where(cond)` and `nonzero(as_tuple=True)`, a tuple of them."""
    indices = cx.tensor(node, *inputs, grad=Tri.NO, origin=origin).but(dtype="int64")
    return index_tuple(indices) if name == "where" or (name == "nonzero" and keyword_is(node, "as_tuple", "True")) else indices
