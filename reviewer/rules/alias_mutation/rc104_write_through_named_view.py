"""RC104 write-through-named-view."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.events import Bind, FunctionFlow, Write
from review_copies.analysis.queries.aliasing import AliasPair, name_of
from review_copies.analysis.syntax import call_method_name, code_of
from review_copies.analysis.values import Value
from review_copies.rules._common import attribute_source
from review_copies.rules.alias_mutation.helpers import WriteThroughAlias, read_lines, write_text
from review_copies.rules.base import Invalid, Valid


class WriteThroughNamedView(WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through a view (`a[1:]`, `a.view(...)`, `a.t()`, `a.expand()`,
    `a.narrow()`...) held in its own name while the base tensor is read again afterwards
    and both are used as separate values.

    ## Why is this bad?
    Basic indexing and view methods never copy: the view and its base share memory, so
    writing through the view rewrites the base. When the code goes on to use both names,
    it almost always expects the base to be unchanged.

    ## Example
    ```python
    def boosted(self):
        t = self.table
        head = t[:2]
        head *= 10
        return head.sum(), t.sum()   # self.table's first two entries were scaled too
    ```

    ## Use instead
    ```python
    def boosted(self):
        t = self.table
        head = t[:2].clone()
        head *= 10
        return head.sum(), t.sum()
    ```

    ## Fix safety
    The fix copies the view; the base keeps its values. Writes into a freshly allocated
    buffer through its views (filling it by parts), or into any tensor the function made
    itself, are not reported: only views of state held elsewhere.

    ## Known problems
    Not reported when the name written through is never read again: the write can then only
    be meant for the tensor it shares memory with (normalising a tensor in groups through a
    reshaped view of it).
    """

    code = "RC104"
    name = "write-through-named-view"
    prefilter = ("[", "view", "narrow", "select", "expand", "transpose", "permute", "squeeze", "unbind", "split", "chunk", ".t(", ".T")
    VIAS = frozenset(("view",))

    VALID = (
        Valid(
            """
            import torch
            def f(parts: list[torch.Tensor]):
                out = torch.empty(4)
                head = out[:2]
                head.copy_(parts[0])
                return out
            """,
            "filling a new buffer through its views",
        ),
        Valid(
            """
            import torch
            def f():
                t = torch.ones(4)
                head = t[:2]
                head *= 10
                return t
            """,
            "the write-through is the point: only the base is used afterwards",
        ),
        Valid(
            """
            import pickle
            import torch
            import torch.distributed as dist
            def all_gather_list(data, rank: int, world_size: int, max_size: int = 16384):
                if not hasattr(all_gather_list, "_buffer"):
                    all_gather_list._buffer = torch.cuda.ByteTensor(max_size * world_size)
                buffer = all_gather_list._buffer
                buffer.zero_()
                enc = pickle.dumps(data)
                buffer_rank = buffer[rank * max_size : (rank + 1) * max_size]
                buffer_rank[0] = len(enc) // 255
                buffer_rank[1] = len(enc) % 255
                dist.all_reduce(buffer)
                return [bytes(buffer[i * max_size : (i + 1) * max_size].tolist()) for i in range(world_size)]
            """,
            "a cached scratch buffer wiped by this call before its slot is filled: nobody reads its old values (fairseq)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            class Bank:
                def __init__(self):
                    self.table = torch.ones(4)
                def boosted(self):
                    t = self.table
                    head = t[:2]
                    head *= 10
                    return head.sum(), t.sum()
            """,
            line=8,
            fix="""
            import torch
            class Bank:
                def __init__(self):
                    self.table = torch.ones(4)
                def boosted(self):
                    t = self.table
                    head = t[:2].clone()
                    head *= 10
                    return head.sum(), t.sum()
            """,
        ),
    )

    def accepts(self, flow: FunctionFlow, pair: AliasPair, alias: Value) -> bool:
        if not alias.certain or pair.holder_bind is None or pair.holder_bind.expr is None:
            return False
        # Writing through views of a tensor the function made itself (a buffer filled by parts,
        # rows of a score matrix) is how such tensors are built: only views of state held
        # elsewhere (`t = self.table`) are reported.
        if not attribute_source(pair.holder_bind.expr) or _is_buffer(pair.holder_bind) or _cleared_first(flow, pair):
            return False
        # Both names are used as values after the write: the view is not just a window.
        return any(u.name == pair.writer for u in flow.later(pair.write) if hasattr(u, "name") and type(u).__name__ == "Use")

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{write_text(pair.write)}` writes in place through {self.bind_text(pair)}, a view that shares memory with "
            f"`{pair.holder}`, so `{pair.holder}` changes too and is read again at {read_lines(pair.reads)}. "
            "Clone the view if the base must keep its values."
        )


_BUFFER_FACTORIES = ("torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like")


def _is_buffer(bind: Bind) -> bool:
    """A tensor made only to be filled (torch.empty/zeros/..., new_*)."""
    expr = bind.expr
    if not isinstance(expr, cst.Call):
        return False
    name = code_of(expr.func)
    return any(name.endswith(f.split(".", 1)[1]) for f in _BUFFER_FACTORIES) or (call_method_name(expr) or "").startswith("new_")


def _cleared_first(flow: FunctionFlow, pair: AliasPair) -> bool:
    """`buffer = all_gather_list._buffer; buffer.zero_()`, then `buffer_rank = buffer[a:b]`
    filled in place: a cached scratch buffer this call wipes before filling it by parts,
    whose old values nobody reads."""
    return any(
        isinstance(e, Write)
        and e.index < pair.write.index
        and name_of(e.target_node) == pair.holder
        and e.op.strip(".()") in _CLEARS
        and not e.exclusive_with(pair.write)
        and set(e.loops) <= set(pair.write.loops)
        for e in flow.events
    )


_CLEARS = frozenset(("zero_", "fill_"))
