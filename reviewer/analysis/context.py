"""The interpreter's state while it walks one function, and the few operations every part of
the analysis uses on it: make a tensor value, record an event, note what autograd saves.

`analysis.interpreter` walks statements, `analysis.expressions` evaluates expressions and
`analysis.semantics` says what library calls do; all of them work on a `Context`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import Event, FunctionFlow, Saved
from review_copies.analysis.facts import FileFacts
from review_copies.analysis.parse import Scope
from review_copies.analysis.syntax import dotted
from review_copies.analysis.values import Device, Kind, Tri, Value, gpu_flag

State = dict[str, Value]


def join_states(a: State, b: State) -> State:
    """What each name may hold after two paths meet."""
    out: State = {}
    for key in a.keys() | b.keys():
        if key in a and key in b:
            out[key] = a[key].join(b[key])
        else:
            out[key] = a[key] if key in a else b[key]
    return out


@dataclass
class Counters:
    """Numbering shared by an interpreter and its replays, so identities never repeat."""

    events: itertools.count = field(default_factory=itertools.count)
    loops: itertools.count = field(default_factory=lambda: itertools.count(1))
    branches: itertools.count = field(default_factory=lambda: itertools.count(1))
    fresh: itertools.count = field(default_factory=lambda: itertools.count(1))


class Context:
    """One function's walk: what each name holds now (`state`), whether grad mode is off,
    which loops enclose the current statement, and where events go.

    A context that does not `record` computes values only: a loop's first pass (which lets
    loop-carried values settle) and questions asked about other functions run that way.
    """

    def __init__(self, facts: FileFacts, scope: Scope | None, class_attrs: State | None = None, *, module_class: bool = False, recording: bool = True) -> None:
        self.facts = facts
        self.file = facts.file
        self.scope = scope
        self.recording = recording
        self.flow = FunctionFlow(file=self.file, scope=scope, in_module_class=module_class)
        self.state: State = dict(class_attrs or {})
        self.scopes: tuple[cst.CSTNode, ...] = (*scope.parents, scope.node) if scope else ()
        self.module_class = module_class
        self.no_grad = 0
        # 1 when autograd is off only because every caller in the file runs this function so.
        self.no_grad_from_callers = 0
        self.loop_stack: list[int] = []
        self.arm_stack: list[tuple[int, int]] = []
        # How many enclosing arms run because an `inplace` flag asked for them.
        self.opted_in = 0
        self.counters = Counters()
        # A flag an `if` tested: its branch id, and how many events had run then.
        self.flag_branches: dict[str, tuple[int, int]] = {}
        # For such a flag's branch id: the memory only its true arm left reachable, and only
        # its false arm (`if not_tensor: im = torch.from_numpy(...)` leaves the argument
        # reachable only where the flag fails).
        self.flag_roots: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self.backward_names: frozenset[str] = frozenset()
        self.scalar_defaults: frozenset[str] = frozenset()
        self.integer_params: frozenset[str] = frozenset()
        # What `@pytest.mark.parametrize` feeds each parameter it names.
        self.parametrized: dict[str, list[cst.BaseExpression]] = {}
        # The statement (and its line) being run: expressions take their line from it.
        self.current: cst.CSTNode | None = None
        self.current_line: cst.CSTNode | None = None
        # Mappings whose entries are fed to modules (`model(batch["input"])`): they hold tensors.
        self.tensor_containers: set[str] = set()
        # Names bound to a type test (`single = isinstance(box, (list, tuple))`): `if single:`
        # narrows as the test would.
        self.type_tests: dict[str, cst.BaseExpression] = {}
        self.class_methods: frozenset[str] = frozenset()
        if scope is not None and scope.class_node is not None:
            self.class_methods = frozenset(s.name.value for s in scope.class_node.body.body if isinstance(s, cst.FunctionDef))

    # ------------------------------------------------------------ walking hooks

    def ev(self, node: cst.BaseExpression | None) -> Value:
        """The value of an expression (and its events)."""
        raise NotImplementedError

    def assign(self, target: cst.BaseExpression, value: Value, expr: cst.BaseExpression | None) -> None:
        raise NotImplementedError

    def narrowing(self, test: cst.BaseExpression) -> tuple[State, State]:
        raise NotImplementedError

    # ------------------------------------------------------------- primitives

    @property
    def in_forward(self) -> bool:
        return self.module_class and self.scope is not None and self.scope.name == "forward"

    def line(self, node: cst.CSTNode) -> int:
        """The line of a statement, or of the statement being run for an expression: exact node
        positions are costly and are computed only for what gets reported."""
        lines = self.file.statement_lines
        if lines is None:
            return self.file.line_of(node)
        span = lines.get(node) or lines.get(self.current) or lines.get(self.current_line)
        return span[0] if span else self.file.line_of(node)

    def emit(self, cls: type[Event], node: cst.CSTNode, **fields: object) -> None:
        if not self.recording:
            return
        event = cls(
            node=node, line=self.line(node), loops=tuple(self.loop_stack), no_grad=self.no_grad > 0, index=next(self.counters.events),
            stmt=self.current, line_node=self.current_line, no_grad_here=self.no_grad > self.no_grad_from_callers, arms=tuple(self.arm_stack), opted_in=self.opted_in > 0, **fields,  # type: ignore[call-arg]
        )
        self.flow.events.append(event)

    def record(self, node: cst.CSTNode, value: Value) -> Value:
        if self.recording:
            self.flow.values[node] = value
        return value

    def new_root(self, node: cst.CSTNode, what: str = "t") -> frozenset[str]:
        return frozenset((roots.fresh(what, self.line(node), next(self.counters.fresh)),))

    def qualnames(self, expr: cst.BaseExpression) -> tuple[str, ...]:
        """What an expression names through the imports (`nn.Linear` -> `torch.nn.Linear`);
        nothing when its head is a local name."""
        name = dotted(expr)
        if not name or name.partition(".")[0] in self.state:
            return ()
        return self.file.imports.resolve(name, self.scopes)

    def grad_of(self, *values: Value) -> Tri:
        """Attached when any tensor input is (unknown inputs may be), never under no_grad."""
        if self.no_grad:
            return Tri.NO
        out = Tri.NO
        for v in values:
            if v.kind in (Kind.TENSOR, Kind.UNKNOWN):
                out = out.either(v.grad if v.kind is Kind.TENSOR else Tri.MAYBE)
        return out

    def tensor(self, node: cst.CSTNode, *inputs: Value, grad: Tri | None = None, origin: str = "", saves: Iterable[int | None] = ()) -> Value:
        """A new tensor computed from `inputs`: fresh memory, on their device, attached when they
        are; `saves` are what autograd saved computing it, which its graph now holds."""
        device = Device.UNKNOWN
        dtype = None
        graph: frozenset[int] = frozenset(s for s in saves if s is not None)
        for v in inputs:
            graph |= v.graph
            if v.kind in (Kind.TENSOR, Kind.UNKNOWN):
                device = v.device if device is Device.UNKNOWN else device.join(v.device) if v.device is not Device.UNKNOWN else device
            if v.kind is Kind.TENSOR:
                dtype = dtype or v.dtype
        grad = self.grad_of(*inputs) if grad is None else grad
        if grad is Tri.NO:
            graph = frozenset()  # a result that does not require grad (a comparison, an argsort) has no grad_fn: it holds no graph
        return Value(
            graph=graph,
            kind=Kind.TENSOR,
            grad=grad,
            device=device,
            gpu_if=gpu_flag(*inputs) if device.may_be_gpu else "",
            dtype=dtype,
            roots=self.new_root(node),
            fresh=True,
            origin=origin,
            line=self.line(node),
        )

    def save(self, value: Value, node: cst.CSTNode, op: str, attached: bool = False) -> int | None:
        """Autograd saves `value` for backward here; the index names the saved record."""
        if not self.recording or self.no_grad or value.kind is not Kind.TENSOR:
            return None
        index = next(self.counters.events)
        self.flow.saved.append(Saved(value.roots, self.line(node), op, index, tuple(self.loop_stack), attached, self.in_forward, node, arms=tuple(self.arm_stack), unversioned=value.unversioned))
        return index

    @staticmethod
    def with_save(value: Value, index: int | None) -> Value:
        """The op's result is what it saved (sigmoid, exp): its graph holds that record."""
        return value if index is None else value.but(graph=value.graph | {index})

    def rebind(self, node: cst.BaseExpression, value: Value) -> None:
        """An in-place method changed what the name holds (`x.requires_grad_()`)."""
        key = dotted(node)
        if key and key in self.state:
            self.state[key] = value

    def set_grad_flag(self, node: cst.BaseExpression, value: Value) -> None:
        """`x.requires_grad_(flag)` or `x.requires_grad = flag`: from here on `x` is `value`,
        whether or not it was tracked before (`conv.weight`, read off the module until now).
        Turning grad off for a part of a module (`conv.weight`) leaves the module's output
        attached only through the parts not seen, so whether it requires grad is unknown."""
        key = dotted(node)
        if not key:
            return
        self.state[key] = value
        owner = dotted(node.value) if isinstance(node, cst.Attribute) else ""
        module = self.state.get(owner) if owner else None
        if module is not None and module.kind is Kind.MODULE and value.grad is Tri.NO and module.params_grad is Tri.YES:
            self.state[owner] = module.but(params_grad=Tri.MAYBE)

    def set_parameters_grad(self, owner: str, on: bool) -> None:
        """A loop set the grad flag of every parameter of the module `owner` names. Turning
        it on for a part (`model.head`) leaves a frozen module that holds it partly frozen."""
        module = self.state.get(owner)
        if module is not None:
            self.state[owner] = module.but(params_grad=Tri.YES if on else Tri.NO)
        if on:
            frozen = [key for key, held in self.state.items() if owner.startswith(f"{key}.") and held.params_grad is Tri.NO]
            for key in frozen:
                self.state[key] = self.state[key].but(params_grad=Tri.MAYBE)

    @staticmethod
    def device_of(value: Value) -> Device:
        """Where a `device=` argument puts a tensor."""
        if value.kind in (Kind.DEVICE, Kind.TENSOR):
            return value.device
        if value.kind is Kind.UNKNOWN:
            return Device.MAYBE_CUDA
        return Device.UNKNOWN
