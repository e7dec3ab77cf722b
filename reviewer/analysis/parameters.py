"""What a function's parameters hold when it starts: from the annotation, the default, how
the body uses them (`analysis.guesses`), `forward`'s first input, or the pipeline that
calls it. A parameter nothing says anything about is unknown."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context
from review_copies.analysis.facts import is_local_module_class
from review_copies.analysis.guesses import SCALAR_NAME, UsageEvidence, usage_evidence
from review_copies.analysis.syntax import dotted, last
from review_copies.analysis.values import Kind, Tri, Value

_TENSOR_ANNOTATIONS = frozenset(("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "Tensor", "torch.FloatTensor"))
_MODULE_ANNOTATIONS = frozenset(("torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module"))
_CONTAINER_ANNOTATIONS = frozenset(("list", "List", "tuple", "Tuple", "dict", "Dict", "Sequence", "Iterable", "Mapping"))


def bind(cx: Context, fn: cst.FunctionDef) -> None:
    """Bind every parameter of `fn` in the context's state (and in its flow's `params`)."""
    start, end = cx.file.span(fn)
    text = "\n".join(cx.file.lines[start - 1 : end])
    params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
    # What the caller passed is read off the uses before a parameter is rebound.
    evidence = usage_evidence(text, frozenset(p.name.value for p in params))
    cx.backward_names = frozenset(evidence.backward)
    for star in (fn.params.star_arg, fn.params.star_kwarg):
        if isinstance(star, cst.Param):
            cx.state[star.name.value] = Value(kind=Kind.TUPLE if star is fn.params.star_arg else Kind.DICT, roots=frozenset((roots.argument(star.name.value),)))
    cx.scalar_defaults = frozenset(p.name.value for p in params if isinstance(p.default, (cst.Integer, cst.Float, cst.UnaryOperation)))
    for index, param in enumerate(params):
        name = param.name.value
        if index == 0 and name in ("self", "cls") and cx.scope is not None and cx.scope.kind == "method":
            cx.state[name] = Value(kind=Kind.MODULE if cx.module_class else Kind.OTHER, grad=Tri.NO, has_params=Tri.MAYBE, roots=frozenset((roots.SELF,)))
            continue
        value = _value(cx, param, evidence)
        cx.state[name] = value
        cx.flow.params[name] = value


def is_scalar(cx: Context, name: str) -> bool:
    """A parameter with a number default or a numeric-sounding name (lr, eps, total...)."""
    return bool(SCALAR_NAME.search(name)) or name in cx.scalar_defaults


def _value(cx: Context, param: cst.Param, evidence: UsageEvidence) -> Value:
    name = param.name.value
    own = frozenset((roots.argument(name),))
    kind = Kind.UNKNOWN
    if param.annotation is not None:
        kind = annotation_kind(cx, param.annotation.annotation)
    if kind is Kind.UNKNOWN and param.default is not None:
        default = cx.ev(param.default)
        if default.kind in (Kind.SCALAR, Kind.NONE, Kind.OTHER):
            kind = Kind.OTHER if default.kind is Kind.OTHER else Kind.UNKNOWN
    if kind is Kind.UNKNOWN:
        kind = evidence.kind_of(name)
    if kind is Kind.UNKNOWN and param.default is None and cx.in_forward and _first_input(cx, param):
        kind = Kind.TENSOR  # nn.Module.forward(self, x): x is the input tensor
    handed = _pipeline_input(cx, param) if kind is Kind.UNKNOWN and param.default is None else None
    if handed is not None:
        return Value(kind=Kind.TENSOR, grad=Tri.MAYBE, roots=own, origin=handed)
    origin = f"argument `{name}`"
    if kind is Kind.TENSOR:
        return Value(kind=Kind.TENSOR, grad=Tri.YES if name in cx.backward_names else Tri.MAYBE, roots=own, origin=origin)
    if kind is Kind.MODULE:
        return Value(kind=Kind.MODULE, grad=Tri.NO, has_params=Tri.MAYBE, roots=frozenset((roots.parameters(name),)), origin=origin)
    if kind is Kind.OPTIMIZER:
        return Value(kind=Kind.OPTIMIZER, grad=Tri.NO, roots=frozenset((roots.unknown_optimizer(name),)), origin=origin)
    return Value(kind=kind, roots=own, origin=origin)


def _first_input(cx: Context, param: cst.Param) -> bool:
    """Is `param` the first positional parameter after `self`?"""
    assert cx.scope is not None and isinstance(cx.scope.node, cst.FunctionDef)
    positional = list(cx.scope.node.params.params)
    return len(positional) > 1 and positional[1] is param


def _pipeline_input(cx: Context, param: cst.Param) -> str | None:
    """Why the input of a pipeline step's `__call__` is a tensor, if the step before it in a
    pipeline of this file returns one."""
    scope = cx.scope
    if scope is None or scope.kind != "method" or scope.name != "__call__" or scope.class_node is None or not _first_input(cx, param):
        return None
    return cx.facts.pipeline_input(scope.class_node.name.value)


def annotation_kind(cx: Context, ann: cst.BaseExpression) -> Kind:
    if isinstance(ann, cst.Subscript):
        head = last(dotted(ann.value))
        inner = [el.slice.value for el in ann.slice if isinstance(el.slice, cst.Index)]
        if head == "Optional" and len(inner) == 1:
            return annotation_kind(cx, inner[0])
        if head == "Union":
            return _union([annotation_kind(cx, x) for x in inner])
        return Kind.OTHER if head in _CONTAINER_ANNOTATIONS else Kind.UNKNOWN
    if isinstance(ann, cst.BinaryOperation):  # Tensor | None
        return _union([annotation_kind(cx, ann.left), annotation_kind(cx, ann.right)])
    if isinstance(ann, cst.Name) and ann.value == "None":
        return Kind.NONE
    quals = cx.qualnames(ann) or ((dotted(ann),) if isinstance(ann, (cst.Name, cst.Attribute)) else ())
    if isinstance(ann, cst.SimpleString):
        quals = (ann.evaluated_value,) if isinstance(ann.evaluated_value, str) else ()
    for q in quals:
        if q in _TENSOR_ANNOTATIONS:
            return Kind.TENSOR
        if q in _MODULE_ANNOTATIONS or (q.startswith("torch.nn.") and last(q)[:1].isupper()):
            return Kind.MODULE
        if q.startswith("torch.optim.") or q.endswith("Optimizer"):
            return Kind.OPTIMIZER
        if q in ("int", "float", "bool", "str", "bytes", "complex"):
            return Kind.OTHER
        if q in ("numpy.ndarray", "np.ndarray"):
            return Kind.NDARRAY
        if is_local_module_class(cx.file, q):
            return Kind.MODULE
    return Kind.UNKNOWN


def _union(kinds: list[Kind]) -> Kind:
    """Tensor | None is a tensor (when given); Tensor | list[int] is unknown."""
    real = {k for k in kinds if k is not Kind.NONE}
    return real.pop() if len(real) == 1 else Kind.UNKNOWN
