"""RC343 clone-then-detach."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.freezing import grad_flags_set
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
        Valid(
            """
            import torch
            class LocalOptimization:
                def run(self, likelihood_model, x: torch.Tensor, rank: int):
                    for param in likelihood_model.parameters():
                        param.requires_grad_(False)
                    repr_module = likelihood_model.get_representation_module(rank)

                    def keep(module, args, output):
                        self.repr_point = output[0].clone().detach()

                    handle = repr_module.register_forward_hook(keep)
                    likelihood_model.log_prob(x)
                    handle.remove()
                    return self.repr_point
            """,
            "the hook's function froze the model first: the output requires grad only through an input that need not, and the clone may record nothing",
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
            if output_arg and _hook_of_frozen_model(flow):
                continue  # a forward hook defined after its function froze the model: its output holds a graph only through the input
            if not (recv.grad is Tri.YES or output_arg):
                continue  # only tensors that require grad (or a model's output passed in): otherwise the order does not matter
            if new_and_unshared(recv):
                continue  # the clone copies a new tensor a second time: RC341 says to drop it, which leaves nothing to reorder
            message = (
                f"`{short_code(event.node)}` records the copy in the autograd graph and then cuts it off; "
                f"`{short_code(base)}.detach().clone()` copies outside the graph, which is what PyTorch recommends."
            )
            yield Hit(event.node, message, (event.node, chain(atom(base), "detach", "clone")))


def _hook_of_frozen_model(flow: FunctionFlow) -> bool:
    """A function nested in another that, before defining it, turned off grad for every
    parameter of a module (`for p in self.model.parameters(): p.requires_grad_(False)`):
    a forward hook of that model, whose `output` requires grad only if the input does."""
    scope = flow.scope
    outer = scope.enclosing_function if scope is not None else None
    if outer is None or scope is None:
        return False
    start = flow.file.line_of(scope.node)
    frozen: list[bool] = []

    class Find(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            if flow.file.line_of(node) < start:
                frozen.extend(flag is False for flag in grad_flags_set(node).values())

    outer.visit(Find())
    return any(frozen)
