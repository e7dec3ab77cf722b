"""Who else holds the memory an event touches, and whether they read it afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from review_copies.analysis.events import Bind, Call, Event, FunctionFlow, Use, Write
from review_copies.analysis.queries.loops import opposite_arms
from review_copies.analysis.roots import overlaps
from review_copies.analysis.syntax import code_of, dotted
from review_copies.analysis.values import Kind, Value

__all__ = ["AliasPair", "alias_pairs", "calls_with", "emptied_before", "holders_before", "last_bind", "name_of", "on_every_path", "overlaps", "reads_after", "writes_to"]


def name_of(node: cst.CSTNode | None) -> str:
    """The name a write or store goes through: `x`, `self.buf`, `x` of `x[i]`."""
    if node is None:
        return ""
    if isinstance(node, cst.Subscript):
        return name_of(node.value)
    return dotted(node) if isinstance(node, (cst.Name, cst.Attribute)) else ""


def last_bind(flow: FunctionFlow, name: str, before: int, reaching: Event | None = None) -> Bind | None:
    """The last binding of `name` before event index `before`; with `reaching`, the last one
    that can run before that event (one in the other arm of an `if` around it never does)."""
    found = None
    for event in flow.events:
        if event.index >= before:
            break
        if isinstance(event, Bind) and event.name == name and (reaching is None or not event.exclusive_with(reaching)):
            found = event
    return found


def emptied_before(flow: FunctionFlow, name: str, event: Event) -> bool:
    """Is `name` made a new empty container (`self.outputs = []`) earlier in this same call, on
    every path to `event`? Then it holds only what this call puts in it."""
    return any(
        isinstance(e, Bind) and e.name == name and e.index < event.index and _empty(e.expr) and on_every_path(e, event, event) for e in flow.events
    )


def on_every_path(bind: Bind, start: Event, end: Event) -> bool:
    """Does every run from `start` to `end` pass `bind`? Yes when each branch arm and loop the
    bind sits in also holds one of them (`if c: load(...); sd = other` before a read after the `if`)."""
    return set(bind.arms) <= set(start.arms) | set(end.arms) and set(bind.loops) <= set(start.loops) | set(end.loops)


def _empty(expr: cst.BaseExpression | None) -> bool:
    if isinstance(expr, (cst.List, cst.Dict)):
        return not expr.elements
    return isinstance(expr, cst.Call) and not expr.args and dotted(expr.func) in ("list", "dict", "collections.OrderedDict", "OrderedDict")


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
            if e.exclusive_with(event):
                continue  # bound in another arm of a branch the event is in: never both
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
    # `arr[0] = v` stores through the name and reads none of its values.
    item_stores = {id(w.target_node) for w in flow.of(Write) if w.op == "[...] ="}
    out = []
    for u in flow.after(event):
        if not (isinstance(u, Use) and u.name == name and u.value.roots & roots) or u.node is getattr(event, "target_node", None):
            continue
        if u.exclusive_with(event):
            continue
        if u.index < event.index and set(u.loops) & set(event.loops) & rebound_in:
            continue
        if u.index > event.index and _rebound_between_arms(flow, event, u, name):
            continue  # the other arm of an `if` in the loop: only a later iteration reaches it, after the name is bound anew
        if u.index > event.index and _rebound_on_the_way(flow, event, u, name, roots):
            continue
        if u.index < event.index and _written_by(flow, u):
            continue  # the target of another write, not a read of the values
        if id(u.node) in item_stores:
            continue
        out.append(u)
    return out


def _rebound_on_the_way(flow: FunctionFlow, event: Event, use: Use, name: str, roots: frozenset[str]) -> bool:
    """Molecular-Test-Time-Adaptation's noise: `if flip: b = noisy; b[mask] = 1 - b[mask];
    noisy = deepcopy(b)`, then `data.noisy = noisy` after the `if`. Every run from the write
    to the read binds the name to a new object first; the read after the `if` only looks as
    if it might see the old one because the arms' values are merged there."""
    return any(
        isinstance(e, Bind) and e.name == name and event.index < e.index < use.index and not e.value.roots & roots and on_every_path(e, event, use)
        for e in flow.events
    )


def _rebound_between_arms(flow: FunctionFlow, event: Event, use: Use, name: str) -> bool:
    """`w = t[i].numpy()`, then `if scalar: t[i] = v` / `else: ... w[j] ...` in a loop that
    binds `w` on every pass: the write and the read sit in opposite arms of one `if`, so
    the read runs on a later pass, and that pass binds the name anew first."""
    shared = set(use.loops) & set(event.loops)
    if not shared or not opposite_arms(flow, event.line, use.line):
        return False
    return any(
        isinstance(e, Bind) and e.name == name and set(e.loops) & shared and use.arms[: len(e.arms)] == e.arms and event.arms[: len(e.arms)] == e.arms
        for e in flow.events
    )


def _written_by(flow: FunctionFlow, use: Use) -> bool:
    return any(isinstance(w, Write) and w.line == use.line and name_of(w.target_node) == use.name for w in flow.events)


def writes_to(flow: FunctionFlow, roots: frozenset[str]) -> Iterator[Write]:
    return (e for e in flow.of(Write) if overlaps(e.target.roots, roots))


# Builtins that only look at their arguments: `hasattr(model, "state_dict")` changes nothing.
_LOOKING_BUILTINS = frozenset(
    "hasattr getattr isinstance issubclass callable len id type repr str hash format print bool int float "
    "iter zip enumerate sorted reversed min max sum any all list tuple dict set frozenset vars dir".split()
)


def calls_with(flow: FunctionFlow, name: str) -> Iterator[Call]:
    """Calls of unknown functions that take `name` as an argument (they may change it)."""
    for e in flow.of(Call):
        if e.qualnames or e.method:
            continue
        if isinstance(e.call.func, cst.Name) and e.call.func.value in _LOOKING_BUILTINS:
            continue
        for arg in e.call.args:
            if name_of(arg.value) == name:
                yield e


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
    writer_bind = last_bind(flow, writer, write.index, reaching=write)
    for holder, value in holders_before(flow, write, write.target.roots, writer).items():
        holder_bind = last_bind(flow, holder, write.index, reaching=write)
        # A read in the other arm of the flag the alias was bound under sees another value.
        # A read of the shape alone (`len(f)`, `f.shape`) sees nothing a write of the values changes.
        reads = [
            r for r in reads_after(flow, write, holder, write.target.roots) if (holder_bind is None or not r.exclusive_with(holder_bind)) and not reads_layout_only(r)
        ]
        if not reads:
            continue
        if disjoint_slices(flow, writer_bind, holder_bind):
            continue
        pairs.append(
            AliasPair(
                write=write,
                writer=writer,
                holder=holder,
                holder_value=value,
                reads=tuple(reads),
                writer_bind=writer_bind,
                holder_bind=holder_bind,
            )
        )
    return sorted(pairs, key=lambda p: p.holder)


def disjoint_slices(flow: FunctionFlow, a: Bind | None, b: Bind | None) -> bool:
    """`left = x[:, :k]` and `right = x[:, k:]` (or `x[0]` and `x[1]`): basic indexing of the
    same tensor, as bound at the time, that parts in one dimension, so the two names share
    no element and a write through one never shows through the other."""
    if a is None or b is None or not isinstance(a.expr, cst.Subscript) or not isinstance(b.expr, cst.Subscript):
        return False
    base = dotted(a.expr.value)
    if not base or base != dotted(b.expr.value) or last_bind(flow, base, a.index) is not last_bind(flow, base, b.index):
        return False
    left, right = a.expr.slice, b.expr.slice
    if len(left) != len(right) or any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis) for e in (*left, *right)):
        return False
    return any(_parted(x.slice, y.slice) for x, y in zip(left, right, strict=True))


def _parted(x: cst.BaseSlice, y: cst.BaseSlice) -> bool:
    """Two subscripts of one dimension that select no common index."""
    if isinstance(x, cst.Index) and isinstance(y, cst.Index):
        i, j = _whole(x.value), _whole(y.value)
        return i is not None and j is not None and i != j
    if not isinstance(x, cst.Slice) or not isinstance(y, cst.Slice) or x.step is not None or y.step is not None:
        return False
    return _before(x, y) or _before(y, x)


def _before(x: cst.Slice, y: cst.Slice) -> bool:
    """`[a:k]` ends where `[k:b]` starts (for any k both resolve it to the same index), or
    literal bounds that do not meet."""
    if x.upper is None or y.lower is None:
        return False
    if code_of(x.upper) == code_of(y.lower):
        return True
    end, start = _whole(x.upper), _whole(y.lower)
    return end is not None and start is not None and end <= start


def _whole(expr: cst.BaseExpression) -> int | None:
    """A non-negative integer literal (negative ones count from an end the code does not show)."""
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    return None


# What a tensor says of its layout, not of its values.
_LAYOUT = frozenset(("shape", "dtype", "device", "ndim", "size", "dim", "numel", "is_cuda", "layout", "new_zeros", "new_ones", "new_empty", "new_full"))

# `y.view_as(x)`, `torch.zeros_like(x)`: calls that take from their tensor argument only its
# shape, dtype or device.
_LAYOUT_OF_ARGUMENT = frozenset(("view_as", "reshape_as", "expand_as", "type_as", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"))


# In-place methods that replace every value of their receiver without reading one.
_OVERWRITES = frozenset(("fill_", "zero_", "copy_", "normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_", "log_normal_"))


def reads_layout_only(use: Use) -> bool:
    """`x.shape`, `x.size(0)`, `x.dtype`, `len(x)`, `isinstance(x, torch.Tensor)`,
    `y.view_as(x)`, `torch.zeros_like(x)`: a read that no write of the values can change.
    Also `x.fill_(v)` or `x.copy_(y)`: the name is the target of a write that replaces every
    value, and reads none of them."""
    stmt = use.stmt
    if stmt is None:
        return False
    found = False

    class Find(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal found
            found = found or (node.value is use.node and node.attr.value in _LAYOUT)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Name):
                looks = (func.value == "len" and len(node.args) == 1) or (func.value in ("isinstance", "type", "id") and bool(node.args))
                found = found or (looks and node.args[0].value is use.node)
            elif isinstance(func, cst.Attribute):
                found = found or (func.value is use.node and func.attr.value in _OVERWRITES)
            name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
            found = found or (name in _LAYOUT_OF_ARGUMENT and bool(node.args) and node.args[0].value is use.node)

    stmt.visit(Find())
    return found


def declared_class(flow: FunctionFlow, receiver: cst.BaseExpression, before: int) -> str:
    """The class a receiver is declared or built as: `actor: Actor` among the parameters, or
    `actor = Actor(cfg)`; "" when neither says."""
    if not isinstance(receiver, cst.Name):
        return ""
    scope = flow.scope
    if scope is not None and isinstance(scope.node, cst.FunctionDef):
        for param in (*scope.node.params.params, *scope.node.params.kwonly_params):
            if param.name.value == receiver.value and param.annotation is not None:
                return dotted(param.annotation.annotation).rpartition(".")[2]
    bind = last_bind(flow, receiver.value, before)
    if bind is not None and isinstance(bind.expr, cst.Call):
        built = dotted(bind.expr.func).rpartition(".")[2]
        return built if built[:1].isupper() else ""
    return ""
