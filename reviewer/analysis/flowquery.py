"""Questions rules ask of a function's dataflow: who else holds this storage, is it read
after the write, does it survive the loop, is it backpropagated."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst
from review_copies.analysis.flow import ANY_GRAD, ANY_PARAMS, Backward, Bind, Call, Event, FunctionFlow, Loop, Return, Store, Use, Write
from review_copies.analysis.values import Kind, Value
from review_copies.source.parse import _dotted

# Parameters a function is expected to write into.
OUTPUT_PARAMETER_NAMES = frozenset(
    "out output outputs buf buffer buffers dst dest destination result results acc accumulator accum target_buffer cache state memory".split()
)
# Functions whose job is to mutate their arguments.
MUTATING_FUNCTION_PREFIXES = tuple(
    "init _init reset _reset update _update apply fill zero clip clamp copy load set_ _set inplace mutate add_to accumulate".split()
)


def overlaps(a: Iterable[str], b: Iterable[str]) -> bool:
    left, right = set(a), set(b)
    if left & right:
        return True
    # A write to "any module's parameters" (or gradients) reaches every such root.
    for wildcard, prefix in ((ANY_PARAMS, "params"), (ANY_GRAD, "grad:")):
        if (wildcard in left and any(r.startswith(prefix) for r in right)) or (wildcard in right and any(r.startswith(prefix) for r in left)):
            return True
    return False


def name_of(node: cst.CSTNode | None) -> str:
    if node is None:
        return ""
    if isinstance(node, cst.Subscript):
        return name_of(node.value)
    return _dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else ""


def last_bind(flow: FunctionFlow, name: str, before: int) -> Bind | None:
    found = None
    for event in flow.events:
        if event.index >= before:
            break
        if isinstance(event, Bind) and event.name == name:
            found = event
    return found


def holders_before(flow: FunctionFlow, event: Event, roots: frozenset[str], exclude: str) -> dict[str, Value]:
    """Names other than `exclude` that hold (part of) `roots` when `event` runs."""
    holders: dict[str, Value] = {}
    def related(name: str) -> bool:
        # `x` and `x.data` / `self.buf` and `self`: one object seen through an attribute.
        return name == exclude or exclude.startswith(name + ".") or name.startswith(exclude + ".")

    for name, value in flow.params.items():
        if not related(name) and value.roots & roots:
            holders[name] = value
    for e in flow.events:
        if e.index >= event.index:
            break
        if isinstance(e, Bind) and not related(e.name):
            if e.value.roots & roots and e.value.kind in (Kind.TENSOR, Kind.NDARRAY):
                holders[e.name] = e.value
            else:
                holders.pop(e.name, None)
    return holders


def reads_after(flow: FunctionFlow, event: Event, name: str, roots: frozenset[str]) -> list[Use]:
    """Reads of `name` that may run after `event` and still see those roots.

    A read earlier in the loop body counts (it runs again on the next iteration) only when
    nothing in the loop binds `name` anew: otherwise the next iteration reads a new value.
    """
    rebound_in = {loop for e in flow.events if isinstance(e, Bind) and e.name == name for loop in e.loops}
    out = []
    for u in flow.after(event):
        if not (isinstance(u, Use) and u.name == name and u.value.roots & roots) or u.node is getattr(event, "target_node", None):
            continue
        if u.index < event.index and set(u.loops) & set(event.loops) & rebound_in:
            continue
        if u.index < event.index and _written_by(flow, u):
            continue  # the target of another write, not a read of the values
        out.append(u)
    return out


def _written_by(flow: FunctionFlow, use: Use) -> bool:
    return any(isinstance(w, Write) and w.line == use.line and name_of(w.target_node) == use.name for w in flow.events)


TRAINING_ITERABLE = re.compile(r"(loader|dataloader|batches|batch_iter|data_iter|dataset|epoch|steps)", re.I)


def training_loop(flow: FunctionFlow, loop: Loop) -> bool:
    """A loop over training or evaluation steps: it backpropagates or steps an optimizer, or
    iterates a data loader."""
    for e in flow.events:
        if loop.start <= e.line <= loop.end and (isinstance(e, Backward) or (isinstance(e, Write) and e.op == "optimizer.step()")):
            return True
    node = loop.node
    return isinstance(node, cst.For) and bool(TRAINING_ITERABLE.search(code_text(node.iter)))


def code_text(node: cst.CSTNode) -> str:
    return cst.Module(body=()).code_for_node(node)


def loop_of(flow: FunctionFlow, event: Event) -> Loop | None:
    return flow.loops.get(event.loops[-1]) if event.loops else None


def outermost_loop(flow: FunctionFlow, event: Event) -> Loop | None:
    return flow.loops.get(event.loops[0]) if event.loops else None


def bound_outside(flow: FunctionFlow, name: str, loop: Loop) -> bool:
    """Does `name` hold a value from before the loop (an accumulator, a list, self.x)?"""
    if name in flow.params or name.startswith("self."):
        return True
    return any(isinstance(e, Bind) and e.name == name and e.line < loop.start for e in flow.events) or _bound_before_by_line(flow, name, loop)


def _bound_before_by_line(flow: FunctionFlow, name: str, loop: Loop) -> bool:
    return any(isinstance(e, (Bind, Use)) and e.name == name and e.line < loop.start for e in flow.events)


def used_after_loop(flow: FunctionFlow, name: str, loop: Loop) -> bool:
    return name.startswith("self.") or any(isinstance(e, Use) and e.name == name and e.line > loop.end for e in flow.events) or returned(flow, name)


def returned(flow: FunctionFlow, name: str) -> bool:
    return any(e.value_node is not None and name in _names(e.value_node) for e in flow.of(Return))


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> None:
            key = _dotted(n)
            if key:
                found.add(key)

    node.visit(_V())
    return found


def backpropagated(flow: FunctionFlow, roots: frozenset[str], after: int = -1) -> bool:
    return any(isinstance(e, Backward) and e.index > after and e.value.roots & roots for e in flow.events)


def backward_between(flow: FunctionFlow, start: int, end: int, saved: int | None = None) -> bool:
    """Did a backward run between the two events that freed the saved tensor `saved`?
    (A backward frees its own graph only; one of unknown provenance may have freed anything.)"""
    return any(
        isinstance(e, Backward) and start < e.index < end and (saved is None or not e.value.graph or saved in e.value.graph) for e in flow.events
    )


def backward_later(flow: FunctionFlow, after: int, saved: int) -> bool:
    """A backward after `after` that goes through the saved tensor (and so will fail)."""
    return any(isinstance(e, Backward) and e.index > after and saved in e.value.graph for e in flow.events)


def writes_to(flow: FunctionFlow, roots: frozenset[str]) -> Iterator[Write]:
    return (e for e in flow.of(Write) if overlaps(e.target.roots, roots))


def calls_with(flow: FunctionFlow, name: str) -> Iterator[Call]:
    """Calls of unknown functions that take `name` as an argument (they may change it)."""
    for e in flow.of(Call):
        if e.qualnames or e.method:
            continue
        for arg in e.call.args:
            if name_of(arg.value) == name:
                yield e


def is_mutating_function(flow: FunctionFlow) -> bool:
    if flow.scope is None:
        return False
    name = flow.scope.name
    if name.startswith("__") and name.endswith("__"):
        return False  # __call__, __getitem__: dunders, not the trailing-underscore convention
    return name.endswith("_") or name.startswith(MUTATING_FUNCTION_PREFIXES)


def returns_something(flow: FunctionFlow) -> bool:
    return any(e.value.kind is not Kind.NONE and e.value_node is not None for e in flow.of(Return))


def stores_of(flow: FunctionFlow, roots: frozenset[str]) -> Iterator[Store]:
    return (e for e in flow.of(Store) if e.value.roots & roots)


SKIPPED_WRITE_OPS = ("optimizer.step()", "load_state_dict")


def deliberate_write(write: Write) -> bool:
    """Writes whose job is to change the tensor: optimizer steps, loading, nn.init."""
    return write.op in SKIPPED_WRITE_OPS or write.op.startswith("nn.init.")


@dataclass(frozen=True)
class AliasPair:
    """Two names that share storage when one of them is written in place."""

    write: Write
    writer: str
    holder: str
    holder_value: Value
    reads: tuple[Use, ...]
    writer_bind: Bind | None
    holder_bind: Bind | None

    @property
    def writer_is_alias(self) -> bool:
        """The name written through was made from the other one (not the other way round)."""
        if self.writer_bind is None:
            return False
        return self.holder_bind is None or self.holder_bind.index < self.writer_bind.index


def alias_pairs(flow: FunctionFlow, write: Write) -> list[AliasPair]:
    writer = name_of(write.target_node)
    if not writer or write.target.kind not in (Kind.TENSOR, Kind.NDARRAY):
        return []
    pairs = []
    for holder, value in holders_before(flow, write, write.target.roots, writer).items():
        reads = reads_after(flow, write, holder, write.target.roots)
        if not reads:
            continue
        pairs.append(
            AliasPair(
                write=write,
                writer=writer,
                holder=holder,
                holder_value=value,
                reads=tuple(reads),
                writer_bind=last_bind(flow, writer, write.index),
                holder_bind=last_bind(flow, holder, write.index),
            )
        )
    return sorted(pairs, key=lambda p: p.holder)
