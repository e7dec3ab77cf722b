"""RC348 clone-into-slot."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.syntax import dotted, short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.redundant_copy.helpers import clone_receiver


class CloneIntoSlot(Rule):
    """
    ## What it does
    Finds `buf[i] = x.clone()` (or `buf[...] = x.clone()`) where `buf` is a tensor.

    ## Why is this bad?
    Assigning into a slice of a tensor already copies the values into the buffer's own
    memory (`copy_`). The clone is a second full copy that is freed right away.

    ## Example
    ```python
    self.obs[t] = obs.clone()
    ```

    ## Use instead
    ```python
    self.obs[t] = obs
    ```

    ## Fix safety
    Safe: the buffer holds the same values; later writes to `obs` do not reach it either way.
    """

    code = "RC348"
    name = "clone-into-slot"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone()",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            from torch import nn
            class SwAVLoss(nn.Module):
                def __init__(self, queue: torch.Tensor):
                    super().__init__()
                    self.queue = queue
                def forward(self, embedding: torch.Tensor, queue: torch.Tensor, n: int):
                    for i in range(queue.shape[0]):
                        queue[i, n:] = self.queue[i, :-n].clone()
                        queue[i, :n] = embedding[i * n : (i + 1) * n]
                    return queue
            """,
            "`queue` is most likely `self.queue` (one name for one ring buffer): shifting it into itself needs the copy",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Ensemble(nn.Module):
                def _default_forward(self, x):
                    return x * 2, x * 3
                def forward(self, x: torch.Tensor, perm: torch.Tensor):
                    mean, logvar = self._default_forward(x[perm])
                    mean = mean.view(x.shape[0], -1)
                    mean[perm] = mean.clone()
                    return mean, logvar
            """,
            "`mean[perm] = mean` raises (the written-to tensor overlaps its source): the clone is what makes it work",
        ),
        Valid(
            """
            import torch
            def f(obs: torch.Tensor):
                history = []
                history.append(obs.clone())
                return history
            """,
            "a list stores the object itself: the clone is needed",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(obs: torch.Tensor, steps: int):
                buf = torch.zeros(steps, 4)
                buf[0] = obs.clone()
                return buf
            """,
            line=4,
            fix="""
            import torch
            def f(obs: torch.Tensor, steps: int):
                buf = torch.zeros(steps, 4)
                buf[0] = obs
                return buf
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for write in flow.of(Write):
            stmt = write.stmt
            if write.op != "[...] =" or write.target.kind is not Kind.TENSOR or not isinstance(stmt, cst.Assign):
                continue
            base = clone_receiver(stmt.value)
            if base is None or flow.value(base).roots & write.target.roots:
                continue  # `x[:, 1:] = x[:, :-1].clone()`: source and target overlap, the clone is needed
            if _same_stem(base, write.target_node):
                continue  # `queue[i, n:] = self.queue[i, :-n].clone()`: the caller passes `queue=self.queue`
            message = (
                f"`{short_code(stmt)}` copies twice: assigning into a slice of the tensor `{short_code(write.target_node)}` already copies "
                f"the values into its memory, so `.clone()` makes a full copy that is freed at once. Assign `{short_code(base)}` itself."
            )
            yield Hit(write.node, message, (stmt.value, base))


def _same_stem(source: cst.BaseExpression, target: cst.BaseExpression) -> bool:
    """The source is the target itself, or both sides are slices of tensors that go by one name
    (`queue`, `self.queue`): most likely the same buffer, moved within itself, where the copy
    keeps the overlap correct."""

    def stem(expr: cst.BaseExpression) -> str:
        while isinstance(expr, (cst.Subscript, cst.Call)):
            expr = expr.value if isinstance(expr, cst.Subscript) else expr.func
        return dotted(expr).rpartition(".")[2]

    if not isinstance(source, cst.Subscript):
        # `mean[perm] = mean.clone()`: the tensor permuted into itself, where index_put_ raises on
        # the overlap without the copy; `self.obs[t] = obs.clone()` is a whole other tensor.
        while isinstance(target, cst.Subscript):
            target = target.value
        return bool(dotted(source)) and dotted(source) == dotted(target)
    left, right = stem(source), stem(target)
    return bool(left) and left == right
