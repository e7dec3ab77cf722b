"""RC343 clone-then-detach."""

from __future__ import annotations

from collections.abc import Iterator

from review_copies.analysis import roots
from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.guesses import OUTPUT_NAME
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.redundant_copy.helpers import clone_receiver, new_and_unshared


class CloneThenDetach(Rule):
    """
    ## What it does
    Finds `x.clone().detach()` on a tensor that requires grad.

    ## Why is this bad?
    The clone is recorded in the autograd graph (a `CloneBackward0` node referencing
    `x`) and then immediately cut off: wasted work, and the copy briefly keeps the graph
    alive. `x.detach().clone()` copies outside the graph. PyTorch's own warning text
    recommends this order.

    ## Example
    ```python
    target = logits.clone().detach()
    ```

    ## Use instead
    ```python
    target = logits.detach().clone()
    ```

    ## Fix safety
    Safe: both give an equal, independent tensor that does not require grad.

    ## Known problems
    With autograd off (`with torch.no_grad():`, `@torch.no_grad()`, or a function only ever
    called that way) the clone records nothing and the order does not matter: not reported.
    """

    code = "RC343"
    name = "clone-then-detach"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone().detach()",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.detach().clone()
            """
        ),
        Valid(
            """
            import torch
            def f():
                x = torch.zeros(3)
                return x.clone().detach()
            """,
            "x needs no grad: the order does not matter",
        ),
        Valid(
            """
            import torch
            from torch import nn
            def prune_linear_layer(layer: nn.Linear, index: torch.LongTensor) -> torch.Tensor:
                return layer.weight.index_select(0, index).clone().detach()
            """,
            "`index_select` made a new tensor: RC341 says the clone copies it twice and drops it, leaving nothing to reorder",
        ),
        Valid(
            """
            from torch import Tensor, no_grad, zeros
            class CrossBatchMiner:
                def __init__(self, bank_size: int, dim: int):
                    self.bank_features = zeros(bank_size, dim)
                    self.ptr = 0
                @no_grad()
                def update_bank(self, features: Tensor) -> None:
                    self.bank_features[self.ptr : self.ptr + len(features)] = features.clone().detach()
                    self.ptr += len(features)
            """,
            "autograd is off in the whole method: the clone records nothing, so the order does not matter (open-metric-learning's memory bank)",
        ),
        Valid(
            """
            from torch import nn
            grads = {}
            def save_grad(name: str):
                def hook(module, grad_input, grad_output):
                    grads[name] = grad_output[0].clone().detach()
                return hook
            def attach(model: nn.Module):
                for name, module in model.named_modules():
                    if isinstance(module, nn.Linear):
                        module.register_full_backward_hook(save_grad(name))
            """,
            "a backward hook runs inside the backward pass, with autograd off unless it was asked to create a graph: the clone records nothing",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                w = torch.randn(3, requires_grad=True)
                y = w * x
                return y.clone().detach()
            """,
            line=5,
            fix="""
            import torch
            def f(x: torch.Tensor):
                w = torch.randn(3, requires_grad=True)
                y = w * x
                return y.detach().clone()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if event.method != "detach" or event.call.args or event.receiver_node is None or event.no_grad:
                continue  # with autograd off the clone records nothing: the order does not matter
            base = clone_receiver(event.receiver_node)
            recv = flow.value(base) if base is not None else None
            if base is None or recv is None:
                continue
            output_arg = recv.grad is Tri.MAYBE and any(OUTPUT_NAME.search(roots.argument_name(r) or "") for r in recv.roots)
            if not (recv.grad is Tri.YES or output_arg):
                continue  # only tensors that require grad (or a model's output passed in): otherwise the order does not matter
            if new_and_unshared(recv):
                continue  # the clone copies a new tensor a second time: RC341 says to drop it, which leaves nothing to reorder
            message = (
                f"`{short_code(event.node)}` records the copy in the autograd graph and then cuts it off; "
                f"`{short_code(base)}.detach().clone()` copies outside the graph, which is what PyTorch recommends."
            )
            yield Hit(event.node, message, (event.node, chain(atom(base), "detach", "clone")))
