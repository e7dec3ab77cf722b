"""Expression evaluation: the abstract value of each kind of expression node, dispatched by
node type (as pytype dispatches opcodes). Calls go to `analysis.semantics`."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context
from review_copies.analysis.events import Call, Use
from review_copies.analysis.narrowing import gpu_flag_test
from review_copies.analysis.semantics import api, callables, functions, methods
from review_copies.analysis.semantics.containers import element_of
from review_copies.analysis.semantics.modules import MODULE_METHODS
from review_copies.analysis.syntax import code_of, dotted, item_key, opt_in_arm, short_code
from review_copies.analysis.values import INTEGER, NONE, OTHER, SCALAR, UNKNOWN, Device, Kind, Tri, Value

_BUFFER_NAMES = frozenset(("running_mean", "running_var", "num_batches_tracked"))
_TENSOR_PROPERTIES = frozenset(("shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "is_cuda", "layout"))


def evaluate(cx: Context, node: cst.BaseExpression) -> Value:
    handler = _HANDLERS.get(type(node))
    return handler(cx, node) if handler is not None else UNKNOWN


def join_all(values: Iterable[Value]) -> Value:
    out: Value | None = None
    for v in values:
        out = v if out is None else out.join(v)
    return out or UNKNOWN


# ------------------------------------------------------------------ names


def _name(cx: Context, node: cst.Name) -> Value:
    if node.value in ("True", "False"):
        return SCALAR
    if node.value == "None":
        return NONE
    value = cx.state.get(node.value)
    if value is None:
        return OTHER if cx.file.imports.lookup(node.value, cx.scopes) else UNKNOWN
    cx.emit(Use, node, name=node.value, value=value)
    return value


def _attribute(cx: Context, node: cst.Attribute) -> Value:
    quals = cx.qualnames(node)
    if quals:
        return Value(kind=Kind.OTHER, grad=Tri.NO, dtype=api.DTYPE_CONSTANTS.get(quals[0]), origin=quals[0])
    key = dotted(node)
    attr = node.attr.value
    base = cx.ev(node.value)
    if key and key in cx.state:
        value = cx.state[key]
        cx.emit(Use, node, name=key, value=value)
        return value
    origin = f"`{code_of(node)}`"
    if base.kind is Kind.TENSOR or (base.kind is Kind.UNKNOWN and attr in ("data", "grad")):
        return _tensor_attribute(base, attr, origin)
    if base.kind is Kind.MODULE:
        owned = frozenset(roots.member(r, attr) for r in base.roots) or frozenset((key,))
        if attr in ("weight", "bias"):
            return Value(kind=Kind.TENSOR, grad=base.params_grad, leaf=True, device=base.device, roots=owned, origin=origin)
        if attr in _BUFFER_NAMES:
            return Value(kind=Kind.TENSOR, grad=Tri.NO, device=base.device, roots=owned, origin=origin)
        # A submodule or a tensor: unknown, but one identity, so aliases of it can be followed.
        return Value(kind=Kind.UNKNOWN, roots=owned)
    if base.kind is Kind.OPTIMIZER and attr == "param_groups":
        return Value(kind=Kind.LIST, element=Value(kind=Kind.DICT))
    if base.kind is Kind.TUPLE and attr in ("values", "indices") and base.items is not None and len(base.items) == 2:
        return base.items[0 if attr == "values" else 1]  # torch.max(dim=...) and friends return (values, indices)
    if base.kind is Kind.TUPLE and attr in ("values", "indices") and base.element is not None:
        return base.element
    if base.kind is Kind.UNKNOWN and attr in ("weight", "bias") and any(roots.is_parameters(r) for r in base.roots):
        # A submodule's parameter (model.embed.weight).
        return Value(kind=Kind.TENSOR, grad=Tri.YES, leaf=True, device=base.device, roots=frozenset(roots.member(r, attr) for r in base.roots), origin=origin)
    return UNKNOWN


def _tensor_attribute(base: Value, attr: str, origin: str) -> Value:
    if attr == "data":
        return base.but(kind=Kind.TENSOR, grad=Tri.NO, leaf=False, via="data", fresh=False, certain=True, origin=origin, unversioned=True)
    if attr in ("T", "mT", "H", "mH"):
        return base.but(via=base.via or "view", fresh=False, leaf=False, origin=origin)
    if attr == "grad":
        return Value(kind=Kind.TENSOR, grad=Tri.NO, device=base.device, dtype=base.dtype, roots=frozenset(roots.gradients(r) for r in base.roots), origin=origin)
    if attr in ("real", "imag"):
        return base.but(via=base.via or "view", fresh=False, leaf=False)
    if attr == "values":
        return base.but(fresh=False, leaf=False)
    if attr == "indices":
        return base.but(fresh=False, leaf=False, grad=Tri.NO, dtype="int64")
    return OTHER if attr in _TENSOR_PROPERTIES else UNKNOWN


# -------------------------------------------------------------- indexing


def _subscript(cx: Context, node: cst.Subscript) -> Value:
    base = cx.ev(node.value)
    narrowed = cx.state.get(item_key(node) or ".")
    if narrowed is not None and narrowed.kind is Kind.OTHER:
        return narrowed  # `if not isinstance(d[k], torch.Tensor):` holds here
    indexes = []
    for element in node.slice:
        if isinstance(element.slice, cst.Index):
            indexes.append(cx.ev(element.slice.value))
        else:
            for part in (element.slice.lower, element.slice.upper, element.slice.step):
                if part is not None:
                    cx.ev(part)
    single = node.slice[0].slice if len(node.slice) == 1 else None
    string_key = single.value if isinstance(single, cst.Index) and isinstance(single.value, cst.SimpleString) else None
    origin = f"`{code_of(node)}`"
    if base.kind is Kind.TENSOR and string_key is not None:
        return Value(kind=Kind.UNKNOWN, roots=frozenset(roots.entry(r, string_key.value) for r in base.roots))  # a mapping's entry
    if base.kind is Kind.TENSOR:
        kind = index_kind(node, indexes)
        if kind == "basic":
            # Slices alone keep every dimension: `torch.randperm(n)[:k]` is still a vector.
            sliced = all(isinstance(e.slice, cst.Slice) for e in node.slice)
            return base.but(via=base.via or "view", fresh=False, leaf=False, origin=origin, vector=base.vector and sliced)
        if kind == "maybe":
            # A view for an integer or a slice, a copy for a tensor index: whatever shares
            # memory then does so through the indexing, not through `base`'s own conversion.
            return base.but(via="index", certain=False, fresh=False, leaf=False, origin=origin)
        return cx.tensor(node, base, origin=origin)
    if base.kind in (Kind.STATE_DICT, Kind.PARAMETER_LIST, Kind.DICT, Kind.LIST, Kind.TUPLE):
        if base.items is not None and isinstance(single, cst.Index):
            index = single.value
            if isinstance(index, cst.Integer) and -len(base.items) <= int(index.evaluated_value) < len(base.items):
                # The container still holds it: an element read out is not new and unshared.
                return base.items[int(index.evaluated_value)].but(fresh=False, vector=base.items[int(index.evaluated_value)].vector)
        if base.element is not None and not isinstance(single, cst.Slice):
            if string_key is not None:
                return base.element.but(fresh=False, roots=frozenset(roots.keyed(r, string_key.value) for r in base.element.roots))
            return base.element.but(fresh=False, vector=base.element.vector)  # (`torch.where(m)[0]` is still 1-D)
        if isinstance(single, cst.Slice):
            return base.but(fresh=True, roots=cx.new_root(node, "list"), items=None)
    if base.kind is Kind.NDARRAY:
        if all(isinstance(e.slice, cst.Slice) for e in node.slice):
            return base.but(fresh=False, via=base.via or "view")
        if all(isinstance(e.slice, cst.Slice) or (isinstance(e.slice, cst.Index) and isinstance(e.slice.value, (cst.Name, cst.Integer))) for e in node.slice):
            # `images[i]`: a row of a stacked array is a view of it (a scalar only when the
            # array is 1-D, an index array copies): may be the same memory.
            return base.but(fresh=False, via=base.via or "view", certain=False)
        return UNKNOWN  # fancy indexing (a copy)
    if base.kind is Kind.UNKNOWN and base.roots and isinstance(single, cst.Index):
        key = single.value
        if isinstance(key, cst.SimpleString):
            # `batch["image"]`: one entry of a mapping, itself unknown (a tensor when its
            # siblings are fed to a module: a collated batch).
            kind = Kind.TENSOR if dotted(node.value) in cx.tensor_containers else Kind.UNKNOWN
            return Value(kind=kind, roots=frozenset(roots.entry(r, key.value) for r in base.roots), origin=origin)
        if isinstance(key, (cst.Name, cst.Integer)):
            return base.but(via=base.via or "view", certain=False, fresh=False, leaf=False, origin=origin)
    if base.kind is Kind.UNKNOWN and base.roots and index_kind(node, indexes) == "basic" and all(isinstance(e.slice, cst.Slice) for e in node.slice):
        # Slicing an unknown array-like: a view if it is a tensor or an ndarray (a list would copy,
        # but then no tensor method will ever write through it).
        return base.but(via=base.via or "view", fresh=False, leaf=False, origin=origin)
    return UNKNOWN


def index_kind(node: cst.Subscript, values: list[Value]) -> str:
    """basic (a view), advanced (a copy) or maybe: torch's indexing rules."""
    result = "basic"
    i = 0
    for element in node.slice:
        if isinstance(element.slice, cst.Slice):
            continue
        expr = element.slice.value
        value = values[i] if i < len(values) else UNKNOWN
        i += 1
        if isinstance(expr, (cst.Integer, cst.Ellipsis)) or (isinstance(expr, cst.Name) and expr.value == "None"):
            continue
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, cst.Integer):
            continue
        if isinstance(expr, (cst.List, cst.ListComp)) or value.kind in (Kind.LIST, Kind.NDARRAY):
            return "advanced"
        if value.kind is Kind.TENSOR:
            if value.dtype == "bool" or value.vector or _index_array(expr):
                return "advanced"
            result = "maybe"  # a 0-d integer tensor indexes like an integer: a view
            continue
        if value.kind is Kind.SCALAR:
            continue
        result = "maybe"
    return result


# Calls whose tensor result has at least one dimension: as an index, always advanced.
_INDEX_ARRAY_CALLS = frozenset(("arange", "randperm", "nonzero", "argwhere", "argsort"))


def _index_array(expr: cst.BaseExpression) -> bool:
    """`x[torch.arange(n), labels]`: an index made by `arange` (or `randperm`, `nonzero`...)
    is 1-D or more, so the indexing copies (a 0-d integer tensor alone would index like an
    integer and give a view)."""
    return isinstance(expr, cst.Call) and dotted(expr.func).rpartition(".")[2] in _INDEX_ARRAY_CALLS


# ------------------------------------------------------------- operators


def _binary(cx: Context, node: cst.BinaryOperation) -> Value:
    left, right = cx.ev(node.left), cx.ev(node.right)
    if left.kind in (Kind.LIST, Kind.TUPLE) and isinstance(node.operator, cst.Multiply) and right.kind is not Kind.NDARRAY:
        # `[False] * lengths[i]`: Python repeats the sequence (an integer tensor is an index)
        return Value(kind=left.kind, element=left.element, roots=cx.new_root(node, "list"), fresh=True)
    if Kind.TENSOR in (left.kind, right.kind):
        op = code_of(node.operator).strip()
        saves: list[int | None] = []
        if op in ("*", "/", "@"):
            # Each operand is saved for the gradient of the other.
            if right.attached or (right.grad is Tri.MAYBE and right.kind is Kind.TENSOR):
                saves.append(cx.save(left, node, f"`{op}`", right.attached))
            if left.attached or (left.grad is Tri.MAYBE and left.kind is Kind.TENSOR):
                saves.append(cx.save(right, node, f"`{op}`", left.attached))
        elif op == "**" and left.kind is Kind.TENSOR and left.grad is not Tri.NO:
            saves.append(cx.save(left, node, "`**`", left.attached))
        out = cx.tensor(node, left, right, origin=f"`{code_of(node)}`", saves=saves)
        return out.but(dtype=_promoted(out.dtype, op, node))
    if Kind.NDARRAY in (left.kind, right.kind):
        return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=cx.new_root(node, "np"), fresh=True)
    if left.kind is Kind.SCALAR and right.kind is Kind.SCALAR:
        whole = left.dtype == right.dtype == "int64" and isinstance(node.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo))
        return INTEGER if whole else SCALAR
    if left.kind is Kind.LIST and right.kind is Kind.LIST:
        return Value(kind=Kind.LIST, element=(left.element or UNKNOWN).join(right.element or UNKNOWN), roots=cx.new_root(node, "list"), fresh=True)
    return UNKNOWN


_INTEGRAL = frozenset(("bool", "uint8", "int8", "int16", "int32", "int64"))


def _promoted(dtype: str | None, op: str, node: cst.BinaryOperation) -> str | None:
    """The dtype of arithmetic on a tensor of `dtype`, as PyTorch promotes it: true division
    of an integer or boolean tensor gives floats, a float literal makes floats of integers,
    and arithmetic on booleans with an integer literal gives int64 (`(x != 0) * 1`); None
    where the result's dtype depends on what is not known here."""
    if dtype not in _INTEGRAL or op in ("&", "|", "^", "<<", ">>"):
        return dtype
    literals = [n for n in (node.left, node.right) if isinstance(n, (cst.Integer, cst.Float))]
    if op == "/" or any(isinstance(n, cst.Float) for n in literals):
        return None
    if dtype == "bool":
        return "int64" if literals else None
    return dtype


def _unary(cx: Context, node: cst.UnaryOperation) -> Value:
    value = cx.ev(node.expression)
    if isinstance(node.operator, cst.Not):
        return SCALAR
    if value.kind is Kind.TENSOR:
        return cx.tensor(node, value, origin=code_of(node))
    return value if value.kind is Kind.SCALAR else UNKNOWN


def _comparison(cx: Context, node: cst.Comparison) -> Value:
    values = [cx.ev(node.left)] + [cx.ev(c.comparator) for c in node.comparisons]
    if any(v.kind is Kind.TENSOR for v in values):
        return cx.tensor(node, *values, grad=Tri.NO, origin=code_of(node)).but(dtype="bool")
    return SCALAR


def _boolean(cx: Context, node: cst.BooleanOperation) -> Value:
    return cx.ev(node.left).join(cx.ev(node.right))


def _conditional(cx: Context, node: cst.IfExp) -> Value:
    cx.ev(node.test)
    before = dict(cx.state)
    when_true, when_false = cx.narrowing(node.test)
    cx.state.update(when_true)
    flagged = opt_in_arm(node.test)
    cx.opted_in += flagged == 0
    body = cx.ev(node.body)
    cx.opted_in -= flagged == 0
    cx.state = {**before, **when_false}
    cx.opted_in += flagged == 1
    orelse = cx.ev(node.orelse)
    cx.opted_in -= flagged == 1
    cx.state = before
    joined = body.join(orelse)
    negated = isinstance(node.test, cst.UnaryOperation) and isinstance(node.test.operator, cst.Not)
    flag = gpu_flag_test(node.test.expression if negated else node.test)
    on_gpu, on_cpu = (orelse, body) if negated else (body, orelse)
    if flag and on_gpu.device is Device.CUDA and on_cpu.device is Device.CPU:
        # `"cuda" if is_cuda else "cpu"` (or `"cpu" if not is_cuda else "cuda"`): a GPU exactly
        # when the flag holds, so under `if is_cuda: ... else:` the tensors put there are on
        # the CPU in the `else` arm. `"cuda" if not cpu_only else "cpu"` is a GPU when the flag
        # fails: no flag to narrow by.
        return joined.but(gpu_if=flag)
    return joined


# ------------------------------------------------------------- literals


def _sequence(cx: Context, node: cst.Tuple | cst.List | cst.Set) -> Value:
    items = tuple(cx.ev(el.value) for el in node.elements)
    kind = Kind.TUPLE if isinstance(node, cst.Tuple) else Kind.LIST
    element = join_all(items) if items else None
    return Value(kind=kind, grad=Tri.NO, items=items, element=element, roots=cx.new_root(node, "list"), fresh=True)


def _dict(cx: Context, node: cst.Dict) -> Value:
    values = []
    for el in node.elements:
        if isinstance(el, cst.DictElement):
            cx.ev(el.key)
            values.append(cx.ev(el.value))
        else:
            values.append(cx.ev(el.value).element or UNKNOWN)
    return Value(kind=Kind.DICT, grad=Tri.NO, element=join_all(values) if values else None, roots=cx.new_root(node, "dict"), fresh=True)


def _comprehension(cx: Context, node: cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp) -> Value:
    outer = dict(cx.state)
    for_in: cst.CompFor | None = node.for_in
    while for_in is not None:
        iterable = cx.ev(for_in.iter)
        cx.assign(for_in.target, element_of(iterable, for_in.iter), None)
        for cond in for_in.ifs:
            cx.ev(cond.test)
        for_in = for_in.inner_for_in
    if isinstance(node, cst.DictComp):
        cx.ev(node.key)
        element = cx.ev(node.value)
        if element.fresh:
            # A new tensor made for each key: `d["t"]` and `d["valid"]` are different memory.
            element = element.but(roots=frozenset(roots.each(r) for r in element.roots))
        kind = Kind.DICT
    else:
        element = cx.ev(node.elt)
        kind = Kind.LIST
    cx.state = outer
    return Value(kind=kind, grad=Tri.NO, element=element.but(fresh=False), roots=cx.new_root(node, "list"), fresh=True)


def _string(cx: Context, node: cst.BaseExpression) -> Value:
    text = node.evaluated_value if isinstance(node, cst.SimpleString) else None
    if isinstance(text, str):
        low = text.lower()
        if low == "cpu":
            return Value(kind=Kind.DEVICE, grad=Tri.NO, device=Device.CPU)
        if low.startswith("cuda") or low.split(":")[0] in api.ACCELERATOR_DEVICE_STRINGS:
            return Value(kind=Kind.DEVICE, grad=Tri.NO, device=Device.CUDA)
    return OTHER


def _named(cx: Context, node: cst.NamedExpr) -> Value:
    value = cx.ev(node.value)
    cx.assign(node.target, value, node.value)
    return value


def _yield(cx: Context, node: cst.Yield) -> Value:
    value = node.value
    if isinstance(value, cst.From):
        cx.ev(value.item)
    elif value is not None:
        cx.ev(value)
    return UNKNOWN


# ----------------------------------------------------------------- calls


def _call(cx: Context, node: cst.Call) -> Value:
    """Evaluate the callee and the arguments, then ask the semantics what the call gives:
    a function known through the imports, a method of a value, or a value called."""
    func = node.func
    quals = cx.qualnames(func)
    receiver: Value | None = None
    method: str | None = None
    callee = UNKNOWN
    if not quals:
        if isinstance(func, cst.Attribute) and not _calls_attribute_value(cx, func):
            method = func.attr.value
            receiver = cx.ev(func.value)
        else:
            callee = cx.ev(func)
    args = tuple(cx.ev(a.value) for a in node.args if a.keyword is None and not a.star)
    for a in node.args:
        if a.star:
            cx.ev(a.value)
    kwargs = tuple((a.keyword.value, cx.ev(a.value)) for a in node.args if a.keyword is not None)
    if quals:
        result = functions.call_function(cx, node, quals, args, dict(kwargs))
    elif method is not None and receiver is not None:
        result = methods.call_method(cx, node, receiver, method, args, dict(kwargs))
    else:
        result = callables.call_value(cx, node, func, callee, args, dict(kwargs))
    if not result.origin and result.kind is not Kind.UNKNOWN:
        result = result.but(origin=f"`{short_code(node)}`", vector=result.vector)
    receiver_node = func.value if isinstance(func, cst.Attribute) and method else None
    cx.emit(Call, node, qualnames=quals, method=method, receiver=receiver, receiver_node=receiver_node, args=args, kwargs=kwargs, result=result)
    return result


def _calls_attribute_value(cx: Context, func: cst.Attribute) -> bool:
    """`self.fc(x)` calls the submodule held in `self.fc`, not a method named fc."""
    key = dotted(func)
    if key and key in cx.state:
        return True
    attr = func.attr.value
    direct = key.count(".") == 1
    return direct and key.startswith("self.") and cx.module_class and attr not in MODULE_METHODS and attr not in cx.class_methods


_HANDLERS: dict[type, Callable[[Context, cst.BaseExpression], Value]] = {
    cst.Name: _name,
    cst.Attribute: _attribute,
    cst.Call: _call,
    cst.Subscript: _subscript,
    cst.BinaryOperation: _binary,
    cst.UnaryOperation: _unary,
    cst.Comparison: _comparison,
    cst.BooleanOperation: _boolean,
    cst.IfExp: _conditional,
    cst.Tuple: _sequence,
    cst.List: _sequence,
    cst.Set: _sequence,
    cst.Dict: _dict,
    cst.ListComp: _comprehension,
    cst.SetComp: _comprehension,
    cst.GeneratorExp: _comprehension,
    cst.DictComp: _comprehension,
    cst.Integer: lambda cx, node: INTEGER,
    cst.Float: lambda cx, node: SCALAR,
    cst.Imaginary: lambda cx, node: SCALAR,
    cst.SimpleString: _string,
    cst.ConcatenatedString: _string,
    cst.FormattedString: _string,
    cst.NamedExpr: _named,
    cst.Await: lambda cx, node: cx.ev(node.expression),
    cst.Yield: _yield,
    cst.Lambda: lambda cx, node: OTHER,
    cst.StarredElement: lambda cx, node: cx.ev(node.value),
}  # type: ignore[dict-item]
