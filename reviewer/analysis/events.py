"""What the interpreter records as it walks a function: the events rules read, and the
flow that holds them.

An event is a frozen record of one thing the code does at one point: a call, an in-place
write, a read of a name, a binding, a store into a container, an accumulation, a
`backward()`, a return. Each carries the abstract `Value`s involved. `Saved` records what
autograd keeps for backward; `Loop` where a loop runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from review_copies.analysis.change import FunctionChange
from review_copies.analysis.parse import ParsedFile, Scope
from review_copies.analysis.values import UNKNOWN, Value


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
    # Autograd is off by this function's own choice (a `with torch.no_grad():` or decorator),
    # not only because every caller runs it so: the first says a write is meant.
    no_grad_here: bool = field(default=False, compare=False, repr=False, kw_only=True)
    # The branch arms around the event: (branch id, arm) for each enclosing `if`/`match`.
    arms: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False, kw_only=True)
    # In the arm a flag like `self.inplace` selects: the caller asked for the in-place work.
    opted_in: bool = field(default=False, compare=False, repr=False, kw_only=True)

    def exclusive_with(self, other: Event) -> bool:
        """Do the two sit in different arms of one branch, so one run never sees both?

        A branch inside a loop has id 0 and is never exclusive: one iteration may take one
        arm and the next iteration the other.
        """
        mine = dict(self.arms)
        return any(branch and branch in mine and mine[branch] != arm for branch, arm in other.arms)


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
    """`value.backward()`, or `torch.autograd.grad(value, ...)` / `torch.autograd.backward(value)`:
    `value` is what is differentiated. With `retain_graph=True` (or `create_graph=True`) the
    graph and what it saved outlive the call."""

    value: Value
    retains: bool = False
    # What is differentiated (`loss` in `loss.backward()` and `autograd.grad(loss, ...)`), what
    # the gradients are taken with respect to (`autograd.grad`'s inputs), and whether it was
    # called as a function of `torch.autograd` rather than as a tensor's method.
    outputs: cst.BaseExpression | None = None
    inputs: cst.BaseExpression | None = None
    function: bool = False


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
    # The branch arms around the save, as `Event.arms`.
    arms: tuple[tuple[int, int], ...] = field(default=(), compare=False, repr=False, kw_only=True)
    # Saved through `.data` (`w * a.data`): a later write to `a` changes it unseen, so backward
    # does not raise but silently uses the new values.
    unversioned: bool = field(default=False, kw_only=True)


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
    # What the reviewed change did to this function, when its base version is known.
    change: FunctionChange | None = None
    # The repository around the file (`index.RepoIndex`), for rules that ask about other
    # functions and classes; None when reviewing without one.
    index: Any = None
    # Arms (branch id, arm) that always leave the function (`if inplace: return x.mul_(w)`).
    exited_arms: set[tuple[int, int]] = field(default_factory=set)

    @property
    def name(self) -> str:
        return self.scope.qualname if self.scope else "<module>"

    @property
    def is_forward(self) -> bool:
        return self.in_module_class and self.scope is not None and self.scope.name == "forward"

    def left_between(self, earlier: tuple[tuple[int, int], ...], later: tuple[tuple[int, int], ...]) -> bool:
        """Whether what ran in the arms `earlier` cannot be followed by what runs in the arms
        `later`: an arm of the first leaves the function and the second is not inside it."""
        return any(branch and (branch, arm) in self.exited_arms and (branch, arm) not in later for branch, arm in earlier)

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


