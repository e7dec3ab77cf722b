"""What a branch's test says about a name in each arm: `isinstance(x, torch.Tensor)`,
`torch.is_tensor(x)`, `type(x) is nn.ReLU`, combined with `not` and `and`, or a name bound to
one of them; and where the tensors are: `device == "cpu"`, `x.device.type == "cpu"`,
`x.is_cpu`."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context, State
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of, dotted, item_key, last
from review_copies.analysis.values import UNKNOWN, Device, Kind, Tri, Value

_TENSOR_TYPES = frozenset(("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "Tensor"))


def narrow(cx: Context, test: cst.BaseExpression) -> tuple[State, State]:
    """(what holds when the test is true, what holds when it is false), as state updates."""
    when_true, when_false = _narrow(cx, test)
    negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
    flag = gpu_flag_test(test.expression if isinstance(test, cst.UnaryOperation) and negated else test)
    if flag:
        # Where the flag fails, what was moved to a GPU under it was never moved.
        unmoved = {k: v.but(device=Device.UNKNOWN, gpu_if="") for k, v in cx.state.items() if v.gpu_if == flag and v.device.may_be_gpu}
        when_true, when_false = ({**when_true, **unmoved}, when_false) if negated else (when_true, {**when_false, **unmoved})
    return when_true, when_false


def gpu_flag_test(test: cst.BaseExpression) -> str:
    """The code of a test that can choose the device and reads the same each time it is
    asked: a flag (`use_gpu`, `self.args.cuda`) or `torch.cuda.is_available()`."""
    if isinstance(test, (cst.Name, cst.Attribute)):
        return "" if isinstance(test, cst.Name) and test.value in ("True", "False", "None") else dotted(test)
    if isinstance(test, cst.Call) and not test.args and dotted(test.func) == "torch.cuda.is_available":
        return "torch.cuda.is_available()"
    return ""


def _narrow(cx: Context, test: cst.BaseExpression) -> tuple[State, State]:
    cpu_when = cpu_test(cx, test)
    if cpu_when is not None:
        # `if self.device == CPU: x = x.numpy()`: the author checked where the tensors went; a
        # tensor moved to a device chosen at run time is taken to be on the CPU in that arm.
        on_cpu = {k: v.but(device=Device.CPU) for k, v in cx.state.items() if v.device is Device.MAYBE_CUDA}
        return (on_cpu, {}) if cpu_when else ({}, on_cpu)
    if isinstance(test, cst.Name) and test.value in cx.type_tests:
        return narrow(cx, cx.type_tests[test.value])
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        when_true, when_false = narrow(cx, test.expression)
        return when_false, when_true
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left, _ = narrow(cx, test.left)
        right, _ = narrow(cx, test.right)
        return {**left, **right}, {}
    differs = dtype_test(cx, test)
    if differs is not None:
        key, dtype, when = differs
        current = cx.state.get(key)
        if current is None:
            return {}, {}
        other = {key: current.but(not_dtype=dtype)}
        return (other, {}) if when else ({}, other)
    subject, kinds = type_test(test)
    entry = item_key(subject) if subject is not None else ""
    if entry and kinds:
        return _narrow_item(cx, entry, kinds)
    key = dotted(subject) if subject is not None else ""
    if not key or not kinds:
        return {}, {}
    current = cx.state.get(key, UNKNOWN)
    quals = _type_names(cx, kinds)
    if any(q in _TENSOR_TYPES for q in quals):
        # Not a tensor, so on no device: `if torch.is_tensor(t): t = float(t.cpu())` leaves a
        # number in both arms, whatever device the tensor it might have been was on.
        not_tensor = {key: current.but(kind=Kind.OTHER, grad=Tri.NO, device=Device.UNKNOWN, gpu_if="") if current.kind in (Kind.TENSOR, Kind.UNKNOWN) else current}
        if not all(q in _TENSOR_TYPES for q in quals):
            return {}, not_tensor  # `isinstance(w, (Tensor, list))`: a tensor or a list in the true arm
        as_tensor = current if current.kind is Kind.TENSOR else current.but(kind=Kind.TENSOR, roots=current.roots or frozenset((roots.argument(key),)))
        return {key: as_tensor}, not_tensor
    if quals and all(q.startswith("torch.nn.") and last(q)[:1].isupper() for q in quals):
        has_params = Tri.NO if all(last(q) in api.PARAMETERLESS_MODULES for q in quals) else Tri.YES
        owned = current.roots or frozenset((roots.parameters(key),))
        return {key: current.but(kind=Kind.MODULE, grad=Tri.NO, has_params=has_params, roots=owned)}, {}
    return {key: current.but(kind=Kind.OTHER, grad=Tri.NO)}, {}


def _narrow_item(cx: Context, key: str, kinds: list[cst.BaseExpression]) -> tuple[State, State]:
    """`isinstance(d[k], torch.Tensor)`: where it fails, the entry is not a tensor (SplaTAM
    converts with `torch.tensor(d[k])` only there). Where it holds nothing new is said: an
    entry has no identity of its own to give it."""
    quals = _type_names(cx, kinds)
    if not quals or not all(q in _TENSOR_TYPES for q in quals):
        return {}, {}
    return {key: UNKNOWN}, {key: Value(kind=Kind.OTHER, grad=Tri.NO)}


def _type_names(cx: Context, kinds: list[cst.BaseExpression]) -> list[str]:
    """The qualified names of the types a test names (`torch.Tensor` for `Tensor`)."""
    return [q for node in kinds for q in (cx.qualnames(node) or (dotted(node),))]


def dtype_test(cx: Context, test: cst.BaseExpression) -> tuple[str, str, bool] | None:
    """`x.dtype != D` (or `is not`): (x, D, True): in the true arm x is not of dtype D;
    `x.dtype == D`: (x, D, False), the same in the false arm. D is the dtype's name when it is
    a torch dtype, else the code it is spelled with (`target_dtype`)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    operator = test.comparisons[0].operator
    sides = (test.left, test.comparisons[0].comparator)
    for subject, dtype in (sides, sides[::-1]):
        if isinstance(subject, cst.Attribute) and subject.attr.value == "dtype" and dotted(subject.value):
            known = next((api.DTYPE_CONSTANTS[q] for q in cx.qualnames(dtype) if q in api.DTYPE_CONSTANTS), None)
            spelled = known or code_of(dtype)
            if isinstance(operator, (cst.NotEqual, cst.IsNot)):
                return dotted(subject.value), spelled, True
            if isinstance(operator, (cst.Equal, cst.Is)):
                return dotted(subject.value), spelled, False
    return None


def type_test(test: cst.BaseExpression) -> tuple[cst.BaseExpression | None, list[cst.BaseExpression]]:
    """`isinstance(x, T)` / `isinstance(x, (A, B))` / `type(x) is T` -> (x, [types]); under a
    `not` too (`is_scalar = not isinstance(x, torch.Tensor)`: `narrow` swaps the arms)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return type_test(test.expression)
    if isinstance(test, cst.Call) and dotted(test.func) in ("torch.is_tensor", "is_tensor") and len(test.args) == 1:
        return test.args[0].value, [cst.Attribute(value=cst.Name("torch"), attr=cst.Name("Tensor"))]
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance" and len(test.args) == 2:
        types = test.args[1].value
        if isinstance(types, cst.Tuple):
            return test.args[0].value, [el.value for el in types.elements]
        return test.args[0].value, [types]
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, (cst.Is, cst.Equal)):
        left = test.left
        if isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "type" and len(left.args) == 1:
            return left.args[0].value, [test.comparisons[0].comparator]
    return None, []


def cpu_test(cx: Context, test: cst.BaseExpression) -> bool | None:
    """True when the test holds only on the CPU, False when it fails only there, None when it
    says nothing of the device: `device == "cpu"`, `x.device.type != "cpu"`,
    `self.device == CPU_DEVICE` (a module constant `torch.device("cpu")`), `x.is_cpu`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = cpu_test(cx, test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.Attribute) and test.attr.value == "is_cpu":
        return True
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    operator = test.comparisons[0].operator
    if not isinstance(operator, (cst.Equal, cst.NotEqual, cst.Is, cst.IsNot)):
        return None
    left, right = test.left, test.comparisons[0].comparator
    for device, literal in ((left, right), (right, left)):
        if "device" in _code(device) and _cpu_literal(cx, literal):
            return isinstance(operator, (cst.Equal, cst.Is))
    return None


def _cpu_literal(cx: Context, node: cst.BaseExpression, follow: bool = True) -> bool:
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value == "cpu"
    if isinstance(node, cst.Call) and dotted(node.func) in ("torch.device", "device") and node.args:
        return _cpu_literal(cx, node.args[0].value, follow=False)
    if follow and isinstance(node, cst.Name):
        bound = cx.file.module_assignments().get(node.value)
        return bound is not None and _cpu_literal(cx, bound[-1], follow=False)
    return False


def _code(node: cst.BaseExpression) -> str:
    """`str(x.device)` and the like: the names in the expression, for the "device" check."""
    if isinstance(node, cst.Call) and node.args:
        return " ".join(filter(None, (dotted(node.func), *(dotted(a.value) for a in node.args))))
    return dotted(node) or ""
