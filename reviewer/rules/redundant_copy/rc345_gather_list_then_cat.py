"""RC345 gather-list-then-cat."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.queries.aliasing import last_bind, name_of
from review_copies.analysis.syntax import code_of, dotted, short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class GatherListThenCat(Rule):
    """
    ## What it does
    Finds `torch.distributed.all_gather(tensor_list, t)` followed by
    `torch.cat(tensor_list)` (or `torch.stack`).

    ## Why is this bad?
    The gather writes world-size separate tensors and `cat` then copies them all again
    into one. `dist.all_gather_into_tensor(out, t)` writes straight into one
    preallocated output: one allocation, no second copy (torch 2.13 names it
    `all_gather_single` and keeps the old name with a FutureWarning).

    ## Example
    ```python
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    full = torch.cat(parts)
    ```

    ## Use instead
    ```python
    full = torch.empty(world * t.shape[0], *t.shape[1:], dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(full, t)
    ```

    ## Fix safety
    No automatic fix (the output must be allocated first); the message says how.
    """

    code = "RC345"
    name = "gather-list-then-cat"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("all_gather",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            import torch.distributed as dist
            def f(t: torch.Tensor, world: int):
                out = torch.empty(world * t.shape[0], dtype=t.dtype)
                dist.all_gather_into_tensor(out, t)
                return out
            """
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            def offsets(size: int, world: int, device):
                sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
                dist.all_gather(sizes, torch.tensor([size], dtype=torch.int64, device=device))
                return torch.cumsum(torch.cat(sizes), dim=0).tolist()
            """,
            "one number per rank: the second copy costs nothing",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            import torch.distributed as dist
            def f(t: torch.Tensor, world: int):
                parts = [torch.empty_like(t) for _ in range(world)]
                dist.all_gather(parts, t)
                return torch.cat(parts)
            """,
            line=6,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        gathers = [e for e in flow.of(Call) if e.is_any(("torch.distributed.all_gather", "torch.distributed.distributed_c10d.all_gather")) and e.call.args]
        if any(e.is_any(("torch.distributed.all_gather_into_tensor", "torch.distributed.all_gather_single")) for e in flow.of(Call)):
            return  # the list form is the fallback of a function that already uses the single collective
        for gather in gathers:
            parts = name_of(gather.call.args[0].value)
            if not parts or (len(gather.call.args) > 1 and _one_element(flow, gather.call.args[1].value, gather.index)):
                continue
            for event in flow.later(gather):
                if isinstance(event, Call) and event.is_any(("torch.cat", "torch.stack", "torch.concat")) and event.call.args and name_of(event.call.args[0].value) == parts:
                    spelled = code_of(gather.call.func)
                    # `dist.all_gather` -> `dist.all_gather_into_tensor`; a bare imported name gets the module's full name.
                    func = spelled.rsplit(".", 1)[0] + ".all_gather_into_tensor" if "." in spelled else "torch.distributed.all_gather_into_tensor"
                    message = (
                        f"`{short_code(gather.node)}` gathers into separate tensors and `{short_code(event.node)}` at line {event.line} copies them "
                        f"all again into one. `{func}(out, ...)` writes straight into one preallocated output."
                    )
                    yield Hit(event.node, message, anchors=(gather.node,))
                    break



def _one_element(flow: FunctionFlow, expr: cst.BaseExpression, before: int) -> bool:
    """A one-element tensor (`torch.tensor([n])`, `torch.tensor(0)`, `torch.zeros(1)`), as
    written or bound to a name earlier: gathering numbers, whose copy costs nothing."""
    if isinstance(expr, cst.Name):
        bind = last_bind(flow, expr.value, before)
        expr = bind.expr if bind is not None and bind.expr is not None else expr
    if not isinstance(expr, cst.Call) or not expr.args:
        return False
    name = dotted(expr.func).rpartition(".")[2]
    first = expr.args[0].value
    if name == "tensor":
        if isinstance(first, (cst.Integer, cst.Float)):
            return True
        return isinstance(first, (cst.List, cst.Tuple)) and len(first.elements) == 1 and not isinstance(first.elements[0].value, (cst.List, cst.Tuple, cst.ListComp))
    if name in ("zeros", "ones", "empty", "full"):
        sizes = [a.value for a in expr.args if a.keyword is None]
        if name == "full":
            sizes = sizes[:1]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.List, cst.Tuple)):
            sizes = [e.value for e in sizes[0].elements]
        return bool(sizes) and all(isinstance(n, cst.Integer) and n.value == "1" for n in sizes)
    return False
