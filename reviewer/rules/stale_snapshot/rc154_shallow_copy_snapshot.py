"""RC154 shallow-copy-snapshot."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, FunctionFlow, Write
from review_copies.analysis.queries.aliasing import last_bind, name_of
from review_copies.analysis.rewrite import chain
from review_copies.analysis.roots import made_on_line, overlaps
from review_copies.analysis.syntax import call_method_name, dotted, receiver_of, short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.stale_snapshot.helpers import read_after


class ShallowCopySnapshot(Rule):
    """
    ## What it does
    Finds a shallow copy of tensors — `list(tensors)`, `tensors.copy()`, `dict(d)`,
    `copy.copy(t)` — kept as a snapshot while the tensors it holds are changed in place
    and the copy is read afterwards.

    ## Why is this bad?
    A shallow copy copies the container, not the tensors (and `copy.copy(t)` of a tensor
    shares its storage): an in-place update of the originals shows up in the "copy".

    ## Example
    ```python
    before = list(states)
    for s in states:
        s.mul_(decay)
    delta = [a - b for a, b in zip(states, before)]   # all zeros
    ```

    ## Use instead
    ```python
    before = [s.detach().clone() for s in states]
    ```

    ## Fix safety
    Safe: the snapshot holds independent copies of the values at that moment.
    """

    code = "RC154"
    name = "shallow-copy-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("copy", "list(", "dict(")
    recipes = ("snapshot",)

    VALID = (
        Valid(
            """
            import torch
            from torch.distributed import scatter
            def scatter_objects(tensors, sizes, group_size: int, src: int, device):
                parts = list(torch.empty(max(sizes) * group_size, dtype=torch.uint8, device=device).chunk(group_size))
                for part, tensor, size in zip(parts, tensors, sizes):
                    part[:size].copy_(tensor)
                scatter(parts[src], parts, src=src)
                return parts[src]
            """,
            "the chunks of a buffer made on the same line are filled, not kept as a snapshot (Fast-LLM's `scatter_object_list`)",
        ),
        Valid(
            """
            import torch
            from torch import nn
            def load_buffers(sub: nn.Module, tensors: dict, device: torch.device) -> int:
                t_bufs = dict(sub.named_buffers())
                loaded = 0
                for name, source in tensors.items():
                    target = t_bufs.get(name)
                    if target is None:
                        continue
                    target.copy_(source.to(dtype=target.dtype))
                    loaded += 1
                return loaded + len([n for n in t_bufs if t_bufs.get(n) is not None])
            """,
            "the map of the module's live buffers is what the checkpoint is loaded through (GPTQModel)",
        ),
        Valid(
            """
            import torch
            def f(states: list):
                before = [s.detach().clone() for s in states]
                for s in states:
                    s.mul_(0.9)
                return before
            """
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            def gather_with_scale(x, group=None):
                world = dist.get_world_size(group)
                combined = torch.empty(world * (4 + x.numel()), dtype=torch.uint8)
                parts = list(combined.chunk(world))
                mine = parts[dist.get_rank(group)]
                mine[:4].view(torch.float)[0] = x.abs().max()
                dist.all_gather(parts, mine, group=group)
                return parts
            """,
            "the list holds views to be written through: the write goes through one of its own elements",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                states = [torch.ones(2), torch.ones(2)]
                before = list(states)
                for s in states:
                    s.mul_(0.9)
                return [a - b for a, b in zip(states, before)]
            """,
            line=4,
            fix="""
            import torch
            def f():
                states = [torch.ones(2), torch.ones(2)]
                before = [s.detach().clone() for s in states]
                for s in states:
                    s.mul_(0.9)
                return [a - b for a, b in zip(states, before)]
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                states = [torch.ones(2), torch.ones(2)]
                before = list(s for s in states)
                for s in states:
                    s.mul_(0.9)
                return [a - b for a, b in zip(states, before)]
            """,
            line=4,
            fix="""
            import torch
            def f():
                states = [torch.ones(2), torch.ones(2)]
                before = [s.detach().clone() for s in states]
                for s in states:
                    s.mul_(0.9)
                return [a - b for a, b in zip(states, before)]
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            value = bind.value
            if value.via != "shallow-copy" or value.kind is Kind.STATE_DICT or bind.expr is None:
                continue
            element = value.element
            if value.kind is Kind.TENSOR:
                roots = value.roots
            elif element is not None and element.kind is Kind.TENSOR and not element.leaf:
                if _of_new_tensors(bind.expr) or made_on_line(element.roots, bind.line):
                    continue  # `tuple(torch.empty_like(v) for v in inputs)`, `list(torch.empty(n).chunk(k))`: new tensors, made to be filled
                roots = element.roots  # (parameter lists are RC152's)
            else:
                continue
            change = next((w for w in flow.after(bind) if isinstance(w, Write) and overlaps(w.target.roots, roots) and name_of(w.target_node) != bind.name), None)
            if change is None or _taken_from(flow, change, bind.name):
                continue
            read = read_after(flow, bind.name, change, roots, bind)
            if read is None:
                continue
            message = (
                f"`{bind.name} = {short_code(bind.expr)}` copies the container, not the tensors in it: `{short_code(change.stmt or change.node)}` "
                f"at line {change.line} changes them in place, so `{bind.name}` read at line {read.line} sees the new values. "
                "Copy the tensors (`.detach().clone()`)."
            )
            yield Hit(bind.node, message, _shallow_fix(bind.expr, value.kind), anchors=(read.node,))


# Calls that make a new tensor (a comprehension of these builds no copy of another's tensors).
_NEW_TENSOR = frozenset("empty_like zeros_like ones_like full_like rand_like randn_like empty zeros ones full tensor clone".split())


def _of_new_tensors(expr: cst.BaseExpression) -> bool:
    """`tuple(torch.empty_like(v) for v in inputs)`: a container built from a comprehension
    whose every element is a new tensor."""
    if not isinstance(expr, cst.Call) or len(expr.args) != 1:
        return False
    made = expr.args[0].value
    return isinstance(made, (cst.GeneratorExp, cst.ListComp)) and isinstance(made.elt, cst.Call) and dotted(made.elt.func).rpartition(".")[2] in _NEW_TENSOR


def _taken_from(flow: FunctionFlow, write: Write, copy: str) -> bool:
    """Is the write made through an element of the copy itself (`cur = parts[rank]`,
    `parts[0].zero_()`, `buf = bufs.get(name)`)? Then the container holds the live tensors
    on purpose, to be written through (GPTQModel loads a checkpoint into a submodule's
    `dict(named_buffers())` entries)."""
    target = write.target_node
    while isinstance(target, (cst.Subscript, cst.Call, cst.Attribute)):
        if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == copy:
            return True
        target = target.value if not isinstance(target, cst.Call) else target.func
    writer = name_of(target) if isinstance(target, cst.Name) else ""
    bind = last_bind(flow, writer, write.index) if writer and writer != copy else None
    if bind is None or bind.expr is None:
        return False
    entry = bind.expr
    if isinstance(entry, cst.Subscript):
        return name_of(entry.value) == copy
    return isinstance(entry, cst.Call) and call_method_name(entry) == "get" and name_of(receiver_of(entry)) == copy


def _shallow_fix(expr: cst.BaseExpression, kind: Kind) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    if not isinstance(expr, cst.Call):
        return None
    if isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1 and kind is not Kind.DICT:
        source = expr.args[0].value
    elif call_method_name(expr) == "copy" and not expr.args and kind is Kind.LIST:
        source = receiver_of(expr)
    else:
        return None
    if isinstance(source, (cst.GeneratorExp, cst.ListComp)):
        # `tuple(v for v in vs)`: copy each element the comprehension yields, in its own loop.
        copied = source.with_changes(elt=chain(source.elt, "detach", "clone"))
    else:
        s = cst.Name("s")
        copied = cst.GeneratorExp(elt=chain(s, "detach", "clone"), for_in=cst.CompFor(target=s, iter=source))
    if isinstance(expr.func, cst.Name) and expr.func.value == "tuple":
        return expr, expr.with_changes(args=[cst.Arg(copied.with_changes(lpar=[], rpar=[]) if isinstance(copied, cst.GeneratorExp) else copied)])
    return expr, cst.ListComp(elt=copied.elt, for_in=copied.for_in)
