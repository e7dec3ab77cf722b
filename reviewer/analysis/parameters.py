"""What a function's parameters hold when it starts: from the annotation, the default, how
the body uses them (`analysis.guesses`), `forward`'s first input, or the pipeline that
calls it. A parameter nothing says anything about is unknown."""

from __future__ import annotations

import re
from dataclasses import replace

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context
from review_copies.analysis.events import FunctionFlow
from review_copies.analysis.facts import is_local_module_class
from review_copies.analysis.guesses import COMMENT, SCALAR_NAME, UsageEvidence, usage_evidence
from review_copies.analysis.parse import LOOKALIKE_FRAMEWORKS, imported_packages
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of, dotted, last
from review_copies.analysis.values import Kind, Tri, Value, a_loader

# (`tags: torch.LongTensor`: the legacy typed classes annotate tensors too.)
_TENSOR_ANNOTATIONS = frozenset(("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "Tensor")) | api.LEGACY_CONSTRUCTORS
_MODULE_ANNOTATIONS = frozenset(("torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module"))
# Methods of dicts and lists that no tensor has.
_CONTAINER_ONLY_METHODS = frozenset(("keys", "items", "get", "setdefault", "popitem", "append", "extend", "insert"))
_CONTAINER_ANNOTATIONS = frozenset(("list", "List", "tuple", "Tuple", "dict", "Dict", "Sequence", "Iterable", "Mapping"))
# `model: Callable`: a function the caller hands over (a predict wrapper under `no_grad` as often
# as a module), whatever the parameter's name says; what it returns is not known.
_CALLABLE_ANNOTATIONS = frozenset(("typing.Callable", "collections.abc.Callable", "Callable"))


def bind(cx: Context, fn: cst.FunctionDef) -> None:
    """Bind every parameter of `fn` in the context's state (and in its flow's `params`)."""
    start, end = cx.file.span(fn)
    text = "\n".join(cx.file.lines[start - 1 : end])
    params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
    # What the caller passed is read off the uses before a parameter is rebound.
    names = frozenset(p.name.value for p in params)
    evidence = usage_evidence(text, names)
    split = _kind_split_arms(cx, fn, start, names) if _CONSTRUCTS.search(text) and "else" in text else {}
    if split:
        evidence = _without_arms(evidence, text, split, names)
    cx.backward_names = frozenset(evidence.backward)
    for star in (fn.params.star_arg, fn.params.star_kwarg):
        if isinstance(star, cst.Param):
            cx.state[star.name.value] = Value(kind=Kind.TUPLE if star is fn.params.star_arg else Kind.DICT, roots=frozenset((roots.argument(star.name.value),)))
    cx.scalar_defaults = frozenset(p.name.value for p in params if isinstance(p.default, (cst.Integer, cst.Float, cst.UnaryOperation)))
    cx.integer_params = frozenset(p.name.value for p in params if _holds_an_int(p))
    cx.parametrized = parametrized(fn)
    for index, param in enumerate(params):
        name = param.name.value
        if index == 0 and name in ("self", "cls") and cx.scope is not None and cx.scope.kind == "method":
            cx.state[name] = Value(kind=Kind.MODULE if cx.module_class else Kind.OTHER, grad=Tri.NO, has_params=Tri.MAYBE, roots=frozenset((roots.SELF,)))
            continue
        value = _value(cx, param, evidence)
        cx.state[name] = value
        cx.flow.params[name] = value


# `torch.tensor(x)`, `torch.from_numpy(x)`, `np.asarray(x)`, `torch.FloatTensor(x)`: x is made
# into a tensor (or array) here, so it was not one.
_CONSTRUCTS = re.compile(r"\b(?:tensor|as_tensor|from_numpy|asarray|array|[A-Z]\w*Tensor)\(\s*([A-Za-z_]\w*)\s*[,)]")


def _kind_split_arms(cx: Context, fn: cst.FunctionDef, first_line: int, names: frozenset[str]) -> dict[str, list[tuple[int, int]]]:
    """The arms of an `if` whose other arm constructs a tensor from a parameter: `if
    as_tensors: x = x.clone()` / `else: x = torch.tensor(x)`. The flag decides what the
    caller passes, so the tensor methods one arm calls say nothing about the other arm's `x`.
    For each such parameter, the line spans (relative to `first_line`) of the arms to ignore."""
    found: dict[str, list[tuple[int, int]]] = {}
    lines = cx.file.lines

    def arm_span(block: cst.BaseSuite) -> tuple[int, int] | None:
        body = getattr(block, "body", ())
        if not body or not isinstance(body, (list, tuple)):
            return None
        return cx.file.span(body[0])[0], cx.file.span(body[-1])[1]

    class Arms(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            if not isinstance(node.orelse, cst.Else):
                return
            first, second = arm_span(node.body), arm_span(node.orelse.body)
            if first is None or second is None:
                return
            spans = (first, second)
            texts = ["\n".join(lines[a - 1 : b]) for a, b in spans]
            built = [{m.group(1) for m in _CONSTRUCTS.finditer(t)} & names for t in texts]
            for i, other in ((0, 1), (1, 0)):
                for name in sorted(built[other] - built[i]):
                    if usage_evidence(texts[i], frozenset((name,))).kind_of(name) is Kind.TENSOR:
                        a, b = spans[i]
                        found.setdefault(name, []).append((a - first_line, b - first_line))

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn  # a nested function's arms are its own

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

    fn.visit(Arms())
    return found


def _without_arms(evidence: UsageEvidence, text: str, split: dict[str, list[tuple[int, int]]], names: frozenset[str]) -> UsageEvidence:
    """`evidence`, with what each split parameter's ignored arms say about it left out."""
    text_lines = text.split("\n")
    methods, attributes, torch_style = dict(evidence.methods), dict(evidence.attributes), set(evidence.torch_style)
    for name, spans in split.items():
        kept = [line for i, line in enumerate(text_lines) if not any(a <= i <= b for a, b in spans)]
        own = usage_evidence("\n".join(kept), names)
        methods[name] = own.methods.get(name, set())
        attributes[name] = own.attributes.get(name, set())
        torch_style.discard(name)
        torch_style |= own.torch_style & {name}
    return replace(evidence, methods=methods, attributes=attributes, torch_style=torch_style)


def is_scalar(cx: Context, name: str) -> bool:
    """A parameter with a number default or a numeric-sounding name (lr, eps, total...)."""
    return bool(SCALAR_NAME.search(name)) or name in cx.scalar_defaults


def _value(cx: Context, param: cst.Param, evidence: UsageEvidence) -> Value:
    name = param.name.value
    own = frozenset((roots.argument(name),))
    given = _given_kind(cx, name)
    kind = given or Kind.UNKNOWN
    if given is None and param.annotation is not None and set(cx.qualnames(param.annotation.annotation)) & api.LOADER_CLASSES:
        return a_loader(f"argument `{name}`")
    if given is None and param.annotation is not None:
        kind = annotation_kind(cx, param.annotation.annotation)
        if kind is Kind.TENSOR and evidence.methods.get(name, set()) & _CONTAINER_ONLY_METHODS:
            kind = Kind.OTHER  # `predictions: torch.Tensor` read as `predictions.keys()`: the annotation is wrong
        if kind is Kind.TENSOR and isinstance(param.default, (cst.Integer, cst.Float, cst.UnaryOperation)):
            kind = Kind.UNKNOWN  # `mu: torch.Tensor = 0.0`: the default says a plain number is welcome too
    if kind is Kind.UNKNOWN and param.default is not None:
        default = cx.ev(param.default)
        if default.kind in (Kind.SCALAR, Kind.NONE, Kind.OTHER):
            kind = Kind.OTHER if default.kind is Kind.OTHER else Kind.UNKNOWN
    if kind is Kind.UNKNOWN and not _beside_a_lookalike(cx):
        kind = evidence.kind_of(name)
    if kind is Kind.UNKNOWN and param.default is None and cx.in_forward and _first_input(cx, param) and not _list_of_inputs(cx, name) and not _keyed_container(cx, name) and _may_name_a_tensor(param):
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


def _beside_a_lookalike(cx: Context) -> bool:
    return cx.file.once("imports a torch lookalike", lambda: bool(imported_packages(cx.file.imports) & LOOKALIKE_FRAMEWORKS))


def parametrized(fn: cst.FunctionDef) -> dict[str, list[cst.BaseExpression]]:
    """The values `@pytest.mark.parametrize("a, b", [(1, [2]), ...])` gives each parameter it
    names (from literal argument lists only; `pytest.param(...)` entries are unwrapped)."""
    given: dict[str, list[cst.BaseExpression]] = {}
    for decorator in fn.decorators:
        call = decorator.decorator
        if not isinstance(call, cst.Call) or last(dotted(call.func)) != "parametrize" or len(call.args) < 2:
            continue
        names_arg, values_arg = call.args[0].value, call.args[1].value
        if isinstance(names_arg, cst.SimpleString) and isinstance(names_arg.evaluated_value, str):
            names = [n.strip() for n in names_arg.evaluated_value.split(",") if n.strip()]
        elif isinstance(names_arg, (cst.List, cst.Tuple)) and all(isinstance(e.value, cst.SimpleString) for e in names_arg.elements):
            names = [str(cst.ensure_type(e.value, cst.SimpleString).evaluated_value) for e in names_arg.elements]
        else:
            continue
        if not isinstance(values_arg, (cst.List, cst.Tuple)):
            continue
        for element in values_arg.elements:
            entry = element.value
            if isinstance(entry, cst.Call) and last(dotted(entry.func)) == "param":
                items = [a.value for a in entry.args if a.keyword is None]
            elif len(names) == 1:
                items = [entry]
            elif isinstance(entry, (cst.List, cst.Tuple)):
                items = [e.value for e in entry.elements]
            else:
                continue
            if len(items) == len(names):
                for name, item in zip(names, items, strict=True):
                    given.setdefault(name, []).append(item)
    return given


def _given_kind(cx: Context, name: str) -> Kind | None:
    """What a parametrized test's cases pass for `name`: they, not the annotation, say what
    the test receives (`mask: Tensor` fed nested lists is a list). UNKNOWN when the cases
    disagree; None when they say nothing (no case, or none whose kind is known)."""
    kinds = {cx.ev(value).kind for value in cx.parametrized.get(name, ())} - {Kind.UNKNOWN}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else Kind.UNKNOWN


def _may_name_a_tensor(param: cst.Param) -> bool:
    """Could the annotation of a module's input be a tensor's? None at all, or one that says
    so in its own words (jaxtyping's `Float[Tensor, "b n"]`, torchtyping's `TensorType[...]`).
    Any other annotation the file cannot resolve names something else: a graph `Data`, a
    batch class, a dict alias (`AtomicDataDict.Type = Dict[str, Tensor]`)."""
    if param.annotation is None:
        return True
    return re.search(r"Tensor|Array", code_of(param.annotation.annotation)) is not None


def _first_input(cx: Context, param: cst.Param) -> bool:
    """Is `param` the first positional parameter after `self`?"""
    assert cx.scope is not None and isinstance(cx.scope.node, cst.FunctionDef)
    positional = list(cx.scope.node.params.params)
    return len(positional) > 1 and positional[1] is param


def _list_of_inputs(cx: Context, name: str) -> bool:
    """Is `forward(self, inputs)` handed a list of inputs (Keras style): is the parameter read
    only as `inputs[0]`, `inputs[1]`? A tensor input is used as a whole somewhere."""
    body = _body_text(cx)
    uses = list(re.finditer(rf"(?<![\w.]){re.escape(name)}\b", body))
    return bool(uses) and all(_CONSTANT_INDEX.match(body, use.end()) for use in uses)


_CONSTANT_INDEX = re.compile(r"\s*\[\s*-?\d+\s*\]")


def _body_text(cx: Context) -> str:
    """The function's body as text without comments, generated once per function (two
    checks on a module's first input read it)."""
    assert cx.scope is not None and isinstance(cx.scope.node, cst.FunctionDef)
    node = cx.scope.node
    return cx.file.once(("body-text", id(node)), lambda: COMMENT.sub("", cst.Module([]).code_for_node(node.body)))


def _keyed_container(cx: Context, name: str) -> bool:
    """Is `forward(self, batch)` handed a mapping of inputs (a conditioner's batch dict)? Its
    items are tested for Python types (`isinstance(batch[key], list)`) or looked up by a
    string (`batch["jpg"]`): no tensor holds a list, and none is indexed by a string."""
    body = _body_text(cx)
    item = rf"(?<![\w.]){re.escape(name)}\s*\["
    return re.search(rf"isinstance\(\s*{item}[^\]]*\]\s*,\s*\(?\s*(list|dict|tuple|str)\b", body) is not None or re.search(rf"{item}\s*['\"]", body) is not None


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
        return Kind.OTHER if head in _CONTAINER_ANNOTATIONS or head == "Callable" else Kind.UNKNOWN
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
        if q in ("int", "float", "bool", "str", "bytes", "complex") or q in _CALLABLE_ANNOTATIONS:
            return Kind.OTHER
        if q in ("numpy.ndarray", "np.ndarray"):
            return Kind.NDARRAY
        if q.startswith(_OTHER_LIBRARIES):
            return Kind.OTHER  # `adj: sp.csr.csr_matrix`: whatever its name suggests, not a tensor
        if is_local_module_class(cx.file, q):
            return Kind.MODULE
    return Kind.UNKNOWN


def annotation_arms(annotation: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`Union[A, B]`, `Optional[A]`, `A | B`: each type named; anything else is its own arm."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return [*annotation_arms(annotation.left), *annotation_arms(annotation.right)]
    if isinstance(annotation, cst.Subscript) and last(dotted(annotation.value)) in ("Union", "Optional"):
        return [a for el in annotation.slice if isinstance(el.slice, cst.Index) for a in annotation_arms(el.slice.value)]
    return [annotation]


# Packages whose classes are never tensors, arrays or modules of torch's.
_OTHER_LIBRARIES = ("scipy.", "pandas.", "networkx.", "PIL.")


def _union(kinds: list[Kind]) -> Kind:
    """Tensor | None is a tensor (when given); Tensor | list[int] is unknown."""
    real = {k for k in kinds if k is not Kind.NONE}
    return real.pop() if len(real) == 1 else Kind.UNKNOWN


def _holds_an_int(param: cst.Param) -> bool:
    """`n: int` or `n=8` (unannotated): a parameter that holds a Python int."""
    if param.annotation is not None:
        return isinstance(param.annotation.annotation, cst.Name) and param.annotation.annotation.value == "int"
    return isinstance(param.default, cst.Integer)


def annotated_to_admit_others(flow: FunctionFlow, arg: cst.BaseExpression, value: Value) -> bool:
    """The argument is the function's parameter as passed, and its annotation names a type
    besides tensors and None (`Union[List[float], torch.Tensor]`, `np.ndarray | Tensor`):
    the function is written for values `torch.tensor` must convert, and the fix would
    break them."""
    scope = flow.scope
    if not isinstance(arg, cst.Name) or scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    if not any(roots.is_argument(r, arg.value) for r in value.roots):
        return False
    params = scope.node.params
    param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == arg.value), None)
    if param is None or param.annotation is None:
        return False
    names = [code_of(a).strip("'\"") for a in annotation_arms(param.annotation.annotation)]
    return any(not (n.rsplit(".", 1)[-1].endswith("Tensor") or n == "None") for n in names)
