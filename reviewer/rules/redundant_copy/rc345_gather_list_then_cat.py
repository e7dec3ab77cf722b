"""RC345 gather-list-then-cat."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow
from review_copies.analysis.queries.aliasing import last_bind, name_of
from review_copies.analysis.queries.callers import passed
from review_copies.analysis.syntax import code_of, dotted, names_in, short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_LEGACY_CONSTRUCTORS = frozenset(("Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor"))
_KEEPS_SIZE = frozenset({"cuda", "cpu", "to", "contiguous", "int", "long", "float", "double", "half", "bfloat16"})


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
            def gather_embeddings(input: torch.Tensor, seqlens_on_cp_ranks, cp_group):
                outputs = []
                for i in range(len(seqlens_on_cp_ranks)):
                    o = torch.zeros((seqlens_on_cp_ranks[i].sum(), *input.shape[1:]), device=input.device, dtype=input.dtype)
                    outputs.append(o)
                torch.distributed.all_gather(outputs, input, group=cp_group)
                return torch.cat(outputs, dim=0)
            """,
            "each rank's piece has its own length: `all_gather_into_tensor` takes only equal pieces",
        ),
        Valid(
            """
            import torch
            from torch import distributed
            def all_gather_sizes(x, dim):
                size = torch.tensor(x.shape[dim], dtype=torch.long, device=x.device)
                all_sizes = [torch.empty_like(size) for _ in range(distributed.get_world_size())]
                distributed.all_gather(all_sizes, size)
                return torch.stack(all_sizes)
            """,
            "one size per rank: the stack copies a few integers",
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            def gather_lengths(labels: torch.Tensor, sp_degree: int, sp_group):
                bs, shard_seqlen = labels.shape
                lengths = [torch.zeros(1, dtype=torch.int64, device=labels.device) for _ in range(sp_degree)]
                dist.all_gather(lengths, torch.tensor(shard_seqlen, device=labels.device), group=sp_group)
                return torch.cat(lengths, dim=0)
            """,
            "each rank's piece is one number (`torch.zeros(1)`): the cat copies a few integers",
        ),
        Valid(
            """
            import torch
            def all_gather_others(x: torch.Tensor):
                world_size = torch.distributed.get_world_size()
                rank = torch.distributed.get_rank()
                x_list = [torch.ones_like(x) for _ in range(world_size)]
                torch.distributed.all_gather(x_list, x.contiguous())
                x_list.pop(rank)
                return torch.cat(x_list, dim=0)
            """,
            "the own rank's piece is dropped before the `cat`: it joins the others, not what was gathered",
        ),
        Valid(
            """
            import torch
            def gather(tensor: torch.Tensor, backend: str, world: int):
                gather_op = torch.distributed.all_gather_into_tensor
                def gather_one(t: torch.Tensor):
                    if backend != "gloo":
                        out = torch.empty(world * t.numel(), dtype=t.dtype)
                        gather_op(out, t)
                        return out.view(-1, *t.shape[1:])
                    parts = [torch.empty_like(t) for _ in range(world)]
                    torch.distributed.all_gather(parts, t)
                    return torch.cat(parts, dim=0)
                return gather_one(tensor)
            """,
            "gloo has no `all_gather_into_tensor`: the list form is the fallback of a function that uses it",
        ),
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
        Valid(
            """
            import torch
            def pad_to_longest(input_: torch.Tensor, rank: int, world: int, group):
                first_dim = torch.tensor([[input_.size()[0]]], device=torch.cuda.current_device())
                lengths = [torch.empty_like(first_dim) for _ in range(world)]
                torch.distributed.all_gather(lengths, first_dim, group=group)
                return torch.cat(lengths, dim=0).max()
            """,
            "one length per rank, however deep the brackets",
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            def check_loss(loss_fn, batch, world: int, gpu: int):
                def gather_mean(x: torch.Tensor) -> torch.Tensor:
                    parts = [torch.zeros_like(x).cuda(gpu) for _ in range(world)]
                    dist.all_gather(parts, x)
                    return torch.stack(parts).mean()
                loss = loss_fn(batch)
                return gather_mean(torch.Tensor([loss]).cuda(gpu))
            """,
            "the nested helper is called only here, with one number",
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            def gather_lengths(lengths: torch.Tensor, counts, world: int):
                parts = [torch.empty_like(lengths) for _ in range(world)]
                dist.all_gather(parts, lengths)
                for rank, piece in enumerate(parts):
                    parts[rank] = piece[: counts[rank]]
                return torch.cat(parts, dim=0)
            """,
            "each piece is trimmed before the cat: it joins the trimmed pieces, which one gathered tensor would not give",
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            def gather_columns(shard: torch.Tensor, world: int):
                parts = [torch.empty_like(shard) for _ in range(world)]
                dist.all_gather(parts, shard)
                return torch.cat(parts, dim=1)
            """,
            "gathering into one tensor joins along dimension 0: joining along 1 needs a copy anyway",
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
        Invalid(
            """
            import torch
            import torch.distributed as dist
            def gather_all(loss_fn, batch, features: torch.Tensor, world: int):
                def gather(x: torch.Tensor) -> torch.Tensor:
                    parts = [torch.zeros_like(x) for _ in range(world)]
                    dist.all_gather(parts, x)
                    return torch.cat(parts)
                return gather(torch.Tensor([loss_fn(batch)])), gather(features)
            """,
            line=7,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        gathers = [e for e in flow.of(Call) if e.is_any(("torch.distributed.all_gather", "torch.distributed.distributed_c10d.all_gather")) and e.call.args]
        if any(e.is_any(("torch.distributed.all_gather_into_tensor", "torch.distributed.all_gather_single")) for e in flow.of(Call)) or _single_named_around(flow):
            return  # the list form is the fallback of a function that already uses the single collective
        for gather in gathers:
            parts = name_of(gather.call.args[0].value)
            made = last_bind(flow, parts, gather.index) if parts else None
            pieces = made.expr if made is not None else None  # how the list gathered into was made
            if not parts or (len(gather.call.args) > 1 and _one_element(flow, gather.call.args[1].value, gather.index)) or _one_element_pieces(flow, pieces, gather.index):
                continue
            if _sized_per_rank(flow, pieces, parts):
                continue  # pieces of different sizes: the single collective needs equal ones
            set_lines = _pieces_set(flow, parts)
            for event in flow.later(gather):
                if (isinstance(event, Bind) and event.name == parts) or any(gather.line < line < event.line for line in set_lines):
                    break  # the pieces are trimmed or moved before the cat: it joins those, not what was gathered
                if isinstance(event, Call) and event.is_any(("torch.cat", "torch.stack", "torch.concat")) and event.call.args and name_of(event.call.args[0].value) == parts:
                    if not _along_first(event.call):
                        break  # one gathered tensor is joined along dimension 0: any other needs a copy anyway
                    spelled = code_of(gather.call.func)
                    # `dist.all_gather` -> `dist.all_gather_into_tensor`; a bare imported name gets the module's full name.
                    func = spelled.rsplit(".", 1)[0] + ".all_gather_into_tensor" if "." in spelled else "torch.distributed.all_gather_into_tensor"
                    message = (
                        f"`{short_code(gather.node)}` gathers into separate tensors and `{short_code(event.node)}` at line {event.line} copies them "
                        f"all again into one. `{func}(out, ...)` writes straight into one preallocated output."
                    )
                    yield Hit(event.node, message, anchors=(gather.node,))
                    break



def _single_named_around(flow: FunctionFlow) -> bool:
    """The top-level function or class around this one names the single collective
    (`gather_op = torch.distributed.all_gather_into_tensor` outside a nested helper that
    calls `gather_op(...)` in one arm and `all_gather` in the backend's fallback arm)."""
    if flow.scope is None:
        return False
    for stmt in flow.file.module.body:
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            start, end = flow.file.span(stmt)
            if start <= flow.scope.start <= end:
                text = "\n".join(flow.file.lines[start - 1 : end])
                return "all_gather_into_tensor" in text or "_all_gather_base" in text
    return False


def _pieces_set(flow: FunctionFlow, parts: str) -> list[int]:
    """Lines that put a new piece into the list (`parts[i] = piece[:n]`)."""
    node = flow.scope.node if flow.scope is not None else flow.file.module
    found: list[int] = []

    class Find(cst.CSTVisitor):
        def visit_Assign(self, assign: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Subscript) and name_of(t.target.value) == parts for t in assign.targets):
                found.append(flow.file.line_of(assign))

        def visit_Call(self, call: cst.Call) -> None:
            # `parts.pop(rank)`: the cat joins the other ranks' pieces, not what was gathered.
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("pop", "remove", "insert", "append", "extend") and name_of(func.value) == parts:
                found.append(flow.file.line_of(call))

        def visit_Del(self, node: cst.Del) -> None:
            if isinstance(node.target, cst.Subscript) and name_of(node.target.value) == parts:
                found.append(flow.file.line_of(node))

    node.visit(Find())
    return found


def _along_first(call: cst.Call) -> bool:
    """`torch.cat(parts)`, `torch.cat(parts, 0)`, `torch.stack(parts, dim=0)`."""
    dim = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dim"), None)
    positional = [a.value for a in call.args if a.keyword is None]
    if dim is None and len(positional) > 1:
        dim = positional[1]
    return dim is None or (isinstance(dim, cst.Integer) and dim.evaluated_value == 0)


def _one_element(flow: FunctionFlow, expr: cst.BaseExpression, before: int) -> bool:
    """A one-element tensor (`torch.tensor([n])`, `torch.tensor([[n]])`, `torch.Tensor([loss])`,
    `torch.zeros(1)`), as written, bound to a name earlier, or passed for the parameter of a
    nested helper by each of its calls: gathering numbers, whose copy costs nothing."""
    if isinstance(expr, cst.Name):
        bind = last_bind(flow, expr.value, before)
        if bind is None:
            return _nested_calls_pass_one(flow, expr.value)
        expr = bind.expr if bind.expr is not None else expr
    return _one_element_spelled(expr)


def _one_element_pieces(flow: FunctionFlow, expr: cst.BaseExpression | None, before: int) -> bool:
    """The list gathered into, as made (`expr`), holds one-element tensors (`[torch.zeros(1,
    ...) for _ in range(world)]`, `[torch.zeros(1)] * world`, `[torch.empty_like(size) ...]`
    of a one-element `size`): the gather collects a number per rank."""
    if isinstance(expr, cst.ListComp):
        elt = expr.elt
        if isinstance(elt, cst.Call) and dotted(elt.func).rpartition(".")[2] in ("empty_like", "zeros_like", "ones_like") and elt.args:
            return _one_element(flow, elt.args[0].value, before)
        return _one_element_spelled(elt)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        pieces = expr.left if isinstance(expr.left, cst.List) else expr.right
        if isinstance(pieces, cst.List) and len(pieces.elements) == 1:
            return _one_element_spelled(pieces.elements[0].value)
    return False


def _sized_per_rank(flow: FunctionFlow, expr: cst.BaseExpression | None, parts: str) -> bool:
    """The pieces of the list `parts`, made as `expr`, are sized by rank (`[torch.empty(sizes[i],
    d) for i in range(world)]`, or `[]` appended in a loop from a tensor whose shape names the
    loop's variable): the list form is the only all-gather that takes pieces of different sizes."""
    if isinstance(expr, cst.ListComp):
        targets = names_in(expr.for_in.target)
        return bool(targets & names_in(expr.elt))
    if not (isinstance(expr, cst.List) and not expr.elements) or flow.scope is None:
        return False
    found = False

    class Loops(cst.CSTVisitor):
        def visit_For(self, loop: cst.For) -> None:
            nonlocal found
            targets = names_in(loop.target)
            made: dict[str, cst.BaseExpression] = {}

            class Body(cst.CSTVisitor):
                def visit_Assign(self, assign: cst.Assign) -> None:
                    for t in assign.targets:
                        if isinstance(t.target, cst.Name):
                            made[t.target.value] = assign.value

                def visit_Call(self, call: cst.Call) -> None:
                    nonlocal found
                    func = call.func
                    if isinstance(func, cst.Attribute) and func.attr.value == "append" and name_of(func.value) == parts and call.args:
                        piece = call.args[0].value
                        source = made.get(piece.value, piece) if isinstance(piece, cst.Name) else piece
                        found = found or bool(targets & names_in(source))

            loop.body.visit(Body())

    flow.scope.node.visit(Loops())
    return found


def _one_element_spelled(expr: cst.BaseExpression) -> bool:
    # `.cuda()`, `.to(device)`, `.contiguous()`: moved or laid out, still one element.
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _KEEPS_SIZE:
        expr = expr.func.value
    if not isinstance(expr, cst.Call) or not expr.args:
        return False
    name = dotted(expr.func).rpartition(".")[2]
    first = expr.args[0].value
    if name == "tensor" and isinstance(first, (cst.Integer, cst.Float)):
        return True
    if name == "tensor" and _a_size(first):
        return True  # `torch.tensor(x.shape[dim])`, `torch.tensor(len(items))`: one number
    if name == "tensor" or (name in _LEGACY_CONSTRUCTORS and isinstance(first, (cst.List, cst.Tuple))):
        # `[[n]]`: one element at every depth (`torch.Tensor(n)` is n numbers, not one).
        while isinstance(first, (cst.List, cst.Tuple)) and len(first.elements) == 1 and not isinstance(first.elements[0], cst.StarredElement):
            first = first.elements[0].value
        return not isinstance(first, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)) and first is not expr.args[0].value
    if name in ("zeros", "ones", "empty", "full"):
        sizes = [a.value for a in expr.args if a.keyword is None]
        if name == "full":
            sizes = sizes[:1]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.List, cst.Tuple)):
            sizes = [e.value for e in sizes[0].elements]
        return bool(sizes) and all(isinstance(n, cst.Integer) and n.value == "1" for n in sizes)
    return False


def _nested_calls_pass_one(flow: FunctionFlow, param: str) -> bool:
    """`param` belongs to a helper nested in another function, which alone can call it: the
    helper's name is used there only in calls, and each of them passes a one-element tensor
    for `param`."""
    scope = flow.scope
    if scope is None or scope.kind != "function" or not scope.parents or not isinstance(scope.parents[-1], cst.FunctionDef):
        return False
    sites = passed(flow, param)
    helper = scope.name
    mentions = 0

    class Count(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            nonlocal mentions
            mentions += node.value == helper

    scope.parents[-1].visit(Count())
    # The `def`'s own name is one mention; any other that is not a call hands the helper on.
    if not sites or mentions != len(sites) + 1:
        return False
    return all(value is not None and not any(a.star for a in call.args) and _one_element_spelled(value) for call, value in sites)


def _a_size(expr: cst.BaseExpression) -> bool:
    """`x.shape[d]`, `x.size(d)`, `x.numel()`, `len(x)`: an int."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        return all(isinstance(e.slice, cst.Index) for e in expr.slice) and len(expr.slice) == 1
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Name):
            return expr.func.value == "len"
        if isinstance(expr.func, cst.Attribute):
            return (expr.func.attr.value == "size" and len(expr.args) == 1) or (expr.func.attr.value == "numel" and not expr.args)
    return False
