"""A small dataflow model per function: what each name holds at each line.

The interpreter walks a function's statements in order (both arms of a branch, a loop's
body twice so loop-carried values settle) and records `Event`s that rules read: calls,
in-place writes, reads of names, stores into containers, accumulations, `backward()`.
Each event carries the abstract `Value`s involved (reviewer.values). It is
intra-procedural, knows `self.` attributes set in `__init__`, and says "unknown" when it
does not know.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst
from review_copies.analysis.semantics import api
from review_copies.analysis.transforms import pipeline_steps
from review_copies.analysis.values import NONE, OTHER, SCALAR, UNKNOWN, Device, Kind, Tri, Value
from review_copies.source.parse import ParsedFile, Scope, _dotted, _statement_bodies

MAX_LOOP_NESTING_REPLAYED = 3
# How a value's origin begins when it is what another callable returned (a module call, the
# step before in a pipeline): rules quote such an origin to say why a name is a tensor.
OUTPUT_ORIGIN = "the output of"
# The storage root written by an optimizer.step() whose parameters are not known.
ANY_PARAMS = "params:*"
# Gradient tensors of any parameter, and an optimizer's state tensors.
ANY_GRAD = "grad:*"
OPTIMIZER_STATE = "optstate"
# Methods of nn.Module that are not submodule calls even with arguments.
_PLAIN_OBJECT_METHODS = frozenset(("register_module", "add_module", "get_submodule", "get_parameter", "get_buffer", "to_empty", "type", "extra_repr", "zero_grad"))
_BUFFER_NAMES = frozenset(("running_mean", "running_var", "num_batches_tracked"))
_MODULE_METHODS = api.MODULE_ONLY_METHODS | {"forward", "to", "cuda", "cpu", "float", "double", "half", "zero_grad", "requires_grad_", "register_buffer"}


# ----------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Event:
    node: cst.CSTNode
    line: int
    loops: tuple[int, ...]
    no_grad: bool
    index: int
    # The simple statement being run (an Expr, Assign, AugAssign, Return...), for fixes.
    stmt: cst.CSTNode | None = field(default=None, compare=False, repr=False, kw_only=True)
    # The statement line holding it (for fixes that wrap the whole line).
    line_node: cst.CSTNode | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Call(Event):
    qualnames: tuple[str, ...]
    method: str | None
    receiver: Value | None
    receiver_node: cst.BaseExpression | None
    args: tuple[Value, ...]
    kwargs: tuple[tuple[str, Value], ...]
    result: Value

    def kwarg(self, name: str) -> Value | None:
        for key, value in self.kwargs:
            if key == name:
                return value
        return None

    @property
    def call(self) -> cst.Call:
        assert isinstance(self.node, cst.Call)
        return self.node

    def is_any(self, names: Iterable[str]) -> bool:
        wanted = set(names)
        return any(q in wanted for q in self.qualnames)


@dataclass(frozen=True)
class Write(Event):
    """An in-place write into a tensor (or a NumPy array)."""

    target: Value
    target_node: cst.BaseExpression
    op: str
    source: Value | None = None


@dataclass(frozen=True)
class Use(Event):
    name: str
    value: Value


@dataclass(frozen=True)
class Bind(Event):
    name: str
    value: Value
    expr: cst.BaseExpression | None


@dataclass(frozen=True)
class Store(Event):
    """A value put into a container or onto an object: list.append, d[k] = v, self.x = v."""

    container: str
    container_value: Value
    value: Value
    how: str
    value_node: cst.BaseExpression | None


@dataclass(frozen=True)
class Accumulate(Event):
    """`name += value` (or name = name + value) where value is a tensor."""

    name: str
    value: Value
    value_node: cst.BaseExpression
    before: Value


@dataclass(frozen=True)
class Backward(Event):
    value: Value


@dataclass(frozen=True)
class Return(Event):
    value: Value
    value_node: cst.BaseExpression | None


@dataclass(frozen=True)
class Saved:
    """Autograd saved a tensor for backward here."""

    roots: frozenset[str]
    line: int
    op: str
    index: int
    loops: tuple[int, ...]
    # Whether the graph that saved it is surely attached (a parameter or requires_grad input).
    attached: bool = False
    in_forward: bool = False
    node: cst.CSTNode | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Loop:
    node: cst.For | cst.While
    start: int
    end: int


@dataclass
class FunctionFlow:
    file: ParsedFile
    scope: Scope | None
    events: list[Event] = field(default_factory=list)
    values: dict[cst.CSTNode, Value] = field(default_factory=dict)
    params: dict[str, Value] = field(default_factory=dict)
    loops: dict[int, Loop] = field(default_factory=dict)
    saved: list[Saved] = field(default_factory=list)
    in_module_class: bool = False
    final_state: dict[str, Value] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.scope.qualname if self.scope else "<module>"

    @property
    def is_forward(self) -> bool:
        return self.in_module_class and self.scope is not None and self.scope.name == "forward"

    def of(self, kind: type[Event]) -> Iterator:
        return (e for e in self.events if isinstance(e, kind))

    def value(self, node: cst.CSTNode) -> Value:
        return self.values.get(node, UNKNOWN)

    def after(self, event: Event) -> Iterator[Event]:
        """Events that may run after `event`: later ones, and in a loop, the whole loop again."""
        for other in self.events:
            if other.index > event.index or (other.index < event.index and set(other.loops) & set(event.loops)):
                yield other

    def later(self, event: Event) -> Iterator[Event]:
        return (e for e in self.events if e.index > event.index)


# ------------------------------------------------------------------------ interpreter

State = dict[str, Value]


def _join_states(a: State, b: State) -> State:
    out: State = {}
    for key in a.keys() | b.keys():
        if key in a and key in b:
            out[key] = a[key].join(b[key])
        else:
            out[key] = a[key] if key in a else b[key]
    return out


class _Interpreter:
    def __init__(self, file: ParsedFile, scope: Scope | None, class_attrs: State | None, module_class: bool) -> None:
        self.file = file
        self.scope = scope
        self.flow = FunctionFlow(file=file, scope=scope, in_module_class=module_class)
        self.state: State = dict(class_attrs or {})
        self.scopes: tuple[cst.CSTNode, ...] = (*scope.parents, scope.node) if scope else ()
        self.no_grad = 0
        self.silent = 0
        self.loop_stack: list[int] = []
        self.loop_ids = itertools.count(1)
        self.counter = itertools.count()
        self.fresh_ids = itertools.count(1)
        self.backward_names: set[str] = set()
        self.module_class = module_class
        self.current: cst.CSTNode | None = None
        self.current_line: cst.CSTNode | None = None
        # Saves made by the op being evaluated: they join its result's graph.
        self.pending: list[int] = []
        self.scalar_defaults: set[str] = set()
        # Mappings whose entries are fed to modules (`model(batch["input"])`): they hold tensors.
        self.tensor_containers: set[str] = set()
        self.class_methods: set[str] = set()
        if scope is not None and scope.class_node is not None:
            self.class_methods = {s.name.value for s in scope.class_node.body.body if isinstance(s, cst.FunctionDef)}

    # ----------------------------------------------------------------- helpers

    def line(self, node: cst.CSTNode) -> int:
        """The line of a statement, or of the statement being run for an expression: exact node
        positions are costly and are computed only for what gets reported."""
        lines = self.file.statement_lines
        if lines is None:
            return self.file.line_of(node)
        span = lines.get(node) or lines.get(self.current) or lines.get(self.current_line)
        return span[0] if span else self.file.line_of(node)

    def emit(self, cls: type[Event], node: cst.CSTNode, **fields: object) -> None:
        if self.silent:
            return
        event = cls(node=node, line=self.line(node), loops=tuple(self.loop_stack), no_grad=self.no_grad > 0, index=next(self.counter), stmt=self.current, line_node=self.current_line, **fields)  # type: ignore[call-arg]
        self.flow.events.append(event)

    def new_root(self, node: cst.CSTNode, what: str = "t") -> frozenset[str]:
        return frozenset((f"{what}@{self.line(node)}:{next(self.fresh_ids)}",))

    def qualnames(self, expr: cst.BaseExpression) -> tuple[str, ...]:
        dotted = _dotted(expr)
        if not dotted:
            return ()
        head, _, rest = dotted.partition(".")
        if head in self.state:
            return ()
        found = self.file.imports.lookup(head, self.scopes)
        return tuple(f"{q}.{rest}" if rest else q for q in found)

    def grad_of(self, *values: Value) -> Tri:
        if self.no_grad:
            return Tri.NO
        out = Tri.NO
        for v in values:
            if v.kind in (Kind.TENSOR, Kind.UNKNOWN):
                out = out.either(v.grad if v.kind is Kind.TENSOR else Tri.MAYBE if v.kind is Kind.UNKNOWN else Tri.NO)
        return out

    def tensor(self, node: cst.CSTNode, *inputs: Value, grad: Tri | None = None, origin: str = "") -> Value:
        device = Device.UNKNOWN
        dtype = None
        graph: frozenset[int] = frozenset(self.pending)
        self.pending = []
        for v in inputs:
            graph |= v.graph
            if v.kind in (Kind.TENSOR, Kind.UNKNOWN):
                device = v.device if device is Device.UNKNOWN else device.join(v.device) if v.device is not Device.UNKNOWN else device
            if v.kind is Kind.TENSOR:
                dtype = dtype or v.dtype
        return Value(
            graph=graph,
            kind=Kind.TENSOR,
            grad=self.grad_of(*inputs) if grad is None else grad,
            device=device,
            dtype=dtype,
            roots=self.new_root(node),
            fresh=True,
            origin=origin,
            line=self.line(node),
        )

    def with_save(self, value: Value, index: int | None) -> Value:
        self.pending = []
        return value if index is None else value.but(graph=value.graph | {index})

    def record(self, node: cst.CSTNode, value: Value) -> Value:
        if not self.silent:
            self.flow.values[node] = value
        return value

    def save(self, value: Value, node: cst.CSTNode, op: str, attached: bool = False) -> int | None:
        if self.silent or self.no_grad or value.kind is not Kind.TENSOR:
            return None
        in_forward = self.module_class and self.scope is not None and self.scope.name == "forward"
        index = next(self.counter)
        self.flow.saved.append(Saved(value.roots, self.line(node), op, index, tuple(self.loop_stack), attached, in_forward, node))
        self.pending.append(index)
        return index

    # ------------------------------------------------------------- parameters

    def bind_params(self, fn: cst.FunctionDef) -> None:
        start, end = self.file.span(fn)
        evidence = usage_evidence("\n".join(self.file.lines[start - 1 : end]))
        self.backward_names = evidence.backward
        params = list(fn.params.posonly_params) + list(fn.params.params) + list(fn.params.kwonly_params)
        for star in (fn.params.star_arg, fn.params.star_kwarg):
            if isinstance(star, cst.Param):
                self.state[star.name.value] = Value(kind=Kind.TUPLE if star is fn.params.star_arg else Kind.DICT, roots=frozenset((f"arg:{star.name.value}",)))
        self.scalar_defaults = {p.name.value for p in params if isinstance(p.default, (cst.Integer, cst.Float, cst.UnaryOperation))}
        for index, param in enumerate(params):
            name = param.name.value
            if index == 0 and name in ("self", "cls") and self.scope is not None and self.scope.kind == "method":
                self.state[name] = Value(kind=Kind.MODULE if self.module_class else Kind.OTHER, grad=Tri.NO, has_params=Tri.MAYBE, roots=frozenset(("self",)))
                continue
            value = self.param_value(param, evidence)
            self.state[name] = value
            self.flow.params[name] = value

    def param_value(self, param: cst.Param, evidence: _Evidence) -> Value:
        name = param.name.value
        roots = frozenset((f"arg:{name}",))
        kind = Kind.UNKNOWN
        if param.annotation is not None:
            kind = self.annotation_kind(param.annotation.annotation)
        if kind is Kind.UNKNOWN and param.default is not None:
            default = self.ev(param.default)
            if default.kind in (Kind.SCALAR, Kind.NONE, Kind.OTHER):
                kind = Kind.OTHER if default.kind is Kind.OTHER else Kind.UNKNOWN
        if kind is Kind.UNKNOWN:
            kind = evidence.kind_of(name)
        if kind is Kind.UNKNOWN and param.default is None and self.is_forward_input(param):
            kind = Kind.TENSOR  # nn.Module.forward(self, x): x is the input tensor
        handed = self.pipeline_input(param) if kind is Kind.UNKNOWN and param.default is None else None
        if handed is not None:
            return Value(kind=Kind.TENSOR, grad=Tri.MAYBE, roots=roots, origin=handed)
        if kind is Kind.TENSOR:
            return Value(kind=Kind.TENSOR, grad=Tri.YES if name in self.backward_names else Tri.MAYBE, roots=roots, origin=f"argument `{name}`")
        if kind is Kind.MODULE:
            return Value(kind=Kind.MODULE, grad=Tri.NO, has_params=Tri.MAYBE, roots=frozenset((f"params:{name}",)), origin=f"argument `{name}`")
        if kind is Kind.OPTIMIZER:
            return Value(kind=Kind.OPTIMIZER, grad=Tri.NO, roots=frozenset((f"params:?{name}",)), origin=f"argument `{name}`")
        return Value(kind=kind, roots=roots, origin=f"argument `{name}`")

    def is_local_module_class(self, name: str) -> bool:
        classes = [sc.node for sc in self.file.scopes if sc.kind == "class" and sc.name == name and isinstance(sc.node, cst.ClassDef)]
        return any(is_module_class(self.file, c) for c in classes)

    def scalar_param(self, name: str) -> bool:
        """A parameter with a number default or a numeric-sounding name (lr, eps, total...)."""
        return bool(_SCALAR_NAME.search(name)) or name in self.scalar_defaults

    def is_first_input(self, param: cst.Param) -> bool:
        """Is `param` the first positional parameter after `self`?"""
        assert self.scope is not None and isinstance(self.scope.node, cst.FunctionDef)
        positional = list(self.scope.node.params.params)
        return len(positional) > 1 and positional[1] is param

    def is_forward_input(self, param: cst.Param) -> bool:
        if not (self.module_class and self.scope is not None and self.scope.name == "forward"):
            return False
        return self.is_first_input(param)

    def pipeline_input(self, param: cst.Param) -> str | None:
        """Why the input of a pipeline step's `__call__` is a tensor, if the step before it
        in a pipeline of this file returns one."""
        scope = self.scope
        if scope is None or scope.kind != "method" or scope.name != "__call__" or scope.class_node is None or not self.is_first_input(param):
            return None
        return pipeline_inputs(self.file).get(scope.class_node.name.value)

    def annotation_kind(self, ann: cst.BaseExpression) -> Kind:
        if isinstance(ann, cst.Subscript):
            head = _dotted(ann.value).rsplit(".", 1)[-1]
            inner = [el.slice.value for el in ann.slice if isinstance(el.slice, cst.Index)]
            if head == "Optional" and len(inner) == 1:
                return self.annotation_kind(inner[0])
            if head == "Union":
                return _union([self.annotation_kind(x) for x in inner])
            return Kind.OTHER if head in ("list", "List", "tuple", "Tuple", "dict", "Dict", "Sequence", "Iterable", "Mapping") else Kind.UNKNOWN
        if isinstance(ann, cst.BinaryOperation):  # Tensor | None
            return _union([self.annotation_kind(ann.left), self.annotation_kind(ann.right)])
        if isinstance(ann, cst.Name) and ann.value == "None":
            return Kind.NONE
        quals = self.qualnames(ann) or ((_dotted(ann),) if isinstance(ann, (cst.Name, cst.Attribute)) else ())
        if isinstance(ann, cst.SimpleString):
            quals = (ann.evaluated_value,) if isinstance(ann.evaluated_value, str) else ()
        for q in quals:
            if q in ("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "Tensor", "torch.FloatTensor"):
                return Kind.TENSOR
            if q in ("torch.nn.Module", "torch.nn.modules.module.Module", "nn.Module") or (q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper()):
                return Kind.MODULE
            if q.startswith("torch.optim.") or q.endswith("Optimizer"):
                return Kind.OPTIMIZER
            if q in ("int", "float", "bool", "str", "bytes", "complex"):
                return Kind.OTHER
            if q in ("numpy.ndarray", "np.ndarray"):
                return Kind.NDARRAY
            if self.is_local_module_class(q):
                return Kind.MODULE
        return Kind.UNKNOWN

    # ---------------------------------------------------------------- statements

    def run_function(self, fn: cst.FunctionDef) -> FunctionFlow:
        self.state.update({k: v for k, v in module_constants(self.file).items() if k not in self.state})
        for decorator in fn.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if any(q in api.GRAD_MODE_OFF for q in self.qualnames(target)):
                self.no_grad += 1
        self.bind_params(fn)
        self.block(list(_statement_bodies(fn)))
        self.flow.final_state = dict(self.state)
        return self.flow

    def run_module(self, module: cst.Module) -> FunctionFlow:
        self.backward_names = usage_evidence(self.file.text).backward
        self.block([s for s in module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))])
        self.flow.final_state = dict(self.state)
        return self.flow

    def block(self, stmts: Sequence[cst.CSTNode]) -> None:
        for stmt in stmts:
            self.statement(stmt)

    def statement(self, stmt: cst.CSTNode) -> None:
        self.current_line = stmt
        if not isinstance(stmt, cst.SimpleStatementLine):
            self.current = stmt
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small)
        elif isinstance(stmt, cst.If):
            self.ev(stmt.test)
            before = dict(self.state)
            when_true, when_false = self.narrowing(stmt.test)
            self.state.update(when_true)
            self.block(stmt.body.body)
            after_body = self.state
            self.state = {**before, **when_false}
            if stmt.orelse is not None:
                self.statement(stmt.orelse) if isinstance(stmt.orelse, cst.If) else self.block(list(_statement_bodies(stmt.orelse)))
            self.state = _join_states(after_body, self.state)
        elif isinstance(stmt, cst.Else):
            self.block(list(_statement_bodies(stmt)))
        elif isinstance(stmt, (cst.For, cst.While)):
            self.loop(stmt)
        elif isinstance(stmt, cst.With):
            self.with_block(stmt)
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            before = dict(self.state)
            self.block(stmt.body.body)
            after = self.state
            for handler in stmt.handlers:
                self.state = _join_states(before, after)
                if handler.type is not None:
                    self.ev(handler.type)
                self.block(handler.body.body)
                after = _join_states(after, self.state)
            self.state = after
            if stmt.orelse is not None:
                self.block(stmt.orelse.body.body)
            if stmt.finalbody is not None:
                self.block(stmt.finalbody.body.body)
        elif isinstance(stmt, cst.Match):
            self.ev(stmt.subject)
            before = dict(self.state)
            merged: State | None = None
            for case in stmt.cases:
                self.state = dict(before)
                self.block(list(_statement_bodies(case)))
                merged = self.state if merged is None else _join_states(merged, self.state)
            self.state = _join_states(before, merged or before)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            self.state[stmt.name.value] = OTHER

    def narrowing(self, test: cst.BaseExpression) -> tuple[State, State]:
        """What `isinstance(x, torch.Tensor)`-style tests say about names in each branch."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            when_true, when_false = self.narrowing(test.expression)
            return when_false, when_true
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            left, _ = self.narrowing(test.left)
            right, _ = self.narrowing(test.right)
            return {**left, **right}, {}
        subject, kinds = _type_test(test)
        key = _dotted(subject) if subject is not None else ""
        if not key or not kinds:
            return {}, {}
        current = self.state.get(key, UNKNOWN)
        is_tensor = any(q in _TENSOR_TYPES for node in kinds for q in (self.qualnames(node) or (_dotted(node),)))
        if is_tensor:
            as_tensor = current if current.kind is Kind.TENSOR else current.but(kind=Kind.TENSOR, roots=current.roots or frozenset((f"arg:{key}",)))
            return {key: as_tensor}, {key: current.but(kind=Kind.OTHER, grad=Tri.NO) if current.kind in (Kind.TENSOR, Kind.UNKNOWN) else current}
        quals = [q for node in kinds for q in (self.qualnames(node) or (_dotted(node),))]
        if quals and all(q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper() for q in quals):
            has_params = Tri.NO if all(q.rsplit(".", 1)[-1] in api.PARAMETERLESS_MODULES for q in quals) else Tri.YES
            roots = current.roots or frozenset((f"params:{key}",))
            return {key: current.but(kind=Kind.MODULE, grad=Tri.NO, has_params=has_params, roots=roots)}, {}
        return {key: current.but(kind=Kind.OTHER, grad=Tri.NO)}, {}

    def with_block(self, stmt: cst.With) -> None:
        grad_change = 0
        restored = self.no_grad
        for item in stmt.items:
            value = self.ev(item.item)
            target = item.item.func if isinstance(item.item, cst.Call) else item.item
            quals = self.qualnames(target)
            if any(q in api.GRAD_MODE_OFF for q in quals):
                grad_change = 1
            elif any(q in api.GRAD_MODE_ON for q in quals):
                grad_change = -1
            elif any(q == "torch.set_grad_enabled" for q in quals) and isinstance(item.item, cst.Call) and item.item.args:
                flag = item.item.args[0].value
                if isinstance(flag, cst.Name) and flag.value in ("False", "True"):
                    grad_change = 1 if flag.value == "False" else -1
            if item.asname is not None:
                self.assign(item.asname.name, UNKNOWN if value.kind is Kind.OTHER else value, None)
        if grad_change == 1:
            self.no_grad += 1
        elif grad_change == -1:
            self.no_grad = 0
        self.block(stmt.body.body)
        self.no_grad = restored

    def loop(self, stmt: cst.For | cst.While) -> None:
        loop_id = next(self.loop_ids)
        start, end = self.file.span(stmt)
        self.flow.loops[loop_id] = Loop(stmt, start, end)
        element = UNKNOWN
        if isinstance(stmt, cst.For):
            element = self.iter_element(self.ev(stmt.iter), stmt.iter)
        before = dict(self.state)
        replay = len(self.loop_stack) < MAX_LOOP_NESTING_REPLAYED
        self.loop_stack.append(loop_id)
        if replay:
            self.silent += 1
            self.loop_pass(stmt, element)
            self.silent -= 1
            self.state = _join_states(before, self.state)
        self.loop_pass(stmt, element)
        self.loop_stack.pop()
        self.state = _join_states(before, self.state)
        if stmt.orelse is not None:
            self.block(stmt.orelse.body.body)

    def loop_pass(self, stmt: cst.For | cst.While, element: Value) -> None:
        if isinstance(stmt, cst.For):
            self.assign(stmt.target, element, None)
        else:
            self.ev(stmt.test)
        self.block(stmt.body.body)

    def iter_element(self, iterable: Value, node: cst.BaseExpression) -> Value:
        if iterable.kind is Kind.TENSOR:
            return iterable.but(roots=iterable.roots, via=iterable.via or "view", fresh=False, leaf=False, origin=f"a row of {_code(node)}")
        if iterable.element is not None:
            return iterable.element
        return UNKNOWN

    def small(self, small: cst.BaseSmallStatement) -> None:
        self.current = small
        if isinstance(small, cst.Expr):
            self.ev(small.value)
        elif isinstance(small, cst.Assign):
            value = self.ev(small.value)
            for target in small.targets:
                key = _dotted(target.target) if isinstance(target.target, (cst.Name, cst.Attribute)) else ""
                if key and value.kind is Kind.TENSOR and value.attached and key in _names_in_expr(small.value):
                    # `total = total + loss`: an accumulation written out of place.
                    self.emit(Accumulate, small, name=key, value=value, value_node=small.value, before=self.state.get(key, UNKNOWN))
                self.assign(target.target, value, small.value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.ev(small.value), small.value)
        elif isinstance(small, cst.AugAssign):
            self.aug_assign(small)
        elif isinstance(small, cst.Return):
            value = self.ev(small.value) if small.value is not None else NONE
            self.emit(Return, small, value=value, value_node=small.value)
        elif isinstance(small, cst.Del):
            for name in _names_in(small.target):
                self.state.pop(name, None)
        elif isinstance(small, (cst.Raise, cst.Assert)):
            for child in small.children:
                if isinstance(child, cst.BaseExpression):
                    self.ev(child)

    def assign(self, target: cst.BaseExpression, value: Value, expr: cst.BaseExpression | None) -> None:
        value = value.but(fresh=False)
        if isinstance(target, cst.Name):
            name = target.value
            if name in self.backward_names and value.kind in (Kind.TENSOR, Kind.UNKNOWN) and value.grad is not Tri.NO:
                # backward() is called on it: it is attached to the graph.
                value = value.but(kind=Kind.TENSOR, grad=Tri.YES)
            if not value.origin:
                value = value.but(origin=f"`{name}`")
            self.state[name] = value
            self.emit(Bind, target, name=name, value=value, expr=expr)
        elif isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and _dotted(target.value):
            owner_key = _dotted(target.value)
            if owner_key not in self.state:
                self.state[owner_key] = self.ev(target.value)
            flag = isinstance(expr, cst.Name) and expr.value == "True"
            self.state[owner_key] = self.state[owner_key].but(grad=Tri.YES if flag else Tri.NO if isinstance(expr, cst.Name) and expr.value == "False" else Tri.MAYBE)
        elif isinstance(target, cst.Attribute):
            owner = _dotted(target.value)
            key = _dotted(target)
            if key and not value.roots and value.kind in (Kind.UNKNOWN, Kind.NDARRAY, Kind.TENSOR):
                value = value.but(roots=frozenset((key,)))  # an identity, so aliases of self.x can be followed
            if key:
                self.state[key] = value
                self.emit(Bind, target, name=key, value=value, expr=expr)
            owner_value = self.ev(target.value) if owner else UNKNOWN
            self.emit(Store, target, container=owner or _code(target.value), container_value=owner_value, value=value, how="setattr", value_node=expr)
        elif isinstance(target, cst.Subscript):
            base = self.ev(target.value)
            if base.kind is Kind.TENSOR and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index) and isinstance(target.slice[0].slice.value, cst.SimpleString):
                base = base.but(kind=Kind.DICT)  # `out["pair"] = ...`: a mapping (a model output), not a tensor
            for element in target.slice:
                if isinstance(element.slice, cst.Index):
                    self.ev(element.slice.value)
            if base.kind in (Kind.TENSOR, Kind.NDARRAY):
                self.emit(Write, target, target=base, target_node=target.value, op="[...] =", source=value)
            elif base.kind in (Kind.DICT, Kind.LIST, Kind.STATE_DICT, Kind.UNKNOWN):
                self.emit(Store, target, container=_dotted(target.value) or _code(target.value), container_value=base, value=value, how="setitem", value_node=expr)
        elif isinstance(target, (cst.Tuple, cst.List)):
            parts = [el.value for el in target.elements]
            starred = any(isinstance(el, cst.StarredElement) for el in target.elements)
            for i, part in enumerate(parts):
                if value.items is not None and len(value.items) == len(parts) and not starred:
                    item = value.items[i]
                elif value.element is not None:
                    item = value.element
                else:
                    item = UNKNOWN
                if isinstance(target.elements[i], cst.StarredElement):
                    item = Value(kind=Kind.LIST, element=value.element)
                self.assign(part, item, None)
        elif isinstance(target, cst.StarredElement):
            self.assign(target.value, Value(kind=Kind.LIST, element=value.element), None)

    def aug_assign(self, stmt: cst.AugAssign) -> None:
        added = self.ev(stmt.value)
        target = stmt.target
        op = _code(stmt.operator).strip()
        if isinstance(target, cst.Subscript):
            base = self.ev(target.value)
            if base.kind in (Kind.TENSOR, Kind.NDARRAY):
                self.emit(Write, stmt, target=base, target_node=target.value, op=f"[...] {op}", source=added)
            return
        before = self.ev(target)
        key = _dotted(target)
        if before.kind in (Kind.TENSOR, Kind.NDARRAY):
            self.emit(Write, stmt, target=before, target_node=target, op=op, source=added)
            after = before.but(grad=self.grad_of(before, added) if before.kind is Kind.TENSOR else Tri.NO)
        elif added.kind is Kind.TENSOR and before.kind is Kind.UNKNOWN and key in self.flow.params and not self.scalar_param(key):
            # `points += noise` on an argument: a tensor or array is changed in place (a number
            # would only be rebound, but numbers are not combined with tensors like this).
            as_tensor = before.but(kind=Kind.TENSOR)
            self.emit(Write, stmt, target=as_tensor, target_node=target, op=op, source=added)
            after = as_tensor.but(grad=self.grad_of(as_tensor, added))
        elif added.kind is Kind.TENSOR and before.kind in (Kind.SCALAR, Kind.UNKNOWN, Kind.NONE):
            after = self.tensor(stmt, added, origin=f"`{key or _code(target)}`")
        elif before.kind is Kind.LIST and op == "+=":
            self.emit(Store, stmt, container=key, container_value=before, value=added.element or added, how="extend", value_node=stmt.value)
            after = before
        else:
            after = UNKNOWN if before.kind is Kind.UNKNOWN else before
        if key and added.kind is Kind.TENSOR:
            self.emit(Accumulate, stmt, name=key, value=added, value_node=stmt.value, before=before)
        if key:
            self.state[key] = after.but(fresh=False)

    # --------------------------------------------------------------- expressions

    def ev(self, node: cst.BaseExpression | None) -> Value:
        if node is None:
            return UNKNOWN
        return self.record(node, self._ev(node))

    def _ev(self, node: cst.BaseExpression) -> Value:
        if isinstance(node, cst.Name):
            return self.name(node)
        if isinstance(node, cst.Attribute):
            return self.attribute(node)
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.Subscript):
            return self.subscript(node)
        if isinstance(node, cst.BinaryOperation):
            return self.binary(node)
        if isinstance(node, cst.UnaryOperation):
            value = self.ev(node.expression)
            if isinstance(node.operator, cst.Not):
                return SCALAR
            return self.tensor(node, value, origin=_code(node)) if value.kind is Kind.TENSOR else value if value.kind is Kind.SCALAR else UNKNOWN
        if isinstance(node, cst.Comparison):
            values = [self.ev(node.left)] + [self.ev(c.comparator) for c in node.comparisons]
            if any(v.kind is Kind.TENSOR for v in values):
                return self.tensor(node, *values, grad=Tri.NO, origin=_code(node)).but(dtype="bool")
            return SCALAR
        if isinstance(node, cst.BooleanOperation):
            return self.ev(node.left).join(self.ev(node.right))
        if isinstance(node, cst.IfExp):
            self.ev(node.test)
            before = dict(self.state)
            when_true, when_false = self.narrowing(node.test)
            self.state.update(when_true)
            body = self.ev(node.body)
            self.state = {**before, **when_false}
            orelse = self.ev(node.orelse)
            self.state = before
            return body.join(orelse)
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            items = tuple(self.ev(el.value) for el in node.elements)
            kind = Kind.TUPLE if isinstance(node, cst.Tuple) else Kind.LIST
            element = _join_all(items) if items else None
            return Value(kind=kind, grad=Tri.NO, items=items, element=element, roots=self.new_root(node, "list"), fresh=True)
        if isinstance(node, cst.Dict):
            values = []
            for el in node.elements:
                if isinstance(el, cst.DictElement):
                    self.ev(el.key)
                    values.append(self.ev(el.value))
                else:
                    values.append(self.ev(el.value).element or UNKNOWN)
            return Value(kind=Kind.DICT, grad=Tri.NO, element=_join_all(values) if values else None, roots=self.new_root(node, "dict"), fresh=True)
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            return self.comprehension(node)
        if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)):
            return SCALAR
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return self.string(node)
        if isinstance(node, cst.NamedExpr):
            value = self.ev(node.value)
            self.assign(node.target, value, node.value)
            return value
        if isinstance(node, cst.Await):
            return self.ev(node.expression)
        if isinstance(node, cst.Yield):
            value = node.value
            if isinstance(value, cst.From):
                self.ev(value.item)
            elif value is not None:
                self.ev(value)
            return UNKNOWN
        if isinstance(node, cst.Lambda):
            return OTHER
        if isinstance(node, cst.StarredElement):
            return self.ev(node.value)
        return UNKNOWN

    def string(self, node: cst.BaseExpression) -> Value:
        text = node.evaluated_value if isinstance(node, cst.SimpleString) else None
        if isinstance(text, str):
            low = text.lower()
            if low == "cpu":
                return Value(kind=Kind.DEVICE, grad=Tri.NO, device=Device.CPU)
            if low.startswith("cuda"):
                return Value(kind=Kind.DEVICE, grad=Tri.NO, device=Device.CUDA)
        return OTHER

    def name(self, node: cst.Name) -> Value:
        if node.value in ("True", "False"):
            return SCALAR
        if node.value == "None":
            return NONE
        value = self.state.get(node.value)
        if value is None:
            if self.file.imports.lookup(node.value, self.scopes):
                return OTHER
            return UNKNOWN
        self.emit(Use, node, name=node.value, value=value)
        return value

    def attribute(self, node: cst.Attribute) -> Value:
        quals = self.qualnames(node)
        if quals:
            dtype = api.DTYPE_CONSTANTS.get(quals[0])
            return Value(kind=Kind.OTHER, grad=Tri.NO, dtype=dtype, origin=quals[0])
        key = _dotted(node)
        attr = node.attr.value
        if key and key in self.state:
            base = self.ev(node.value)
            value = self.state[key]
            self.emit(Use, node, name=key, value=value)
            return value
        base = self.ev(node.value)
        if base.kind is Kind.TENSOR or (base.kind is Kind.UNKNOWN and attr in ("data", "grad")):
            if attr == "data":
                return base.but(kind=Kind.TENSOR, grad=Tri.NO, leaf=False, via="data", fresh=False, certain=True, origin=f"`{_code(node)}`")
            if attr in ("T", "mT", "H", "mH"):
                return base.but(via=base.via or "view", fresh=False, leaf=False, origin=f"`{_code(node)}`")
            if attr == "grad":
                return Value(kind=Kind.TENSOR, grad=Tri.NO, device=base.device, dtype=base.dtype, roots=frozenset(f"grad:{r}" for r in base.roots), origin=f"`{_code(node)}`")
            if attr in ("real", "imag"):
                return base.but(via=base.via or "view", fresh=False, leaf=False)
            if attr == "values":
                return base.but(fresh=False, leaf=False)
            if attr == "indices":
                return base.but(fresh=False, leaf=False, grad=Tri.NO, dtype="int64")
            return OTHER if attr in ("shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "is_cuda", "layout") else UNKNOWN
        if base.kind is Kind.MODULE:
            roots = frozenset(f"{r}.{attr}" for r in base.roots) or frozenset((key,))
            if attr in ("weight", "bias"):
                return Value(kind=Kind.TENSOR, grad=Tri.YES, leaf=True, device=base.device, roots=roots, origin=f"`{_code(node)}`")
            if attr in _BUFFER_NAMES:
                return Value(kind=Kind.TENSOR, grad=Tri.NO, device=base.device, roots=roots, origin=f"`{_code(node)}`")
            # A submodule or a tensor: unknown, but one identity, so aliases of it can be followed.
            return Value(kind=Kind.UNKNOWN, roots=roots)
        if base.kind is Kind.OPTIMIZER and attr == "param_groups":
            return Value(kind=Kind.LIST, element=Value(kind=Kind.DICT))
        if base.kind is Kind.TUPLE and attr in ("values", "indices") and base.element is not None:
            return base.element  # torch.max(dim=...) and friends return (values, indices)
        if base.kind is Kind.UNKNOWN and attr in ("weight", "bias") and any(r.startswith("params") for r in base.roots):
            # A submodule's parameter (model.embed.weight).
            return Value(kind=Kind.TENSOR, grad=Tri.YES, leaf=True, device=base.device, roots=frozenset(f"{r}.{attr}" for r in base.roots), origin=f"`{_code(node)}`")
        return UNKNOWN

    def subscript(self, node: cst.Subscript) -> Value:
        base = self.ev(node.value)
        indexes = []
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                indexes.append(self.ev(element.slice.value))
            else:
                for part in (element.slice.lower, element.slice.upper, element.slice.step):
                    if part is not None:
                        self.ev(part)
        if base.kind is Kind.TENSOR and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) and isinstance(node.slice[0].slice.value, cst.SimpleString):
            return Value(kind=Kind.UNKNOWN, roots=frozenset(f"{r}[{node.slice[0].slice.value.value}]" for r in base.roots))  # a mapping's entry
        if base.kind is Kind.TENSOR:
            kind = _index_kind(node, indexes)
            origin = f"`{_code(node)}`"
            if kind == "basic":
                return base.but(via=base.via or "view", fresh=False, leaf=False, origin=origin)
            if kind == "maybe":
                return base.but(via=base.via or "view", certain=False, fresh=False, leaf=False, origin=origin)
            return self.tensor(node, base, origin=origin)
        if base.kind in (Kind.STATE_DICT, Kind.PARAMETER_LIST, Kind.DICT, Kind.LIST, Kind.TUPLE):
            if base.items is not None and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                index = node.slice[0].slice.value
                if isinstance(index, cst.Integer) and -len(base.items) <= int(index.evaluated_value) < len(base.items):
                    return base.items[int(index.evaluated_value)]
            if base.element is not None and not (len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice)):
                return base.element
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
                return base.but(fresh=True, roots=self.new_root(node, "list"), items=None)
        if base.kind is Kind.NDARRAY:
            if all(isinstance(e.slice, cst.Slice) for e in node.slice):
                return base.but(fresh=False, via=base.via or "view")
            return UNKNOWN  # an element (a NumPy scalar, a copy) or fancy indexing (a copy)
        if base.kind is Kind.UNKNOWN and base.roots and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = node.slice[0].slice.value
            if isinstance(key, cst.SimpleString):
                # `batch["image"]`: one entry of a mapping, itself unknown (a tensor when its
                # siblings are fed to a module: a collated batch).
                kind = Kind.TENSOR if _dotted(node.value) in self.tensor_containers else Kind.UNKNOWN
                return Value(kind=kind, roots=frozenset(f"{r}[{key.value}]" for r in base.roots), origin=f"`{_code(node)}`")
            if isinstance(key, (cst.Name, cst.Integer)):
                return base.but(via=base.via or "view", certain=False, fresh=False, leaf=False, origin=f"`{_code(node)}`")
        if base.kind is Kind.UNKNOWN and base.roots and _index_kind(node, indexes) == "basic" and all(isinstance(e.slice, cst.Slice) for e in node.slice):
            # Slicing an unknown array-like: a view if it is a tensor or an ndarray (a list would copy,
            # but then no tensor method will ever write through it).
            return base.but(via=base.via or "view", fresh=False, leaf=False, origin=f"`{_code(node)}`")
        return UNKNOWN

    def binary(self, node: cst.BinaryOperation) -> Value:
        left, right = self.ev(node.left), self.ev(node.right)
        if Kind.TENSOR in (left.kind, right.kind):
            op = _code(node.operator).strip()
            if op in ("*", "/", "@"):
                if right.attached or (right.grad is Tri.MAYBE and right.kind is Kind.TENSOR):
                    self.save(left, node, f"`{op}`", right.attached)
                if left.attached or (left.grad is Tri.MAYBE and left.kind is Kind.TENSOR):
                    self.save(right, node, f"`{op}`", left.attached)
            elif op == "**" and left.kind is Kind.TENSOR and left.grad is not Tri.NO:
                self.save(left, node, "`**`", left.attached)
            return self.tensor(node, left, right, origin=f"`{_code(node)}`")
        if left.kind is Kind.NDARRAY or right.kind is Kind.NDARRAY:
            return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=self.new_root(node, "np"), fresh=True)
        if left.kind is Kind.SCALAR and right.kind is Kind.SCALAR:
            return SCALAR
        if left.kind is Kind.LIST and right.kind is Kind.LIST:
            return Value(kind=Kind.LIST, element=(left.element or UNKNOWN).join(right.element or UNKNOWN), roots=self.new_root(node, "list"), fresh=True)
        return UNKNOWN

    def comprehension(self, node: cst.ListComp | cst.SetComp | cst.GeneratorExp | cst.DictComp) -> Value:
        outer = dict(self.state)
        for_in: cst.CompFor | None = node.for_in
        while for_in is not None:
            iterable = self.ev(for_in.iter)
            self.assign(for_in.target, self.iter_element(iterable, for_in.iter), None)
            for cond in for_in.ifs:
                self.ev(cond.test)
            for_in = for_in.inner_for_in
        if isinstance(node, cst.DictComp):
            self.ev(node.key)
            element = self.ev(node.value)
            kind = Kind.DICT
        else:
            element = self.ev(node.elt)
            kind = Kind.LIST
        self.state = outer
        return Value(kind=kind, grad=Tri.NO, element=element.but(fresh=False), roots=self.new_root(node, "list"), fresh=True)

    # --------------------------------------------------------------------- calls

    def call(self, node: cst.Call) -> Value:
        func = node.func
        quals = self.qualnames(func)
        receiver: Value | None = None
        method: str | None = None
        callee = UNKNOWN
        if not quals:
            if isinstance(func, cst.Attribute) and not self.is_attribute_value(func):
                method = func.attr.value
                receiver = self.ev(func.value)
            else:
                callee = self.ev(func)
        args = tuple(self.ev(a.value) for a in node.args if a.keyword is None and not a.star)
        for a in node.args:
            if a.star:
                self.ev(a.value)
        kwargs = tuple((a.keyword.value, self.ev(a.value)) for a in node.args if a.keyword is not None)
        if quals:
            result = self.function_call(node, quals, args, dict(kwargs))
        elif method is not None and receiver is not None:
            result = self.method_call(node, receiver, method, args, dict(kwargs))
        else:
            result = self.value_call(node, func, callee, args, dict(kwargs))
        if not result.origin and result.kind is not Kind.UNKNOWN:
            result = result.but(origin=f"`{_short(node)}`")
        receiver_node = func.value if isinstance(func, cst.Attribute) and method else None
        self.emit(Call, node, qualnames=quals, method=method, receiver=receiver, receiver_node=receiver_node, args=args, kwargs=kwargs, result=result)
        return result

    def is_attribute_value(self, func: cst.Attribute) -> bool:
        """`self.fc(x)` calls the submodule held in `self.fc`, not a method named fc."""
        key = _dotted(func)
        if key and key in self.state:
            return True
        attr = func.attr.value
        direct = key.count(".") == 1
        return direct and key.startswith("self.") and self.module_class and attr not in _MODULE_METHODS and attr not in self.class_methods

    def function_call(self, node: cst.Call, quals: tuple[str, ...], args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
        qual = next((q for q in quals if q.startswith(("torch", "numpy", "copy"))), quals[0])
        short = api.last(qual)
        first = args[0] if args else UNKNOWN
        if qual in api.FACTORIES:
            return self.factory(node, qual, first, kwargs)
        if qual in api.LEGACY_CONSTRUCTORS:
            if first.kind is Kind.TENSOR:
                return first.but(via="alias", fresh=False, leaf=False, origin=f"`{_short(node)}`")
            return Value(kind=Kind.TENSOR, grad=Tri.NO, dtype=api.LEGACY_DTYPES.get(short), device=Device.CUDA if ".cuda." in qual else Device.CPU, roots=self.new_root(node), fresh=True)
        if qual in api.SHARING_FUNCTIONS:
            via = api.SHARING_FUNCTIONS[qual]
            if first.kind in (Kind.TENSOR, Kind.NDARRAY):
                certain = not (kwargs.get("dtype") or kwargs.get("device"))
                device = Device.CPU if first.kind is Kind.NDARRAY else first.device
                if kwargs.get("device") is not None:
                    device = self.device_of(kwargs["device"])
                return Value(kind=Kind.TENSOR, grad=first.grad if first.kind is Kind.TENSOR else Tri.NO, device=device, roots=first.roots, certain=certain, via=via, origin=f"`{_short(node)}`")
            if qual == "torch.from_numpy" and first.kind is Kind.UNKNOWN and first.roots:
                return Value(kind=Kind.TENSOR, grad=Tri.NO, device=Device.CPU, roots=first.roots, via="from_numpy", origin=f"`{_short(node)}`")
            # `torch.as_tensor(v)` of something that may itself be a tensor may hand `v` back.
            fresh = first.kind is not Kind.UNKNOWN or qual == "torch.from_numpy"
            return Value(kind=Kind.TENSOR, grad=Tri.NO, device=Device.CPU if qual == "torch.from_numpy" else Device.UNKNOWN, roots=self.new_root(node), fresh=fresh)
        if qual in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            rg = kwargs.get("requires_grad")
            return first.but(kind=Kind.TENSOR, grad=Tri.NO if rg is not None and _is_false(node, "requires_grad") else Tri.YES, leaf=True, fresh=False, via="", origin=f"`{_short(node)}`")
        if qual.startswith("torch.nn.init.") and short.endswith("_") and args:
            self.emit(Write, node, target=first, target_node=node.args[0].value, op=qual.replace("torch.nn.", "nn."), source=None)
            return first
        if qual.startswith(("torch.nn.", "torch.optim.")) and short[:1].isupper() and "functional" not in qual:
            return self.construct(node, qual, short, args, kwargs)
        if qual in ("copy.deepcopy",):
            return self.deepcopy(node, first)
        if qual == "copy.copy":
            return first.but(fresh=False, roots=first.roots | self.new_root(node, "shallow"), via=first.via or "shallow-copy")
        if qual == "torch.device":
            return Value(kind=Kind.DEVICE, grad=Tri.NO, device=self.device_of(first))
        if qual in ("torch.clone",):
            return first.but(roots=self.new_root(node), fresh=True, leaf=False, via="", certain=True) if first.kind is Kind.TENSOR else UNKNOWN
        if qual.startswith("torch.") and short in api.VIEW_METHODS | api.MAYBE_VIEW_METHODS and first.kind is Kind.TENSOR:
            return first.but(via=first.via or "view", fresh=False, leaf=False, certain=short not in api.MAYBE_VIEW_METHODS, origin=f"`{_short(node)}`")
        if qual.startswith("torch.") and short in api.VIEW_TUPLE_METHODS and first.kind is Kind.TENSOR:
            return Value(kind=Kind.TUPLE, grad=Tri.NO, element=first.but(via=first.via or "view", fresh=False, leaf=False))
        if qual.count(".") == 1 and qual.startswith("torch.") and api.is_view_op(short):
            if first.kind is Kind.TENSOR:
                return first.but(via=first.via or "view", certain=False, fresh=False, leaf=False, origin=f"`{_short(node)}`")
            return UNKNOWN if first.kind is not Kind.UNKNOWN else first.but(via=first.via or "view", certain=False, fresh=False)
        if qual.startswith("torch.nn.functional.") or (qual.count(".") == 1 and qual.startswith("torch.")):
            returns = api.function_returns(short) if qual.count(".") == 1 else "tensor"
            if returns == "tensor" or (returns == "tuple" and short in api.VIEW_TUPLE_METHODS):
                return self.tensor_function(node, qual, short, args, kwargs)
            if returns == "tuple":
                element = self.tensor_function(node, qual, short, args, kwargs).but(fresh=False)
                return Value(kind=Kind.TUPLE, grad=Tri.NO, element=element, roots=self.new_root(node, "list"), fresh=True)
            return OTHER if returns == "other" else UNKNOWN
        if qual.startswith("numpy."):
            if short in ("asarray", "asanyarray") and first.kind in (Kind.TENSOR, Kind.NDARRAY):
                return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=first.roots, certain=False, via="numpy", device=Device.CPU)
            return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=self.new_root(node, "np"), fresh=True) if short[:1].islower() else OTHER
        if qual.startswith("torch.distributed."):
            return UNKNOWN
        return UNKNOWN

    def factory(self, node: cst.Call, qual: str, first: Value, kwargs: dict[str, Value]) -> Value:
        requires = _kwarg_true(node, "requires_grad")
        device = self.device_of(kwargs["device"]) if "device" in kwargs else Device.CPU
        dtype_val = kwargs.get("dtype")
        dtype = dtype_val.dtype if dtype_val is not None else None
        if qual.endswith("_like") and first.kind is Kind.TENSOR:
            device = first.device if "device" not in kwargs else device
            dtype = dtype or first.dtype
        elif dtype is None and api.last(qual) in ("zeros", "ones", "empty", "rand", "randn", "full", "linspace", "logspace", "eye", "normal"):
            dtype = "float32"
        if qual == "torch.tensor" and first.kind is Kind.TENSOR:
            device = first.device if "device" not in kwargs else device
            dtype = dtype or first.dtype
        return Value(
            kind=Kind.TENSOR,
            grad=Tri.YES if requires else Tri.NO,
            leaf=requires,
            device=device,
            dtype=dtype,
            roots=self.new_root(node),
            fresh=True,
            origin=f"`{_short(node)}`",
            line=self.line(node),
        )

    def construct(self, node: cst.Call, qual: str, short: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
        if qual.startswith("torch.optim."):
            target = args[0] if args else kwargs.get("params", UNKNOWN)
            roots = target.roots if target.kind in (Kind.PARAMETER_LIST, Kind.MODULE) else frozenset()
            return Value(kind=Kind.OPTIMIZER, grad=Tri.NO, roots=roots, fresh=True, origin=f"`{_short(node)}`")
        has_params = Tri.NO if short in api.PARAMETERLESS_MODULES else Tri.YES if qual.startswith("torch.nn.") and short[:1].isupper() else Tri.MAYBE
        via = "inplace" if short in api.INPLACE_MODULES and _kwarg_true(node, "inplace") else ""
        return Value(kind=Kind.MODULE, grad=Tri.NO, has_params=has_params, roots=self.new_root(node, "params"), via=via, device=Device.CPU, fresh=True, op=short, origin=f"`{_short(node)}`")

    def deepcopy(self, node: cst.Call, first: Value) -> Value:
        element = first.element.but(roots=self.new_root(node, "copy"), via="", certain=True) if first.element is not None else None
        return first.but(roots=self.new_root(node, "copy"), via="", certain=True, fresh=True, element=element, items=None)

    def tensor_function(self, node: cst.Call, qual: str, short: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
        first = args[0] if args else UNKNOWN
        if short in api.INPLACE_FUNCTIONAL and _kwarg_true(node, "inplace") and first.kind is Kind.TENSOR:
            self.emit(Write, node, target=first, target_node=node.args[0].value, op=f"{short}(inplace=True)", source=None)
            return first
        out = kwargs.get("out")
        if out is not None and out.kind is Kind.TENSOR:
            out_node = next(a.value for a in node.args if a.keyword is not None and a.keyword.value == "out")
            self.emit(Write, node, target=out, target_node=out_node, op="out=", source=None)
            return out
        if short in ("cat", "stack", "concat", "concatenate", "hstack", "vstack") and first.kind in (Kind.LIST, Kind.TUPLE):
            element = first.element or UNKNOWN
            return self.tensor(node, element, origin=f"`{_short(node)}`")
        if short in api.SCALAR_METHODS:
            return SCALAR
        if short in api.INDEX_OPS:
            return self.tensor(node, *args, grad=Tri.NO, origin=f"`{_short(node)}`").but(dtype="int64")
        self.note_saves(node, short, first, args[1] if len(args) > 1 else UNKNOWN)
        result = self.tensor(node, *args, *kwargs.values(), origin=f"`{_short(node)}`")
        if short in api.SAVES_OUTPUT and result.grad is not Tri.NO:
            result = self.with_save(result, self.save(result, node, f"`{short}`", result.attached))
        return result

    def note_saves(self, node: cst.CSTNode, short: str, first: Value, second: Value) -> None:
        if self.no_grad:
            return
        if short in api.SAVES_INPUTS and first.kind is Kind.TENSOR and first.grad is not Tri.NO:
            self.save(first, node, f"`{short}`", first.attached)
        if short in api.SAVES_OTHER_OPERAND:
            if second.kind is Kind.TENSOR and second.grad is not Tri.NO:
                self.save(first, node, f"`{short}`", second.attached)
            if first.kind is Kind.TENSOR and first.grad is not Tri.NO:
                self.save(second, node, f"`{short}`", first.attached)

    def value_call(self, node: cst.Call, func: cst.BaseExpression, callee: Value, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
        name = func.value if isinstance(func, cst.Name) else ""
        first = args[0] if args else UNKNOWN
        if callee.kind is Kind.MODULE or (callee.kind is Kind.UNKNOWN and _dotted(func).startswith("self.") and self.module_class):
            if callee.via == "inplace" and first.kind is Kind.TENSOR:
                self.emit(Write, node, target=first, target_node=node.args[0].value, op=f"{_code(func)}(...) with inplace=True", source=None)
                return first
            # A known module owns parameters unless it is one of the parameterless ones.
            has_params = (Tri.YES if callee.has_params is Tri.MAYBE else callee.has_params) if callee.kind is Kind.MODULE else Tri.MAYBE
            if has_params is Tri.NO:
                grad = self.grad_of(*args)
            elif self.no_grad:
                grad = Tri.NO
            else:
                grad = Tri.YES if has_params is Tri.YES else self.grad_of(*args).either(Tri.MAYBE)
            label = f"`{_code(func)}`" + (f" ({callee.op})" if callee.op else "")
            for arg in node.args:
                if isinstance(arg.value, cst.Subscript) and _dotted(arg.value.value):
                    self.tensor_containers.add(_dotted(arg.value.value))
            if callee.op in api.MODULE_SAVES_INPUT and first.kind is Kind.TENSOR and not self.no_grad:
                self.save(first, node, label, has_params is Tri.YES or first.attached)
            if has_params is Tri.YES and not self.no_grad and callee.roots:
                # A module with parameters saves them for the gradient of its input.
                self.save(Value(kind=Kind.TENSOR, roots=callee.roots), node, f"{label}'s parameters", True)
            result = self.tensor(node, *args, grad=grad, origin=f"{OUTPUT_ORIGIN} `{_short(node)}`")
            if callee.op in api.MODULE_SAVES_OUTPUT and result.grad is not Tri.NO:
                result = self.with_save(result, self.save(result, node, label, result.attached))
            return result.but(device=callee.device if callee.device is not Device.CPU or first.device is Device.UNKNOWN else first.device) if callee.device.may_be_gpu else result
        if name in ("float", "int", "bool", "len", "str", "repr", "print", "isinstance", "hasattr", "round", "abs") and not (name == "abs" and first.kind is Kind.TENSOR):
            return SCALAR if name != "print" else NONE
        if name in ("list", "tuple", "sorted", "reversed") and args:
            element = first.element if first.element is not None else (first if first.kind is Kind.TENSOR else None)
            if first.kind is Kind.TENSOR:
                element = first.but(via=first.via or "view", fresh=False, leaf=False)
            kind = first.kind if first.kind in (Kind.PARAMETER_LIST,) else Kind.LIST if name != "tuple" else Kind.TUPLE
            return Value(kind=kind, grad=Tri.NO, element=element, roots=self.new_root(node, "list"), fresh=True, via="shallow-copy", origin=f"`{_short(node)}`")
        if name == "dict" and args:
            kind = Kind.STATE_DICT if first.kind is Kind.STATE_DICT else Kind.DICT
            return Value(kind=kind, grad=Tri.NO, element=first.element, roots=self.new_root(node, "dict"), fresh=True, via="shallow-copy", origin=f"`{_short(node)}`")
        if name in ("enumerate",) and args:
            return Value(kind=Kind.LIST, element=Value(kind=Kind.TUPLE, items=(SCALAR, first.element or self.iter_element(first, node.args[0].value))))
        if name == "zip":
            return Value(kind=Kind.LIST, element=Value(kind=Kind.TUPLE, items=tuple(a.element or UNKNOWN for a in args)))
        if name == "range":
            return Value(kind=Kind.LIST, element=SCALAR)
        if name == "sum" and first.kind in (Kind.LIST, Kind.TUPLE) and first.element is not None and first.element.kind is Kind.TENSOR:
            return self.tensor(node, first.element, origin=f"`{_short(node)}`")
        if name in ("max", "min") and any(a.kind is Kind.TENSOR for a in args):
            return self.tensor(node, *args)
        return UNKNOWN

    def method_call(self, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
        func = node.func
        assert isinstance(func, cst.Attribute)
        recv_node = func.value
        if method == "backward":
            self.emit(Backward, node, value=recv)
            return NONE
        if recv.kind is Kind.MODULE:
            return self.module_method(node, recv, method, args, kwargs)
        if recv.kind is Kind.OPTIMIZER:
            if method == "step":
                # An optimizer whose parameters are unknown may update any module's parameters.
                roots = recv.roots if recv.roots and not any(r.startswith("params:?") for r in recv.roots) else frozenset((ANY_PARAMS,))
                self.emit(Write, node, target=Value(kind=Kind.TENSOR, roots=roots | {OPTIMIZER_STATE}, grad=Tri.YES, leaf=True), target_node=recv_node, op="optimizer.step()", source=None)
                return NONE
            if method == "state_dict":
                # References to the live moment buffers, which step() updates in place.
                element = Value(kind=Kind.TENSOR, grad=Tri.NO, roots=frozenset((OPTIMIZER_STATE,)), via="state_dict")
                return Value(kind=Kind.STATE_DICT, grad=Tri.NO, roots=frozenset((OPTIMIZER_STATE,)), element=element, via="state_dict", origin=f"`{_short(node)}`")
            if method == "zero_grad":
                self.zero_grad(node, recv_node)
                return NONE
            return UNKNOWN
        if recv.kind in (Kind.STATE_DICT, Kind.DICT, Kind.PARAMETER_LIST, Kind.LIST, Kind.TUPLE):
            return self.container_method(node, recv, method, args)
        if recv.kind is Kind.NDARRAY:
            if method == "copy":
                return Value(kind=Kind.NDARRAY, grad=Tri.NO, roots=self.new_root(node, "np"), fresh=True)
            if method in ("view", "reshape", "ravel", "transpose", "squeeze") or method == "T":
                return recv.but(fresh=False)
            return UNKNOWN
        if recv.kind is Kind.TENSOR or (recv.kind is Kind.UNKNOWN and method in api.TENSOR_ONLY_METHODS):
            return self.tensor_method(node, recv if recv.kind is Kind.TENSOR else recv.but(kind=Kind.TENSOR), method, args, kwargs, recv_node, known=recv.kind is Kind.TENSOR)
        if recv.kind is Kind.UNKNOWN and method == "item":
            return SCALAR
        if recv.kind is Kind.UNKNOWN and method == "state_dict":
            return self.module_method(node, recv.but(kind=Kind.MODULE, roots=recv.roots or frozenset((f"params:{_dotted(recv_node)}",))), method, args, kwargs)
        if recv.kind is Kind.UNKNOWN and (method in api.MAYBE_SELF_METHODS or method in api.VIEW_METHODS or method in api.MAYBE_VIEW_METHODS):
            return self.unknown_conversion(node, recv, method, args, kwargs)
        if recv.kind is Kind.UNKNOWN and (recv.device is not Device.UNKNOWN or recv.grad is Tri.YES) and api.method_returns(method) in ("tensor", "tuple"):
            # Moved to a device or attached to the graph: it is a tensor.
            return self.tensor_method(node, recv.but(kind=Kind.TENSOR), method, args, kwargs, recv_node, known=True)
        return UNKNOWN

    def zero_grad(self, node: cst.Call, recv_node: cst.BaseExpression) -> None:
        """`zero_grad(set_to_none=False)` zeroes the gradient tensors in place (the default
        replaces them with None, leaving old references intact)."""
        if _is_false(node, "set_to_none") or (node.args and isinstance(node.args[0].value, cst.Name) and node.args[0].value.value == "False"):
            self.emit(Write, node, target=Value(kind=Kind.TENSOR, roots=frozenset((ANY_GRAD,)), grad=Tri.NO), target_node=recv_node, op="zero_grad(set_to_none=False)", source=None)

    def unknown_conversion(self, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
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
                    device = self.device_of(value)
        via = "view" if method in api.VIEW_METHODS else "reshape" if method in api.MAYBE_VIEW_METHODS else "to"
        return recv.but(device=device, via=recv.via or via, certain=via == "view" and recv.certain, fresh=False, leaf=False, origin=f"`{_short(node)}`")

    def module_method(self, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
        origin = f"`{_short(node)}`"
        roots = recv.roots or self.new_root(node, "params")
        if method == "state_dict":
            keep = _kwarg_true(node, "keep_vars")
            element = Value(kind=Kind.TENSOR, grad=Tri.YES if keep else Tri.NO, leaf=keep, device=recv.device, roots=roots, via="state_dict", origin=origin)
            return Value(kind=Kind.STATE_DICT, grad=Tri.NO, roots=roots, element=element, via="state_dict", origin=origin)
        if method in ("parameters", "named_parameters"):
            element = Value(kind=Kind.TENSOR, grad=Tri.YES, leaf=True, device=recv.device, roots=roots, origin=origin)
            if method == "named_parameters":
                element = Value(kind=Kind.TUPLE, items=(OTHER, element), element=element)
            return Value(kind=Kind.PARAMETER_LIST, grad=Tri.NO, roots=roots, element=element, origin=origin)
        if method in ("buffers", "named_buffers"):
            element = Value(kind=Kind.TENSOR, grad=Tri.NO, device=recv.device, roots=roots, origin=origin)
            return Value(kind=Kind.PARAMETER_LIST, grad=Tri.NO, roots=roots, element=element, origin=origin)
        if method in ("to", "cuda", "cpu", "train", "eval", "float", "double", "half", "requires_grad_"):
            device = recv.device
            if method == "cuda":
                device = Device.CUDA
            elif method == "cpu":
                device = Device.CPU
            elif method == "to" and args:
                device = self.device_of(args[0]) if args[0].kind is Kind.DEVICE or args[0].kind is Kind.UNKNOWN else device
            elif method == "to" and "device" in kwargs:
                device = self.device_of(kwargs["device"])
            updated = recv.but(device=device)
            key = _dotted(node.func.value) if isinstance(node.func, cst.Attribute) else ""
            if key and key in self.state:
                self.state[key] = updated
            return updated
        if method == "zero_grad" and isinstance(node.func, cst.Attribute):
            self.zero_grad(node, node.func.value)
            return NONE
        if method == "load_state_dict":
            target_node = node.func.value if isinstance(node.func, cst.Attribute) else node
            self.emit(Write, node, target=Value(kind=Kind.TENSOR, roots=roots, grad=Tri.NO), target_node=target_node, op="load_state_dict", source=args[0] if args else None)
            return UNKNOWN
        own_method = isinstance(node.func, cst.Attribute) and _dotted(node.func.value) == "self" and method in self.class_methods
        if method == "forward" or (not own_method and method not in _MODULE_METHODS and method not in _PLAIN_OBJECT_METHODS and (args or kwargs)):
            # `model.encoder(x)`: a submodule is called like the module itself.
            return self.value_call(node, node.func, recv.but(has_params=Tri.YES if recv.has_params is not Tri.NO else Tri.NO, op="", via=""), args, kwargs)
        if method == "register_buffer" and len(args) >= 2 and isinstance(node.args[0].value, cst.SimpleString):
            name = node.args[0].value.evaluated_value
            owner = _dotted(node.func.value) if isinstance(node.func, cst.Attribute) else ""
            if owner and isinstance(name, str):
                self.state[f"{owner}.{name}"] = args[1].but(fresh=False, grad=Tri.NO)
            return NONE
        return UNKNOWN

    def container_method(self, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...]) -> Value:
        func = node.func
        assert isinstance(func, cst.Attribute)
        container = _dotted(func.value) or _code(func.value)
        if method in ("append", "add", "insert") and args:
            value = args[-1]
            value_node = node.args[-1].value if node.args else None
            self.emit(Store, node, container=container, container_value=recv, value=value, how=method, value_node=value_node)
            self.grow(func.value, recv, value)
            return NONE
        if method == "extend" and args:
            self.emit(Store, node, container=container, container_value=recv, value=args[0].element or args[0], how="extend", value_node=node.args[0].value)
            return NONE
        if method in ("update", "setdefault") and args:
            self.emit(Store, node, container=container, container_value=recv, value=args[-1].element or args[-1], how=method, value_node=node.args[-1].value)
            return NONE
        if method == "copy":
            return recv.but(roots=self.new_root(node, "dict"), fresh=True, via="shallow-copy", origin=f"`{_short(node)}`")
        if method == "items":
            return Value(kind=Kind.LIST, element=Value(kind=Kind.TUPLE, items=(OTHER, recv.element or UNKNOWN)))
        if method == "values":
            return Value(kind=Kind.LIST, element=recv.element)
        if method in ("get", "pop"):
            return recv.element or UNKNOWN
        if method == "keys":
            return Value(kind=Kind.LIST, element=OTHER)
        return UNKNOWN

    def grow(self, node: cst.BaseExpression, recv: Value, value: Value) -> None:
        """After list.append(v), the list is known to hold things like v."""
        key = _dotted(node)
        if key and key in self.state:
            element = value.but(fresh=False) if recv.element is None else recv.element.join(value.but(fresh=False))
            if recv.items is not None and not recv.items:
                element = value.but(fresh=False)
            self.state[key] = recv.but(element=element, items=None)

    def tensor_method(self, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value], recv_node: cst.BaseExpression, known: bool) -> Value:
        origin = f"`{_short(node)}`"
        if method in ("requires_grad_",):
            flag = not _is_false_arg(node)
            updated = recv.but(grad=Tri.YES if flag else Tri.NO, leaf=flag)
            self.rebind(recv_node, updated)
            return updated
        if method == "detach_":
            updated = recv.but(grad=Tri.NO, leaf=False)
            self.rebind(recv_node, updated)
            return updated
        if api.is_inplace_method(method) and method not in ("share_memory_", "retain_grad_"):
            self.emit(Write, node, target=recv, target_node=recv_node, op=f".{method}()", source=args[0] if args else None)
            if not self.no_grad and any(a.attached for a in args):
                updated = recv.but(grad=Tri.YES, graph=recv.graph.union(*(a.graph for a in args)))
                self.rebind(recv_node, updated)
                return updated
            return recv.but(fresh=False)
        if method == "copy_":
            return recv
        if method == "detach":
            return recv.but(grad=Tri.NO, leaf=False, via="detach", fresh=False, certain=True, origin=origin)
        if method == "clone":
            return recv.but(roots=self.new_root(node), fresh=True, leaf=False, via="", certain=True, origin=origin, line=self.line(node))
        if method in api.VIEW_METHODS:
            return recv.but(via=recv.via or "view", fresh=False, leaf=False, origin=origin)
        if method in api.VIEW_TUPLE_METHODS:
            return Value(kind=Kind.TUPLE, grad=Tri.NO, element=recv.but(via=recv.via or "view", fresh=False, leaf=False, origin=origin))
        if method == "contiguous" and not args and _transposed(recv_node):
            return self.tensor(node, recv, origin=origin)  # a transposed view is never contiguous: this copies
        if method in api.MAYBE_VIEW_METHODS:
            return recv.but(via=recv.via or "reshape", certain=False, fresh=False, leaf=False, origin=origin)
        if method in api.MAYBE_SELF_METHODS:
            return self.conversion(node, recv, method, args, kwargs, origin)
        if method == "numpy":
            return Value(kind=Kind.NDARRAY, grad=Tri.NO, device=Device.CPU, roots=recv.roots, via="numpy", certain=not _kwarg_true(node, "force"), origin=origin)
        if method in api.SCALAR_METHODS:
            return SCALAR
        if method in ("new_tensor", "new_zeros", "new_ones", "new_empty", "new_full", "to_dense", "to_sparse", "pin_memory"):
            return self.tensor(node, recv, grad=Tri.NO if method.startswith("new_") else None, origin=origin)
        returns = api.method_returns(method)
        if method in api.INDEX_OPS:
            return self.tensor(node, recv, grad=Tri.NO, origin=origin).but(dtype="int64")
        if api.is_view_op(method):
            # May share memory with the receiver (broadcast_to, as_strided, _values...): never fresh.
            return recv.but(via=recv.via or "view", certain=False, fresh=False, leaf=False, origin=origin)
        if not known or returns == "unknown":
            return UNKNOWN
        if returns == "other":
            return OTHER
        self.note_saves(node, method, recv, args[0] if args else UNKNOWN)
        result = self.tensor(node, recv, *args, *kwargs.values(), origin=origin)
        if returns == "tuple":
            return Value(kind=Kind.TUPLE, grad=Tri.NO, element=result.but(fresh=False), roots=self.new_root(node, "list"), fresh=True)
        if method in api.SAVES_OUTPUT and result.grad is not Tri.NO:
            result = self.with_save(result, self.save(result, node, f"`.{method}()`", result.attached))
        return result

    def conversion(self, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value], origin: str) -> Value:
        """`.to()`, `.cpu()`, `.float()`...: the same tensor when nothing changes, else a copy."""
        target_device: Device | None = None
        target_dtype: str | None = None
        if method == "cpu":
            target_device = Device.CPU
        elif method == "cuda":
            target_device = Device.CUDA
        elif method in api.DTYPE_METHODS:
            target_dtype = api.DTYPE_METHODS[method]
        elif method == "to":
            if _kwarg_true(node, "copy"):
                return self.tensor(node, recv, origin=origin).but(device=recv.device)
            for value in (*args, *(v for k, v in kwargs.items() if k in ("device", "dtype", "other"))):
                if value.kind is Kind.DEVICE:
                    target_device = value.device
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
        device = target_device if target_device not in (None,) else recv.device
        if device is Device.MAYBE_CUDA and recv.device is Device.CUDA:
            device = Device.CUDA
        dtype = target_dtype or recv.dtype
        if differs_device or differs_dtype:
            return self.tensor(node, recv, origin=origin).but(device=device or Device.UNKNOWN, dtype=dtype)
        return recv.but(via=recv.via or "to", certain=same_device and same_dtype, fresh=False, device=device or Device.UNKNOWN, dtype=dtype, origin=origin)

    def rebind(self, node: cst.BaseExpression, value: Value) -> None:
        key = _dotted(node)
        if key and key in self.state:
            self.state[key] = value

    def device_of(self, value: Value) -> Device:
        if value.kind is Kind.DEVICE:
            return value.device
        if value.kind is Kind.TENSOR:
            return value.device
        if value.kind in (Kind.UNKNOWN,):
            return Device.MAYBE_CUDA
        return Device.UNKNOWN


# ----------------------------------------------------------------- usage evidence


# Names that are called like modules in training code (`model(x)`, `net(x)`, `D(fake)`).
_SCALAR_NAME = re.compile(r"^(lr|eps|alpha|beta|gamma|momentum|scale|factor|weight_decay|decay|temperature|tau|total|count|n|k|step|steps|epoch|i|j|t)$")
_MODEL_NAME = re.compile(r"^(model|net|network|module|encoder|decoder|backbone|critic|generator|discriminator|policy|actor|G|D|teacher|student|classifier)(_\w+)?$|(_model|_net)$")
_OPTIMIZER_NAME = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)(_|\d|$)", re.I)


@dataclass
class _Evidence:
    methods: dict[str, set[str]] = field(default_factory=dict)
    attributes: dict[str, set[str]] = field(default_factory=dict)
    backward: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)
    # Names used the way only tensors are: `x.sum(dim=1)`, `x.amax(keepdim=True)`, `x.size(-1)`.
    torch_style: set[str] = field(default_factory=set)

    def kind_of(self, name: str) -> Kind:
        methods = self.methods.get(name, set())
        attrs = self.attributes.get(name, set())
        if methods & (api.MODULE_ONLY_METHODS - {"state_dict", "load_state_dict"}):
            return Kind.MODULE
        if name in self.called and methods & {"state_dict", "load_state_dict", "to", "cuda", "zero_grad"}:
            return Kind.MODULE
        if "step" in methods and ("zero_grad" in methods or "param_groups" in attrs or _OPTIMIZER_NAME.search(name)):
            return Kind.OPTIMIZER
        if methods & api.TENSOR_ONLY_METHODS or attrs & api.TENSOR_ONLY_ATTRIBUTES - {"dtype"} or name in self.torch_style:
            return Kind.TENSOR
        if name in self.called and _MODEL_NAME.search(name) and not methods & {"append", "items", "keys", "get"}:
            return Kind.MODULE
        return Kind.UNKNOWN


_METHOD_CALL = re.compile(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\s*\(")
_ATTRIBUTE = re.compile(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\b(?!\s*\()")
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
_COMMENT = re.compile(r"#[^\n]*")
_TORCH_KWARGS = re.compile(r"\b(dim|keepdim)\s*=")
_KEYWORDS = frozenset("def class if elif while for return with and or not in is lambda yield assert print super".split())


def usage_evidence(source: str) -> _Evidence:
    """What each name is used as, read off the function's text with regular expressions (a
    libcst visitor per function costs as much as the rest of the analysis)."""
    text = _COMMENT.sub("", source)
    evidence = _Evidence()
    for match in _METHOD_CALL.finditer(text):
        name, method = match.group(1), match.group(2)
        evidence.methods.setdefault(name, set()).add(method)
        if method == "backward":
            evidence.backward.add(name)
        args = _call_arguments(text, match.end())
        if _TORCH_KWARGS.search(args) or (method == "size" and args.strip()) or method in ("dim", "numel"):
            evidence.torch_style.add(name)
    for match in _ATTRIBUTE.finditer(text):
        evidence.attributes.setdefault(match.group(1), set()).add(match.group(2))
    for match in _CALLED.finditer(text):
        if match.group(1) not in _KEYWORDS:
            evidence.called.add(match.group(1))
    return evidence


def _call_arguments(text: str, start: int, limit: int = 400) -> str:
    """The text inside the parentheses that open just before `start`."""
    depth = 1
    for i in range(start, min(len(text), start + limit)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return text[start : start + limit]


# -------------------------------------------------------------------- small helpers


_TENSOR_TYPES = frozenset(("torch.Tensor", "torch.nn.Parameter", "torch.nn.parameter.Parameter", "Tensor"))


def _union(kinds: list[Kind]) -> Kind:
    """Tensor | None is a tensor (when given); Tensor | list[int] is unknown."""
    real = {k for k in kinds if k is not Kind.NONE}
    return real.pop() if len(real) == 1 else Kind.UNKNOWN


def _type_test(test: cst.BaseExpression) -> tuple[cst.BaseExpression | None, list[cst.BaseExpression]]:
    """`isinstance(x, T)` / `isinstance(x, (A, B))` / `type(x) is T` -> (x, [types])."""
    if isinstance(test, cst.Call) and _dotted(test.func) in ("torch.is_tensor", "is_tensor") and len(test.args) == 1:
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


def _join_all(values: Iterable[Value]) -> Value:
    out: Value | None = None
    for v in values:
        out = v if out is None else out.join(v)
    return out or UNKNOWN


def _names_in_expr(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> None:
            key = _dotted(n)
            if key:
                found.add(key)

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return False

    node.visit(_Collect())
    return found


def _names_in(node: cst.CSTNode) -> Iterator[str]:
    if isinstance(node, cst.Name):
        yield node.value
    elif isinstance(node, (cst.Tuple, cst.List)):
        for el in node.elements:
            yield from _names_in(el.value)
    elif isinstance(node, cst.Attribute):
        key = _dotted(node)
        if key:
            yield key


def _transposed(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value in ("t", "transpose", "permute", "mT", "swapaxes", "movedim") and (node.func.attr.value != "permute" or len(node.args) > 1)
    return isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT")


def _index_kind(node: cst.Subscript, values: list[Value]) -> str:
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
            if value.dtype == "bool":
                return "advanced"
            result = "maybe"
            continue
        if value.kind is Kind.SCALAR:
            continue
        result = "maybe"
    return result


def _kwarg_true(node: cst.Call, name: str) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return isinstance(arg.value, cst.Name) and arg.value.value == "True"
    return False


def _is_false(node: cst.Call, name: str) -> bool:
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return isinstance(arg.value, cst.Name) and arg.value.value == "False"
    return False


def _is_false_arg(node: cst.Call) -> bool:
    if node.args and node.args[0].keyword in (None,) and isinstance(node.args[0].value, cst.Name):
        return node.args[0].value.value == "False"
    return _is_false(node, "requires_grad")


_EMPTY_MODULE = cst.Module(body=())


def _code(node: cst.CSTNode) -> str:
    return _EMPTY_MODULE.code_for_node(node)


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(_code(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


code_of = _code
short_code = _short


# ------------------------------------------------------------------------ entry points


def module_constants(file: ParsedFile) -> State:
    """Module-level names bound once to a device, a dtype or a literal (`DEVICE = torch.device("cpu")`)."""
    cached = getattr(file, "_constants", None)
    if cached is not None:
        return cached
    counts: dict[str, int] = {}
    simple: dict[str, cst.BaseExpression] = {}
    for stmt in file.module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                    name = small.targets[0].target.value
                    counts[name] = counts.get(name, 0) + 1
                    simple[name] = small.value
    interp = _Interpreter(file, None, None, False)
    interp.silent = 1
    constants: State = {}
    for name, expr in simple.items():
        if counts[name] != 1:
            continue
        value = interp.ev(expr)
        if value.kind in (Kind.DEVICE, Kind.SCALAR) or (value.kind is Kind.OTHER and value.dtype is not None):
            constants[name] = value
    file._constants = constants  # type: ignore[attr-defined]
    return constants


_PIPELINE_HINT = re.compile(r"Compose\(|\b(\w+)\s*=\s*\w+\(\s*\1\s*\)")


def pipeline_inputs(file: ParsedFile) -> dict[str, str]:
    """Classes of this file whose `__call__` is handed a tensor by the step before it in a
    pipeline (reviewer.pipelines), each with the reason, which becomes the argument's origin."""
    cached: dict[str, str] | None = getattr(file, "_pipeline_inputs", None)
    if cached is not None:
        return cached
    found: dict[str, str] = {}
    # Analysing a step below asks again for its own input: it sees what is known so far.
    file._pipeline_inputs = found  # type: ignore[attr-defined]
    if not _PIPELINE_HINT.search(file.text):
        return found
    steps = list(pipeline_steps(file.module))
    returns: dict[str, bool] = {}  # what each step returns, given the inputs known so far
    grew = True
    while grew:  # a chain of steps: each one known to return a tensor feeds the next
        grew = False
        for step in steps:
            name, previous = _dotted(step.call.func), _dotted(step.previous.func)
            if name in found or _call_method(file, name) is None:
                continue
            if previous not in returns:
                returns[previous] = _returns_tensor(file, step.previous)
            if not returns[previous]:
                continue
            line = file.line_of(step.statement)
            found[name] = f"{OUTPUT_ORIGIN} `{previous}(...)`, the step before it in the pipeline at line {line}"
            returns.pop(name, None)  # its input is a tensor now: what it returns may change
            grew = True
    return found


def _call_method(file: ParsedFile, class_name: str) -> Scope | None:
    for scope in file.scopes:
        # A top-level class only (its method's sole parent): the step is built by its plain name.
        if scope.kind == "method" and scope.name == "__call__" and len(scope.parents) == 1 and scope.class_node is not None and scope.class_node.name.value == class_name:
            return scope
    return None


def _returns_tensor(file: ParsedFile, build: cst.Call) -> bool:
    """Does the step that `build` makes return a tensor: a torchvision transform that always
    does, or a class of this file whose `__call__` returns one on every path?"""
    interp = _Interpreter(file, None, None, False)
    interp.silent = 1
    if any(q in api.TENSOR_TRANSFORMS for q in interp.qualnames(build.func)):
        return True
    scope = _call_method(file, _dotted(build.func))
    if scope is None:
        return False
    returns = list(analyze_function(file, scope).of(Return))
    return bool(returns) and all(r.value.kind is Kind.TENSOR for r in returns)


def is_module_class(file: ParsedFile, cls: cst.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
    """Does the class derive from torch.nn.Module (directly, or via a class in this file)?"""
    for base in cls.bases:
        quals = file.imports.lookup(_dotted(base.value).split(".", 1)[0]) if _dotted(base.value) else ()
        dotted = _dotted(base.value)
        rest = dotted.partition(".")[2]
        full = tuple(f"{q}.{rest}" if rest else q for q in quals)
        if any(q.startswith("torch.nn") for q in full):
            return True
        if dotted and dotted not in seen:
            local = [s.node for s in file.scopes if s.kind == "class" and s.name == dotted and isinstance(s.node, cst.ClassDef)]
            if any(is_module_class(file, node, seen | {dotted}) for node in local):
                return True
    return False


def analyze_function(file: ParsedFile, scope: Scope, class_attrs: State | None = None) -> FunctionFlow:
    module_class = scope.class_node is not None and is_module_class(file, scope.class_node)
    interp = _Interpreter(file, scope, class_attrs, module_class)
    assert isinstance(scope.node, cst.FunctionDef)
    return interp.run_function(scope.node)


def analyze_module_body(file: ParsedFile) -> FunctionFlow:
    return _Interpreter(file, None, None, False).run_module(file.module)


def analyze_file(file: ParsedFile, lines: frozenset[int] | None = None) -> list[FunctionFlow]:
    """The flows of every function touching `lines` (all when None) and of the module body
    when it does. Methods are analysed after their class's __init__, whose attributes they see."""
    functions = [s for s in file.scopes if s.kind in ("function", "method")]
    if lines is None:
        wanted = functions
        module_body = True
    else:
        innermost = {file.innermost_scope(line, ("function", "method")) for line in lines}
        wanted = [s for s in functions if s in innermost]
        module_body = None in innermost
    inits = {s.class_node: s for s in functions if s.kind == "method" and s.name == "__init__"}
    needed_inits = {inits[s.class_node] for s in wanted if s.kind == "method" and s.class_node in inits}
    flows: list[FunctionFlow] = []
    class_attrs: dict[cst.CSTNode, State] = {}
    for init in sorted(needed_inits, key=lambda s: s.start):
        flow = analyze_function(file, init, None)
        class_attrs[init.class_node] = {k: v for k, v in flow.final_state.items() if k.startswith("self.")}
        if init in wanted:
            flows.append(flow)
    for scope in wanted:
        if scope in needed_inits:
            continue
        attrs = class_attrs.get(scope.class_node) if scope.kind == "method" else None
        flows.append(analyze_function(file, scope, attrs))
    flows.sort(key=lambda f: f.scope.start if f.scope else 0)
    if module_body:
        flows.append(analyze_module_body(file))
    return flows
