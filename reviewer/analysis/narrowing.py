"""What a branch's test says about a name in each arm: `isinstance(x, torch.Tensor)`,
`torch.is_tensor(x)`, `type(x) is nn.ReLU`, combined with `not` and `and`."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context, State
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import dotted, last
from review_copies.analysis.values import UNKNOWN, Kind, Tri

_TENSOR_TYPES = frozenset(("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "Tensor"))


def narrow(cx: Context, test: cst.BaseExpression) -> tuple[State, State]:
    """(what holds when the test is true, what holds when it is false), as state updates."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        when_true, when_false = narrow(cx, test.expression)
        return when_false, when_true
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left, _ = narrow(cx, test.left)
        right, _ = narrow(cx, test.right)
        return {**left, **right}, {}
    subject, kinds = type_test(test)
    key = dotted(subject) if subject is not None else ""
    if not key or not kinds:
        return {}, {}
    current = cx.state.get(key, UNKNOWN)
    quals = [q for node in kinds for q in (cx.qualnames(node) or (dotted(node),))]
    if any(q in _TENSOR_TYPES for q in quals):
        as_tensor = current if current.kind is Kind.TENSOR else current.but(kind=Kind.TENSOR, roots=current.roots or frozenset((roots.argument(key),)))
        return {key: as_tensor}, {key: current.but(kind=Kind.OTHER, grad=Tri.NO) if current.kind in (Kind.TENSOR, Kind.UNKNOWN) else current}
    if quals and all(q.startswith("torch.nn.") and last(q)[:1].isupper() for q in quals):
        has_params = Tri.NO if all(last(q) in api.PARAMETERLESS_MODULES for q in quals) else Tri.YES
        owned = current.roots or frozenset((roots.parameters(key),))
        return {key: current.but(kind=Kind.MODULE, grad=Tri.NO, has_params=has_params, roots=owned)}, {}
    return {key: current.but(kind=Kind.OTHER, grad=Tri.NO)}, {}


def type_test(test: cst.BaseExpression) -> tuple[cst.BaseExpression | None, list[cst.BaseExpression]]:
    """`isinstance(x, T)` / `isinstance(x, (A, B))` / `type(x) is T` -> (x, [types])."""
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
