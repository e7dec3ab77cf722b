"""RC341 clone-of-temporary."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow, Write
from review_copies.analysis.syntax import dotted, short_code
from review_copies.analysis.values import Kind, Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.redundant_copy.helpers import new_and_unshared


class CloneOfTemporary(Rule):
    """
    ## What it does
    Finds `.clone()` applied to a tensor that was just created and that nothing else
    refers to: `(a + b).clone()`, `torch.cat(xs).clone()`, `x.sum(0).clone()`.

    ## Why is this bad?
    The temporary is already a new tensor with its own memory; cloning it allocates and
    copies a second time and frees the first. It costs time and peak memory and changes
    nothing.

    ## Example
    ```python
    merged = torch.cat(chunks).clone()
    ```

    ## Use instead
    ```python
    merged = torch.cat(chunks)
    ```

    ## Fix safety
    Safe: the values, dtype, device, layout and gradient flow are the same.

    ## Known problems
    The output of a module that is not one of torch's (`model(x).clone()`) is left: its
    forward may return a view of a larger tensor (a class token `x[:, 0]`), which the clone
    makes compact and contiguous. A full reduction (`x.sum().clone()`) is left too, and so
    is the clone of an op's output that its backward needs (`cdist`, `exp`) when the copy is
    written in place afterwards.
    """

    code = "RC341"
    name = "clone-of-temporary"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone(",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            def check_scaling(scale, b: int, k: int):
                loss = torch.ones((b, k), requires_grad=True).clone()
                grads = []
                loss.register_hook(lambda g: grads.append(g))
                loss.mul_(2.0)
                scale(loss).sum().backward()
                return grads
            """,
            "the clone of a leaf that requires grad is a non-leaf in its graph, written in place after (a leaf would raise): not the same result",
        ),
        Valid(
            """
            import torch
            import torch.distributed as dist
            @torch.no_grad()
            def extract_features(model, data_loader):
                for samples, index in data_loader:
                    feats = model(samples.cuda(non_blocking=True)).clone()
                    feats_all = torch.empty(dist.get_world_size(), feats.size(0), feats.size(1), dtype=feats.dtype, device=feats.device)
                    dist.all_gather(list(feats_all.unbind(0)), feats)
            """,
            "a repository's model may return a view (DINO's `x[:, 0]`): the clone makes it contiguous for `all_gather`",
        ),
        Valid(
            """
            import torch
            def masked_loss(losses: torch.Tensor, loss_mask: torch.Tensor):
                loss = torch.sum(losses.view(-1) * loss_mask)
                num_tokens = loss_mask.sum().clone().detach().to(torch.int)
                return loss, num_tokens
            """,
            "`loss_mask.sum()` is one number: copying it again costs nothing worth a change",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.clone()
            """,
            "x belongs to the caller",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.float().clone()
            """,
            ".float() may return x itself",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x[:2].clone()
            """,
            "a view: the clone is what makes it independent",
        ),
        Valid(
            """
            import torch
            def f(group: dict):
                return torch.as_tensor(scalar_of(group["lr"]), dtype=torch.float32).clone()
            """,
            "as_tensor hands back its argument when that is already a tensor of that dtype",
        ),
        Valid(
            """
            import numpy as np
            import torch
            def load(data):
                train, valid = np.split(data, [90])
                return torch.from_numpy(train).clone(), torch.from_numpy(valid).clone()
            """,
            "from_numpy shares the array's memory: the clone is what makes the tensor its own",
        ),
        Valid(
            """
            import torch
            def snapshot(layer: torch.nn.Linear):
                return layer.weight.data.to_dense().clone(), layer.bias.data.pin_memory().clone()
            """,
            "`to_dense()` of a dense tensor and `pin_memory()` of a pinned one return the tensor itself",
        ),
        Valid(
            """
            import torch
            def regeneralize(adapter, data_tensor: torch.Tensor):
                data = (torch.tensor([5, 8]), 3)
                adapted = adapter(data)
                newdata = (data[0].clone(),)
                return adapted(*newdata)
            """,
            "`data[0]` is the tensor the tuple `data` still holds (and handed on): the clone is another object, not a second copy of a temporary",
        ),
        Valid(
            """
            import torch
            def mds(coords: torch.Tensor, target: torch.Tensor):
                dist = torch.cdist(coords, coords, p=2).clone()
                dist[dist <= 0] += 1e-7
                return (target / dist).sum()
            """,
            "backward needs cdist's own output: the clone keeps the in-place write that follows off it (alphafold2's MDS)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(chunks: list):
                merged = torch.cat(chunks).clone()
                return merged
            """,
            line=3,
            fix="""
            import torch
            def f(chunks: list):
                merged = torch.cat(chunks)
                return merged
            """,
        ),
        Invalid(
            """
            import torch
            def f(a: torch.Tensor, b: torch.Tensor):
                return (a + b).clone()
            """,
            line=3,
            fix="""
            import torch
            def f(a: torch.Tensor, b: torch.Tensor):
                return a + b
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if event.method != "clone" or event.call.args or event.receiver is None or event.receiver_node is None:
                continue
            recv = event.receiver
            if not new_and_unshared(recv):
                continue
            node = event.receiver_node
            if _full_reduction(node):
                continue  # `mask.sum().clone()`: a 0-d tensor, whose copy costs nothing worth a change
            if _output_of_own_module(flow, node):
                continue  # DINO's `model(samples).clone()`: the model returns `x[:, 0]`, and the clone makes it compact and contiguous
            if _guards_a_saved_output(flow, event):
                continue  # `torch.cdist(x, x).clone()`, then `d[d <= 0] += eps`: backward needs cdist's own output
            if recv.leaf and recv.grad is Tri.YES:
                continue  # `torch.ones(n, requires_grad=True).clone()`: a non-leaf in the graph of the leaf, which in-place ops may change
            message = (
                f"`{short_code(node)}` is already a new tensor that nothing else refers to; `.clone()` copies it a second time "
                "(more time and peak memory, same result). Drop the `.clone()`."
            )
            replacement = node.with_changes(lpar=[], rpar=[]) if isinstance(node, cst.BinaryOperation) and _is_whole_value(event) else node
            yield Hit(event.node, message, (event.node, replacement))


_REDUCTIONS = frozenset(("sum", "mean", "prod", "max", "min", "amax", "amin", "norm", "std", "var", "all", "any", "count_nonzero", "logsumexp"))


def _full_reduction(node: cst.BaseExpression) -> bool:
    """`x.sum()`, `x.float().mean()`, `torch.max(x)`: reduced over every dimension, one number."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    name = func.attr.value if isinstance(func, cst.Attribute) else ""
    if name not in _REDUCTIONS:
        return False
    method = not dotted(func.value).startswith("torch") if isinstance(func, cst.Attribute) else False
    positional = [a for a in node.args if a.keyword is None]
    keywords = {a.keyword.value for a in node.args if a.keyword is not None}
    return not ({"dim", "axis", "keepdim"} & keywords) and len(positional) == (0 if method else 1)


def _output_of_own_module(flow: FunctionFlow, node: cst.BaseExpression) -> bool:
    """`model(x)` for a module that is not one of torch's: its forward may hand back a view
    of a larger tensor it made (the class token `x[:, 0]`, a slice of a padded output), and
    cloning that is what makes it compact and contiguous (for `all_gather`, for keeping it)."""
    if not isinstance(node, cst.Call):
        return False
    callee = flow.value(node.func)
    return callee.kind is Kind.MODULE and not callee.op


def _guards_a_saved_output(flow: FunctionFlow, event: Call) -> bool:
    """The temporary is what its op saved for backward (`cdist`, `exp`, `sigmoid`) and the
    copy is written in place later: without the clone that write lands on the saved output,
    and backward raises "modified by an inplace operation" (alphafold2's MDS)."""
    recv = event.receiver
    if recv is None or not any(s.index in recv.graph and s.roots & recv.roots for s in flow.saved):
        return False
    return any(isinstance(e, Write) and e.target.roots & event.result.roots for e in flow.after(event))


def _is_whole_value(event: Call) -> bool:
    """Parentheses can go only when the call was the whole right-hand side or return value."""
    stmt = event.stmt
    return isinstance(stmt, (cst.Return, cst.Assign)) and getattr(stmt, "value", None) is event.node
