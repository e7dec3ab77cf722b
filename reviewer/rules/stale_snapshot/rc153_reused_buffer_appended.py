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
from review_copies.analysis.syntax import bound_names, short_code
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

    ## Known problems
    A loop that writes and keeps only the row its own counter picks (`tokens[k, :n] = ...`,
    `kept.append(tokens[k, a:n])`) is left alone: no later iteration writes that row. A row
    picked by anything else (`tokens[k + 1]`, a counter the loop rebinds) is reported.
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


            def graduated_assignment(A, W, U, m_indices, n_univ: int, num_graphs: int, max_iter: int, sinkhorn):
                for i in range(max_iter):
                    V = torch.mm(A, U) + torch.mm(W, U)
                    V /= num_graphs
                    V_list = []
                    m_start = 0
                    for m_end in m_indices:
                        V_list.append(V[m_start:m_end, :n_univ])
                        m_start = m_end
                    U = sinkhorn(torch.stack(V_list, dim=0))
                return U
            """,
            "`V` is computed afresh in each pass of the outer loop before it is scaled in place and sliced into a list made in that pass (ThinkMatch's graduated assignment)",
        ),
        Valid(
            """
            import torch
            def continuation_tokens(input_tokens, context_lengths, total_len):
                tokens = torch.zeros((len(input_tokens), total_len)).long()
                cont_tokens = []
                for k, t in enumerate(input_tokens):
                    num_token = min(total_len, len(t))
                    tokens[k, :num_token] = torch.tensor(t[-num_token:]).long()
                    cont_tokens.append(tokens[k, context_lengths[k]:num_token])
                return tokens, cont_tokens
            """,
            "each iteration writes and keeps its own row `tokens[k]`: no later iteration writes the rows kept before (opencompass's llama2 wrapper)",
        ),
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
        Invalid(
            """
            import torch
            def prefixes(input_tokens, total_len):
                tokens = torch.zeros((len(input_tokens), total_len)).long()
                kept = []
                for k, t in enumerate(input_tokens):
                    tokens[k, :len(t)] = torch.tensor(t).long()
                    kept.append(tokens[:, :len(t)])
                return kept
            """,
            line=7,
            fix="""
            import torch
            def prefixes(input_tokens, total_len):
                tokens = torch.zeros((len(input_tokens), total_len)).long()
                kept = []
                for k, t in enumerate(input_tokens):
                    tokens[k, :len(t)] = torch.tensor(t).long()
                    kept.append(tokens[:, :len(t)].clone())
                return kept
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
            writes = [
                w
                for w in flow.of(Write)
                if set(w.loops) & set(store.loops) and overlaps(w.target.roots, value.roots) and not deliberate_write(w) and _across_iterations(flow, store, w, stored)
            ]
            if not writes or _own_row_each_time(flow, store, writes, loop):
                continue
            message = (
                f"`{stored}` is one tensor made before the loop at line {loop.start} and rewritten in place every iteration "
                f"(`{short_code(writes[0].stmt or writes[0].node)}`, line {writes[0].line}); `{short_code(store.node)}` stores that same "
                f"tensor each time, so every entry of `{store.container}` ends up with the last iteration's values. Store `{stored}.clone()`."
            )
            yield Hit(store.node, message, (store.value_node, chain(atom(store.value_node), "clone")))


def _across_iterations(flow: FunctionFlow, store: Store, write: Write, stored: str) -> bool:
    """Does the write reach entries kept in earlier passes? In the innermost loop around both,
    neither the stored name nor the list may be bound anew: ThinkMatch's graduated assignment
    computes `V` afresh in each pass of its outer loop, scales it in place, then slices it into
    a list also made in that pass; every entry is a slice of that pass's `V`."""
    common = [n for n in store.loops if n in write.loops]
    if not common:
        return False
    inner = flow.loops[common[-1]]
    return not any(b.name in (stored, store.container) and inner.start <= b.line <= inner.end for b in flow.of(Bind))


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


def _own_row_each_time(flow: FunctionFlow, store: Store, writes: list[Write], loop: Loop) -> bool:
    """`tokens[k, :n] = ...` and `kept.append(tokens[k, a:n])` with `k` the loop's own counter:
    each iteration writes and keeps a row of its own, which no later iteration writes."""
    if not isinstance(loop.node, cst.For):
        return False
    counters = frozenset(bound_names(loop.node.target)) - {b.name for b in flow.of(Bind) if loop.start < b.line <= loop.end}
    row = _first_index(store.value_node)
    return row is not None and row in counters and all(_first_index(_written(w)) == row for w in writes)


def _written(write: Write) -> cst.BaseExpression | None:
    """What the statement writes through: `tokens[k, :n]` of `tokens[k, :n] = v`, `buf[k] += v`
    or `buf[k].copy_(v)`."""
    stmt = write.stmt
    if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1:
        return stmt.targets[0].target
    if isinstance(stmt, cst.AugAssign):
        return stmt.target
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call) and isinstance(stmt.value.func, cst.Attribute):
        return stmt.value.func.value
    return None


def _first_index(node: cst.BaseExpression | None) -> str | None:
    """`k` of `buf[k]` or `buf[k, :n]`: the name that picks the first dimension."""
    if not isinstance(node, cst.Subscript) or not isinstance(node.slice[0].slice, cst.Index):
        return None
    first = node.slice[0].slice.value
    return first.value if isinstance(first, cst.Name) else None


def _made_before(flow: FunctionFlow, name: str, line: int) -> bool:
    """One tensor bound before the loop and never again: not a container of tensors."""
    binds = [b for b in flow.of(Bind) if b.name == name]
    return bool(binds) and all(b.line < line and b.value.kind not in _CONTAINERS for b in binds)


_CONTAINERS = frozenset((Kind.DICT, Kind.LIST, Kind.TUPLE, Kind.STATE_DICT, Kind.PARAMETER_LIST))
