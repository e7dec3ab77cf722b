"""What the alias-mutation rules share."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import ClassVar

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import Bind, FunctionFlow, Use, Write
from review_copies.analysis.guesses import COMMENT
from review_copies.analysis.parse import is_test_path
from review_copies.analysis.queries.aliasing import AliasPair, alias_pairs, last_bind, name_of, reads_after, reads_layout_only
from review_copies.analysis.queries.autograd import saved_before
from review_copies.analysis.queries.callers import caller_keeps_argument, passed, position_of
from review_copies.analysis.queries.intent import checks_the_write, deliberate_write, gathered_per_call, optimizer_method, reset_before_use, sets_its_data, state_like, write_only
from review_copies.analysis.semantics import api
from review_copies.analysis.signature import signature_of
from review_copies.analysis.syntax import code_of, dotted, short_code
from review_copies.analysis.values import Kind, Value
from review_copies.index.calls import reaching, relied_on
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import attribute_source, copy_at_binding, write_fix
from review_copies.rules.base import Hit, Rule


def read_lines(reads: tuple) -> str:
    """`line 7` / `lines 7, 9, 12`: where a name is read again, for messages."""
    lines = sorted({u.line for u in reads})
    return f"line {lines[0]}" if len(lines) == 1 else f"lines {', '.join(map(str, lines[:3]))}"


class WriteThroughAlias(Rule):
    """Shared logic: a write through a name made from another, which is read afterwards."""

    VIAS: ClassVar[frozenset[str]] = frozenset()
    category = Category.ALIAS_MUTATION
    severity = Severity.WARNING
    recipes = ("alias", "input-mutation")

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if optimizer_method(flow):
            return  # `grad = p.grad.data; grad.add_(p.data, alpha=wd)` in a step: updating those is the class's job
        for write in flow.of(Write):
            if deliberate_write(write) or write.op == "out=" or saved_before(flow, write) is not None:
                continue  # (out= writes into a chosen buffer on purpose; a saved tensor is RC201's)
            if write.op.strip(".()") in api.SHAPE_ONLY_INPLACE:
                continue  # `y.resize_(shape)` changes only `y`'s shape or storage: a view of its memory keeps its values
            for pair in alias_pairs(flow, write):
                if pair.holder in flow.params:
                    continue  # the caller's tensor: RC102
                if pair.writer_bind is not None and pair.holder_bind is not None and pair.writer_bind.stmt is pair.holder_bind.stmt:
                    continue  # `d = r = torch.zeros(n)`: one buffer under two names, on purpose
                if pair.writer_is_alias:
                    if write.target.via not in self.VIAS or not self.accepts(flow, pair, write.target) or written_back(flow, pair):
                        continue
                    if pair.writer_bind is not None and pair.writer_bind.expr is not None and flow.value(pair.writer_bind.expr).via not in self.VIAS:
                        continue  # `v = out` then `v = v.narrow(...)` in a loop: what reaches the write is the view
                    if pair.holder_bind is not None and _a_new_buffer(pair.holder_bind.expr) and _a_region(write, pair.writer_bind):
                        continue  # `out = torch.zeros(...)`, filled block by block through `out.reshape(...)[i] = v`
                    if pair.writer and not reads_after(flow, write, pair.writer, write.target.roots):
                        continue  # the alias is never read again: the write is meant for what it aliases (AWQ normalises through a grouped view)
                    if is_test_path(flow.file.path) and pair.reads and all(checks_the_write(read) for read in pair.reads):
                        continue  # `td_set = td0`, `td_set.zero_()`, `assert (td0 == 0).all()`: the test checks the write reached it
                    fix = write_fix(write, pair.writer_bind, write.target.kind is Kind.NDARRAY)
                    yield Hit(write.node, self.message(pair), fix, anchors=self.anchors(pair))
                    break
                bind = pair.holder_bind
                if bind is None or bind.expr is None or attribute_source(bind.expr) or pair.holder_value.via not in self.VIAS:
                    continue  # module state kept by reference is a stale snapshot (RC155)
                made = flow.value(bind.expr)
                if made.fresh and not made.via:
                    continue  # `out = torch.zeros(n)` filled through a view of it: a new buffer, not a copy that failed
                if not self.accepts(flow, pair, pair.holder_value):
                    continue
                yield Hit(write.node, self.reverse_message(pair), copy_at_binding(bind, pair.holder_value.kind is Kind.NDARRAY), anchors=(bind.node,))
                break

    def accepts(self, flow: FunctionFlow, pair: AliasPair, alias: Value) -> bool:
        return alias.certain

    def reverse_message(self, pair: AliasPair) -> str:
        bind = pair.holder_bind
        made = f"`{pair.holder} = {short_code(bind.expr)}` (line {bind.line})" if bind is not None and bind.expr is not None else f"`{pair.holder}`"
        return (
            f"{made} does not copy: `{write_text(pair.write)}` writes in place into that same memory through `{pair.writer}`, so "
            f"`{pair.holder}` read at {read_lines(pair.reads)} sees the new values, not the ones it was meant to keep. Copy with `.clone()`."
        )

    def anchors(self, pair: AliasPair) -> tuple[cst.CSTNode, ...]:
        return (pair.writer_bind.node,) if pair.writer_bind is not None else ()

    def message(self, pair: AliasPair) -> str:
        raise NotImplementedError

    @staticmethod
    def bind_text(pair: AliasPair) -> str:
        bind = pair.writer_bind
        return f"`{pair.writer} = {short_code(bind.expr)}` (line {bind.line})" if bind is not None and bind.expr is not None else f"`{pair.writer}`"


# Factories of a buffer whose contents are a constant or undefined: made to be written into.
_BUFFER_FACTORIES = frozenset("zeros empty full ones zeros_like empty_like full_like ones_like new_zeros new_empty new_full new_ones".split())


# Calls that move or relabel a new buffer without filling it: `torch.empty(n).to(device).detach()`.
_PLACING = frozenset("to cuda cpu detach contiguous requires_grad_ float half double bfloat16 pin_memory".split())


def _a_new_buffer(expr: cst.BaseExpression | None) -> bool:
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _PLACING:
        expr = expr.func.value
    return isinstance(expr, cst.Call) and dotted(expr.func).rpartition(".")[2] in _BUFFER_FACTORIES


# In-place ops that write where an index tensor says: accumulating into a new buffer
# (`flat.scatter_add_(0, idx, contrib)`), as `v[i] = x` fills it.
_INDEXED_WRITES = frozenset("scatter_add_ scatter_ scatter_reduce_ index_add_ index_put_ index_copy_ index_fill_ index_reduce_ put_ masked_scatter_".split())


def _a_region(write: Write, writer_bind: Bind | None) -> bool:
    """The write fills a part of the buffer (`v[i] = x`, `v[i].copy_(x)`, `v.scatter_add_(0,
    idx, x)`, or all of `v = buf[a:b]`), not all of it (`v += 1` with `v = buf`)."""
    node = write.node
    if isinstance(node, cst.AssignTarget | cst.Subscript) or write.op.strip(".()") in _INDEXED_WRITES:
        return True
    if writer_bind is not None and isinstance(writer_bind.expr, cst.Subscript):
        return True
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and isinstance(node.func.value, cst.Subscript)


def written_back(flow: FunctionFlow, pair: AliasPair) -> bool:
    """`b = m.bias.data; b.add_(x); m.bias.data = b`: the alias is assigned back to what it
    was made from, so changing that tensor is the point (fusing BN into a layer)."""
    return any(
        bind.index > pair.write.index and isinstance(bind.expr, cst.Name) and bind.expr.value == pair.writer and (bind.name == pair.holder or bind.name.startswith(pair.holder + "."))
        for bind in flow.of(Bind)
    )


def write_text(write: Write) -> str:
    """The statement that writes, for messages."""
    return short_code(write.stmt or write.node)


def callers_in_repository_drop(flow: FunctionFlow, arg: str) -> bool:
    """The repository's index knows every call of this function by name, in any file, and
    none of them reads again what it passed for `arg`: the write is invisible to callers."""
    scope = flow.scope
    if flow.index is None or scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    # An instance's calls (`batch.chooser(logits)`) are its class's `__call__`'s.
    cls = scope.class_node.name.value if scope.name == "__call__" and scope.class_node is not None else None
    if cls:
        return flow.index.instance_callers_drop(cls, position_of(scope, arg), arg, signature_of(scope.node, scope.takes_self)) is True
    return flow.index.callers_drop(scope.name, position_of(scope, arg), arg, signature_of(scope.node, scope.takes_self), owner=_owner(flow)) is True


def callers_rely_on_the_write(flow: FunctionFlow, arg: str) -> bool:
    """A call somewhere in the repository throws the result away and reads again what it
    passed for `arg` (`ops.scale_boxes(shape, bbox, ...)`, then `bbox`): the repository uses
    the function for what it writes, so the write is its contract, not a side effect."""
    scope = flow.scope
    if flow.index is None or scope is None or not isinstance(scope.node, cst.FunctionDef) or scope.name == "__call__":
        return False
    return relied_on(flow.index, scope.name, position_of(scope, arg), arg, signature_of(scope.node, scope.takes_self), reaching(flow.index, _owner(flow)))


def callers_fill_it_too(flow: FunctionFlow, arg: str) -> bool:
    """arc-test-time-adaptation's tokenizer: `_encode_sequence(task, encoded_sequence,
    attention)` sets `attention[i][j] = True` and hands its own `attention` on to
    `_encode_pair`, which sets more of it and hands it on to `_encode_grid`. Every call in the
    file passes a parameter of the calling function that the caller writes into itself: the
    tensor is a buffer the chain fills together, each function its part. Whether the first
    caller's caller expects that is asked of the first caller, once."""
    given = dict(passed(flow, arg))
    sites = {call for call, value in given.items() if isinstance(value, cst.Name)}
    if not sites or len(sites) != len(given):
        return False
    covered: set[cst.Call] = set()

    class _Callers(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            params = {p.name.value for p in (*node.params.params, *node.params.kwonly_params, *node.params.posonly_params)}
            calls = [c for c in _calls_in(node) if c in sites]
            if calls:
                written = _written_in_place(node) & params
                covered.update(c for c in calls if code_of(given[c]) in written)

    flow.file.module.visit(_Callers())
    return covered == sites


def _calls_in(node: cst.FunctionDef) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            found.append(call)

    node.body.visit(_Calls())
    return found


def _written_in_place(node: cst.FunctionDef) -> set[str]:
    """Names the function writes into through an item (`a[i][j] = v`, `a[i] += v`) or an
    in-place method (`a.fill_(0)`, `a.diagonal()[:n] = True`)."""
    names: set[str] = set()

    def root(expr: cst.BaseExpression) -> str | None:
        while isinstance(expr, (cst.Subscript, cst.Call, cst.Attribute)):
            expr = expr.value if isinstance(expr, (cst.Subscript, cst.Attribute)) else expr.func
        return expr.value if isinstance(expr, cst.Name) else None

    class _Writes(cst.CSTVisitor):
        def visit_Assign(self, stmt: cst.Assign) -> None:
            names.update(r for t in stmt.targets if isinstance(t.target, cst.Subscript) and (r := root(t.target)))

        def visit_AugAssign(self, stmt: cst.AugAssign) -> None:
            if isinstance(stmt.target, cst.Subscript) and (r := root(stmt.target)):
                names.add(r)

        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Attribute) and api.is_inplace_method(func.attr.value) and (r := root(func.value)):
                names.add(r)

    node.body.visit(_Writes())
    return names


def caller_reading_again(flow: FunctionFlow, arg: str) -> str | None:
    """`path:line`, where a call of this function passes a name for `arg` and reads that
    name again afterwards (a caller outside the tests first), for messages; None when the
    index knows none (or the function is an instance's `__call__`)."""
    scope = flow.scope
    if flow.index is None or scope is None or not isinstance(scope.node, cst.FunctionDef) or scope.name == "__call__":
        return None
    found = flow.index.caller_reading_again(scope.name, position_of(scope, arg), arg, signature_of(scope.node, scope.takes_self), owner=_owner(flow))
    return f"`{found[0]}:{found[1]}` passes `{found[2]}` and reads it again" if found is not None else None


def _owner(flow: FunctionFlow) -> tuple[str, str] | None:
    """The method's file and class, whose own `super().name(...)` calls reach a base class."""
    scope = flow.scope
    return (flow.file.path, scope.class_node.name.value) if scope is not None and scope.class_node is not None else None


# `.div_(255)`, `/= 255.0`, `.mul_(1 / 255)`: 8-bit pixel values scaled into [0, 1].
_PIXEL_SCALING = re.compile(r"(\.div_\(\s*|/=\s*|\.mul_\(\s*1\.?0*\s*/\s*|\*=\s*1\.?0*\s*/\s*)255(\.0*)?\b")
# The file makes 8-bit data (`dtype=torch.uint8`, `.byte()`, `np.uint8`).
_UINT8 = re.compile(r"\buint8\b|\.byte\(\)")
# A conversion to float64 (`.double()`, `.to(torch.float64)`, `dtype=torch.double`).
_TO_FLOAT64 = re.compile(r"\.double\(\)|\bfloat64\b|\btorch\.double\b")


def converted_from_another_dtype(flow: FunctionFlow, write: Write) -> bool:
    """The write goes through a dtype conversion that copies in every case the code is written
    for: the converted tensor is scaled by 1/255 in a file that makes 8-bit data (the argument
    holds uint8 pixels, and `.float()` of those is a new tensor; the same code fed float
    images is the bug), or the conversion is to float64 (activations and pixels reach it in
    another dtype; rotary tables built in float64 are built, not passed). The alias only
    exists when the conversion returns its input, which these never do."""
    stmt = write.stmt or write.node
    writer = name_of(write.target_node)
    bind = last_bind(flow, writer, write.index) if writer else None
    made = code_of(bind.expr) if bind is not None and bind.expr is not None else code_of(write.target_node)
    # (In code, not comments: `.float()  # uint8 to fp16/32` is what the author assumes of the
    # input, and a float tensor handed in is the bug.)
    pixels = _PIXEL_SCALING.search(code_of(stmt)) is not None and _UINT8.search(COMMENT.sub("", flow.file.text)) is not None
    return pixels or _TO_FLOAT64.search(made) is not None


def into_module(flow: FunctionFlow, write: Write, reported: set[str]) -> Iterator[Hit]:
    """A name bound to a parameter of a module argument (`w = model.fc.weight.data`) and
    written in place, while a caller in this file goes on using that module after taking
    the result: the function reads as if it worked on a copy, and the model is changed."""
    if write.target.via not in ("data", "detach", "") or not write.target.certain:
        return
    owners = sorted(
        p for p in flow.params if flow.params[p].kind is Kind.MODULE and any(roots.in_module(r, p) for r in write.target.roots)
    )
    if not owners or owners[0] in reported or not caller_keeps_argument(flow, owners[0]):
        return
    writer = name_of(write.target_node)
    bind = last_bind(flow, writer, write.index) if writer else None
    if bind is None or bind.expr is None:
        return  # `model.fc.weight.data.mul_(2)` says what it does; only an alias reads like a copy
    module = owners[0]
    reported.add(module)
    where = f"`{flow.scope.name}`" if flow.scope else "this function"
    message = (
        f"`{short_code(write.stmt or write.node)}` writes in place into a parameter of the argument `{module}` "
        f"(`{writer}` shares its memory: {short_code(bind.expr)}): the caller's model is changed while {where} "
        f"returns a result, and this file goes on using `{module}` after the call. Work on a copy."
    )
    yield Hit(write.node, message, copy_at_binding(bind, False), anchors=(bind.node,))


def read_after_through_alias(flow: FunctionFlow, write: Write, arg: str, writer: str) -> bool:
    """`noisy = clean; noisy.add_(n); ...; mse(pred, clean)`: the function itself reads the
    argument after writing it under another name, so the hazard is inside it, whoever calls
    (not where it reads only the shape: `return flat.view(grid.shape)`). Written through an
    expression of the argument itself (`x[i:j].mul_(lam)`), the function knows what it
    writes into. A read after the name was bound anew to other memory (`avg =
    avg.float().lerp(g, b)` before `stored.copy_(avg)`) reads that, not the argument."""
    return bool(writer) and writer != arg and any(isinstance(e, Use) and e.name == arg and not reads_layout_only(e) and _still_the_argument(flow, e, arg) for e in flow.after(write))


def _still_the_argument(flow: FunctionFlow, use: Use, arg: str) -> bool:
    bind = last_bind(flow, arg, use.index, reaching=use)
    return bind is None or any(roots.is_argument(r, arg) for r in bind.value.roots)


# Whole-tensor fills: the old values are thrown away, not transformed (a token buffer refilled
# at each step), so the argument is written to be filled, as by `copy_`.
_WHOLE_FILLS = frozenset((".fill_()", ".zero_()"))


def fills_the_argument(write: Write, writer: str, arg: str) -> bool:
    """`dst.copy_(src)`, `dst[:, :n].copy_(src)`, `holder.data.copy_(src)`, `buf.data.fill_(c)`:
    the argument itself (or its `.data`) is filled, not transformed; filling the caller's
    tensor is the point. A part filled with a constant (`ids[:, :n].fill_(pad)`) is not: it
    edits the caller's values."""
    if not write.target.certain or not (writer == arg or writer.startswith(f"{arg}.")):
        return False
    if write.op == ".copy_()":
        return write.target.via in ("", "view", "data")
    return write.op in _WHOLE_FILLS and write.target.via in ("", "data")


def forward_input(flow: FunctionFlow, param: str) -> bool:
    """The first input of `forward` in a class built on a base from another package
    (`BaseModule`, `LightningModule`): a module's input, the previous layer's output, which is
    RC204's to judge even when the file cannot show that the base is an `nn.Module`. Its other
    arguments (labels, masks the caller passes in) stay this rule's."""
    scope = flow.scope
    if scope is None or scope.name != "forward" or scope.class_node is None or not scope.class_node.bases or not isinstance(scope.node, cst.FunctionDef):
        return False
    positional = [p.name.value for p in scope.node.params.params]
    return len(positional) > 1 and positional[1] == param


def meant_for_the_caller(flow: FunctionFlow, param: str) -> bool:
    """A parameter whose tensor the caller still owns: not state or an output to fill
    (by its name, by only being written, by being cleared first, by having its `.data` set),
    not forward's input."""
    return (
        not state_like(param)
        and not forward_input(flow, param)
        and not write_only(flow, param)
        and not reset_before_use(flow, param)
        and not sets_its_data(flow, param)
        and not gathered_per_call(flow, param)
    )
