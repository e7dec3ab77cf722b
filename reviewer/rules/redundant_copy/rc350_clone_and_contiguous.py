"""RC350 clone-and-contiguous."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.rewrite import atom, dotted_expr, kwarg, method
from review_copies.analysis.syntax import call_method_name, receiver_of, short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class CloneAndContiguous(Rule):
    """
    ## What it does
    Finds `x.clone().contiguous()` on a tensor that may not be contiguous (a view, a
    transposed or sliced tensor, an argument).

    ## Why is this bad?
    It copies a non-contiguous tensor twice: `clone()` keeps the input's strides
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
    Whether the input is contiguous is known only for tensors the function makes itself;
    a tensor made by a factory in the same expression is left alone.
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
    )
    INVALID = (
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
                patch = frames[:, 1:3]
                return patch.clone().contiguous()
            """,
            line=4,
            fix="""
            import torch
            def f(frames: torch.Tensor):
                patch = frames[:, 1:3]
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
            if value.kind is not Kind.TENSOR or (value.fresh and not value.via):
                continue  # not known to be a tensor, or made right here (contiguous)
            fix = None
            if torch_name is not None:
                fix = (event.node, method(atom(base), "clone", [kwarg("memory_format", dotted_expr(f"{torch_name}.contiguous_format"))]))
            message = (
                f"`{short_code(event.node)}` copies a non-contiguous `{short_code(base)}` twice: `clone()` keeps its strides, so "
                f"the copy must be copied again to be contiguous. `{short_code(base)}.clone(memory_format=torch.contiguous_format)` "
                "makes one contiguous copy."
            )
            yield Hit(event.node, message, fix)
