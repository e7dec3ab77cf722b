"""RC153 reused-buffer-appended."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, FunctionFlow, Loop, Store, Write
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.queries.intent import deliberate_write
from review_copies.analysis.queries.loops import loop_of
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.roots import overlaps
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class ReusedBufferAppended(Rule):
    """
    ## What it does
    Finds a tensor allocated once before a loop, written in place inside the loop, and
    appended to a list (or stored in a dict) on each iteration.

    ## Why is this bad?
    The list holds the same tensor N times, not N snapshots: at the end every entry
    shows the last iteration's values.

    ## Example
    ```python
    buf = torch.zeros(4)
    frames = []
    for step in range(n):
        buf.copy_(read_frame(step))
        frames.append(buf)
    ```

    ## Use instead
    ```python
        frames.append(buf.clone())
    ```

    ## Fix safety
    Safe: each entry becomes its own copy of the values at that iteration.
    """

    code = "RC153"
    name = "reused-buffer-appended"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("append", "[", "insert")
    recipes = ("snapshot",)

    VALID = (
        Valid(
            """
            import torch
            def frames(n: int):
                out = []
                for step in range(n):
                    buf = torch.full((4,), float(step))
                    out.append(buf)
                return out
            """,
            "a new tensor each iteration",
        ),
        Valid(
            """
            import torch
            def track(batch: dict, frames: int, boxes):
                valid = torch.zeros(frames, 4)
                for i in range(frames):
                    valid[i, boxes[i]] = 1
                    batch["valid"] = valid
                return valid
            """,
            "one entry under one key, overwritten every iteration: it holds the final values, which is what is meant",
        ),
        Valid(
            """
            import torch
            def metrics(out: dict, names: list, fixed, normalizer):
                out = {k: v.clone() for k, v in out.items()}
                mask = fixed == 0
                for name in names:
                    if name == "forces":
                        out["forces"][mask] = normalizer(out["forces"][mask])
                    out[name] = out[name][mask]
                return out
            """,
            "`out` is a dict of tensors, not one buffer: each key gets its own masked copy",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def frames(n: int):
                buf = torch.zeros(4)
                out = []
                for step in range(n):
                    buf.fill_(step)
                    out.append(buf)
                return out
            """,
            line=7,
            fix="""
            import torch
            def frames(n: int):
                buf = torch.zeros(4)
                out = []
                for step in range(n):
                    buf.fill_(step)
                    out.append(buf.clone())
                return out
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for store in flow.of(Store):
            loop = loop_of(flow, store)
            value = store.value
            if loop is None or store.how not in ("append", "insert", "setitem", "add") or value.kind is not Kind.TENSOR or store.value_node is None:
                continue
            stored = name_of(store.value_node)
            if not stored or not _made_before(flow, stored, loop.start) or _same_entry_each_time(flow, store, loop):
                continue
            writes = [w for w in flow.of(Write) if set(w.loops) & set(store.loops) and overlaps(w.target.roots, value.roots) and not deliberate_write(w)]
            if not writes:
                continue
            message = (
                f"`{stored}` is one tensor made before the loop at line {loop.start} and rewritten in place every iteration "
                f"(`{short_code(writes[0].stmt or writes[0].node)}`, line {writes[0].line}); `{short_code(store.node)}` stores that same "
                f"tensor each time, so every entry of `{store.container}` ends up with the last iteration's values. Store `{stored}.clone()`."
            )
            yield Hit(store.node, message, (store.value_node, chain(atom(store.value_node), "clone")))


def _same_entry_each_time(flow: FunctionFlow, store: Store, loop: Loop) -> bool:
    """`d["k"] = buf` in the loop: one entry, overwritten every iteration, ends up holding the
    tensor with its final values, which is what the last store meant; no entry goes stale."""
    if store.how != "setitem" or not isinstance(store.node, cst.Subscript) or len(store.node.slice) != 1:
        return False
    index = store.node.slice[0].slice
    if not isinstance(index, cst.Index):
        return False
    key = index.value
    if isinstance(key, (cst.SimpleString, cst.Integer)):
        return True
    return isinstance(key, cst.Name) and not any(b.name == key.value and loop.start <= b.line <= loop.end for b in flow.of(Bind))


def _made_before(flow: FunctionFlow, name: str, line: int) -> bool:
    """One tensor bound before the loop and never again: not a container of tensors."""
    binds = [b for b in flow.of(Bind) if b.name == name]
    return bool(binds) and all(b.line < line and b.value.kind not in _CONTAINERS for b in binds)


_CONTAINERS = frozenset((Kind.DICT, Kind.LIST, Kind.TUPLE, Kind.STATE_DICT, Kind.PARAMETER_LIST))
