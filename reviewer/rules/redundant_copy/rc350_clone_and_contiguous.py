"""RC350 clone-and-contiguous."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.queries.aliasing import last_bind
from review_copies.analysis.rewrite import atom, dotted_expr, kwarg, method
from review_copies.analysis.syntax import call_method_name, code_of, receiver_of, short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class CloneAndContiguous(Rule):
    """
    ## What it does
    Finds `x.clone().contiguous()` on a tensor whose dimensions a transpose or a permutation
    reordered (`x.t()`, `x.transpose(1, 2)`, `x.permute(...)`, `x.mT`, a channels-last
    tensor, or a slice of one).

    ## Why is this bad?
    It copies such a tensor twice: `clone()` keeps the order of the input's strides
    (`memory_format=torch.preserve_format`), so its copy is not contiguous either and
    `.contiguous()` copies it again. `x.clone(memory_format=torch.contiguous_format)`
    makes one copy that is contiguous (measured with torch 2.13: two `aten.clone` calls
    against one). The other order, `x.contiguous().clone()`, is RC341's: a clone of the
    temporary `contiguous()` made.

    ## Example
    ```python
    def pack(x: torch.Tensor):
        return x.t().clone().contiguous()
    ```

    ## Use instead
    ```python
    def pack(x: torch.Tensor):
        return x.t().clone(memory_format=torch.contiguous_format)
    ```

    ## Fix safety
    Safe: the result has the same values, is contiguous, and shares memory with nothing,
    as before. On an input that is already contiguous both forms copy once.

    ## Known problems
    Only a layout the function makes itself is known. `clone()` keeps the order of the
    strides, not their gaps: a slice or a narrowed tensor of a tensor in row-major order
    clones to a contiguous tensor (torch 2.13), so there `.contiguous()` copies nothing and
    nothing is reported; a tensor of unknown layout (an argument, a gradient, what another
    function returned) is left alone too.
    """

    code = "RC350"
    name = "clone-and-contiguous"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = (".clone().contiguous()",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.t().clone(memory_format=torch.contiguous_format)
            """,
            "already one contiguous copy",
        ),
        Valid(
            """
            import torch
            def f():
                return torch.zeros(4, 6).clone().contiguous()
            """,
            "a fresh tensor from a factory is contiguous: one copy either way",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.t().contiguous()
            """,
            "one copy, and it is needed",
        ),
        Valid(
            """
            import torch
            def f(frames: torch.Tensor):
                patch = frames[:, 1:3]
                return patch.clone().contiguous()
            """,
            "a slice of a tensor in row-major order: `clone()` keeps that order, so its copy is contiguous and `.contiguous()` copies nothing",
        ),
        Valid(
            """
            import torch
            def f(grad: torch.Tensor):
                return grad.clone().contiguous()
            """,
            "a gradient of unknown layout: usually contiguous already, and then one copy either way",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def fuse(mel: torch.Tensor, bn: torch.nn.BatchNorm2d) -> torch.Tensor:
                x = bn(mel.transpose(1, 3))
                x = x.transpose(1, 3)
                return x[:, 0:1, :, :].clone().contiguous()
            """,
            line=5,
            fix="""
            import torch
            def fuse(mel: torch.Tensor, bn: torch.nn.BatchNorm2d) -> torch.Tensor:
                x = bn(mel.transpose(1, 3))
                x = x.transpose(1, 3)
                return x[:, 0:1, :, :].clone(memory_format=torch.contiguous_format)
            """,
            note="a slice of a transposed tensor: the clone keeps the transposed order and `.contiguous()` copies again",
        ),
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.t().clone().contiguous()
            """,
            line=3,
            fix="""
            import torch
            def f(x: torch.Tensor):
                return x.t().clone(memory_format=torch.contiguous_format)
            """,
        ),
        Invalid(
            """
            import torch
            def f(frames: torch.Tensor):
                patch = frames.transpose(1, 2)
                return patch.clone().contiguous()
            """,
            line=4,
            fix="""
            import torch
            def f(frames: torch.Tensor):
                patch = frames.transpose(1, 2)
                return patch.clone(memory_format=torch.contiguous_format)
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        torch_name = flow.file.imports.module_alias("torch")
        for event in flow.of(Call):
            inner = event.receiver_node
            if event.method != "contiguous" or event.call.args or not isinstance(inner, cst.Call) or inner.args:
                continue
            if call_method_name(inner) != "clone":
                continue
            base = receiver_of(inner)
            value = flow.value(base)
            if value.kind is not Kind.TENSOR or not _permuted(flow, base, event.index):
                continue  # not a tensor, or not known to be dense and non-contiguous
            fix = None
            if torch_name is not None:
                fix = (event.node, method(atom(base), "clone", [kwarg("memory_format", dotted_expr(f"{torch_name}.contiguous_format"))]))
            message = (
                f"`{short_code(event.node)}` copies a non-contiguous `{short_code(base)}` twice: `clone()` keeps its strides, so "
                f"the copy must be copied again to be contiguous. `{short_code(base)}.clone(memory_format=torch.contiguous_format)` "
                "makes one contiguous copy."
            )
            yield Hit(event.node, message, fix)


_PERMUTING = frozenset(("t", "transpose", "permute", "movedim", "moveaxis", "swapaxes", "swapdims", "adjoint"))
_PERMUTED_ATTRIBUTES = frozenset(("T", "mT", "H", "mH"))


def _permuted(flow: FunctionFlow, expr: cst.BaseExpression, before: int) -> bool:
    """Made by a transpose or a permutation, or laid out channels-last, or a slice of such a
    tensor: dimensions in another order than row-major, which `clone()` keeps. A name is
    followed to what it was bound to."""
    for _ in range(6):
        if isinstance(expr, cst.Subscript):
            expr = expr.value  # slicing and indexing keep the order of the strides
            continue
        if isinstance(expr, cst.Name):
            bind = last_bind(flow, expr.value, before)
            if bind is None or bind.expr is None:
                return False
            expr, before = bind.expr, bind.index
            continue
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in _PERMUTED_ATTRIBUTES
        if isinstance(expr, cst.Call):
            name = call_method_name(expr)
            return name in _PERMUTING or (name in ("to", "contiguous") and "channels_last" in code_of(expr))
        return False
    return False
