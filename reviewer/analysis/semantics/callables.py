"""Calling a value rather than a known function: a module (`model(x)`, `self.fc(h)`), or a
builtin (`len`, `list`, `sum`, `zip`...)."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.context import Context
from review_copies.analysis.events import Write
from review_copies.analysis.semantics import api
from review_copies.analysis.semantics.containers import element_of
from review_copies.analysis.syntax import code_of, dotted, short_code
from review_copies.analysis.values import INTEGER, LOADER, NONE, SCALAR, UNKNOWN, Device, Kind, Tri, Value, gpu_flag

# How a value's origin begins when it is what another callable returned (a module call, the
# step before in a pipeline): rules quote such an origin to say why a name is a tensor.
OUTPUT_ORIGIN = "the output of"
_SCALAR_BUILTINS = frozenset(("float", "int", "bool", "len", "str", "repr", "print", "isinstance", "hasattr", "round", "abs"))


def call_value(cx: Context, node: cst.Call, func: cst.BaseExpression, callee: Value, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    name = func.value if isinstance(func, cst.Name) else ""
    first = args[0] if args else UNKNOWN
    if name == "cls" and callee.kind is Kind.MODULE:
        # `cls(...)` in a classmethod builds a new instance; it does not run the forward pass.
        return Value(kind=Kind.MODULE, grad=Tri.NO, has_params=callee.has_params, roots=cx.new_root(node, "params"), fresh=True, origin=f"`{short_code(node)}`")
    if callee.kind is Kind.MODULE or (callee.kind is Kind.UNKNOWN and dotted(func).startswith("self.") and cx.module_class):
        if args and all(a.kind is Kind.NDARRAY for a in args):
            return UNKNOWN  # `model(x_np.reshape(1, -1))`: a predict function over arrays, not a module's forward
        return call_module(cx, node, func, callee, args)
    if name == "iter" and first.op == LOADER:
        return first
    if name == "next" and first.op == LOADER and first.element is not None:
        return first.element  # `next(iter(loader))`: one batch
    if name and name not in cx.state and _a_numpy_helper(cx, name):
        return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=cx.new_root(node, "np"), origin=f"`{short_code(node)}`")
    if name in _SCALAR_BUILTINS and not (name == "abs" and first.kind is Kind.TENSOR):
        return NONE if name == "print" else INTEGER if name in ("len", "int") else SCALAR
    origin = f"`{short_code(node)}`"
    if name in ("list", "tuple", "sorted", "reversed") and args:
        element = first.element if first.element is not None else (first if first.kind is Kind.TENSOR else None)
        if first.kind is Kind.TENSOR:
            element = first.but(via=first.via or "view", fresh=False, leaf=False)
        kind = first.kind if first.kind in (Kind.PARAMETER_LIST,) else Kind.LIST if name != "tuple" else Kind.TUPLE
        return Value(kind=kind, grad=Tri.NO, element=element, roots=cx.new_root(node, "list"), fresh=True, via="shallow-copy", origin=origin)
    if name == "dict" and args:
        kind = Kind.STATE_DICT if first.kind is Kind.STATE_DICT else Kind.DICT
        return Value(kind=kind, grad=Tri.NO, element=first.element, roots=cx.new_root(node, "dict"), fresh=True, via="shallow-copy", origin=origin)
    if name == "enumerate" and args:
        return Value(kind=Kind.LIST, element=Value(kind=Kind.TUPLE, items=(SCALAR, first.element or element_of(first, node.args[0].value))))
    if name == "zip":
        return Value(kind=Kind.LIST, element=Value(kind=Kind.TUPLE, items=tuple(a.element or UNKNOWN for a in args)))
    if name == "range":
        return Value(kind=Kind.LIST, element=SCALAR)
    if name == "sum" and first.kind in (Kind.LIST, Kind.TUPLE) and first.element is not None and first.element.kind is Kind.TENSOR:
        return cx.tensor(node, first.element, origin=origin)
    if name in ("max", "min") and any(a.kind is Kind.TENSOR for a in args):
        return cx.tensor(node, *args)
    if name in cx.flow.params and callee.kind is Kind.UNKNOWN and first.device is Device.CUDA:
        # `C1(G(img.cuda()))` with the networks handed in: run on a GPU tensor, a network's
        # weights are on the GPU too, and what it hands back is (else the call raises).
        return UNKNOWN.but(device=Device.CUDA)
    return UNKNOWN


def call_module(cx: Context, node: cst.Call, func: cst.BaseExpression, callee: Value, args: tuple[Value, ...]) -> Value:
    """`module(x)`: attached when the module owns parameters (in grad mode); what it saves for
    backward joins the output's graph."""
    first = args[0] if args else UNKNOWN
    if callee.via == "inplace" and first.kind is Kind.TENSOR:
        cx.emit(Write, node, target=first, target_node=node.args[0].value, op=f"{code_of(func)}(...) with inplace=True", source=None)
        return first
    # A known module owns parameters unless it is one of the parameterless ones.
    has_params = (Tri.YES if callee.has_params is Tri.MAYBE else callee.has_params) if callee.kind is Kind.MODULE else Tri.MAYBE
    if has_params is Tri.NO:
        grad = cx.grad_of(*args)
    elif cx.no_grad:
        grad = Tri.NO
    elif callee.kind is Kind.MODULE and callee.params_grad is not Tri.YES:
        # Its parameters were frozen (`requires_grad_(False)`): attached only through its
        # input, or, when only a part was frozen, through the parts not seen either.
        grad = cx.grad_of(*args) if callee.params_grad is Tri.NO else cx.grad_of(*args).either(Tri.MAYBE)
    else:
        grad = Tri.YES if has_params is Tri.YES else cx.grad_of(*args).either(Tri.MAYBE)
    label = f"`{code_of(func)}`" + (f" ({callee.op})" if callee.op else "")
    for arg in node.args:
        if isinstance(arg.value, cst.Subscript) and dotted(arg.value.value):
            cx.tensor_containers.add(dotted(arg.value.value))
    saves = []
    if callee.op in api.MODULE_SAVES_INPUT and first.kind is Kind.TENSOR and not cx.no_grad:
        saves.append(cx.save(first, node, label, has_params is Tri.YES or first.attached))
    if has_params is Tri.YES and not cx.no_grad and callee.roots:
        # A module with parameters saves them for the gradient of its input.
        saves.append(cx.save(Value(kind=Kind.TENSOR, roots=callee.roots), node, f"{label}'s parameters", True))
    result = cx.tensor(node, *args, grad=grad, origin=f"{OUTPUT_ORIGIN} `{short_code(node)}`", saves=saves)
    if callee.op in api.MODULE_SAVES_OUTPUT and result.grad is not Tri.NO:
        result = cx.with_save(result, cx.save(result, node, label, result.attached))
    if not callee.device.may_be_gpu:
        return result
    return result.but(device=callee.device if callee.device is not Device.CPU or first.device is Device.UNKNOWN else first.device, gpu_if=gpu_flag(callee, first))


def _a_numpy_helper(cx: Context, name: str) -> bool:
    """Whether `name` is one of the file's own functions that hand back a NumPy array from
    every `return` (`def _to_numpy(t): return t.cpu().detach().numpy()`). Asked per name
    called, so only the functions called so are read, and only those that spell a conversion."""

    def compute() -> bool:
        lines = cx.file.statement_lines
        for stmt in cx.file.module.body:
            if not isinstance(stmt, cst.FunctionDef) or stmt.name.value != name:
                continue
            if lines is not None and stmt in lines:
                start, end = lines[stmt]
                if not any("numpy" in line or "array" in line for line in cx.file.lines[start - 1 : end]):
                    continue  # no `.numpy()`, `np.asarray`, `np.array` written anywhere in it
            finder = _Returns()
            stmt.body.visit(finder)
            if finder.values and all(_a_conversion(cx, v) for v in finder.values):
                return True
        return False

    return cx.file.once(("numpy helper", name), compute)


def _a_conversion(cx: Context, expr: cst.BaseExpression | None) -> bool:
    if not isinstance(expr, cst.Call):
        return False
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "numpy" and not expr.args:
        return True
    return any(q in ("numpy.asarray", "numpy.array") for q in cx.file.imports.resolve(dotted(expr.func), ()))


class _Returns(cst.CSTVisitor):
    """The values of a function's own `return`s (not those of functions or lambdas inside it)."""

    def __init__(self) -> None:
        self.values: list[cst.BaseExpression | None] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        self.values.append(node.value)
