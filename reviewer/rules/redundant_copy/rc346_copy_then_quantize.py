"""RC346 copy-then-quantize."""

from __future__ import annotations

from collections.abc import Iterator

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.syntax import short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.redundant_copy.helpers import clone_receiver


class CopyThenQuantize(Rule):
    """
    ## What it does
    Finds a `.clone()` passed straight to a quantization function
    (`torch.quantize_per_tensor(x.clone(), ...)`, `torch.quantize_per_channel(...)`,
    the fake-quantize functions).

    ## Why is this bad?
    Quantization always writes a new tensor; it never modifies its input. The clone is a
    full-precision copy made only to be read once and freed.

    ## Example
    ```python
    q = torch.quantize_per_tensor(w.clone(), scale, zero_point, torch.qint8)
    ```

    ## Use instead
    ```python
    q = torch.quantize_per_tensor(w, scale, zero_point, torch.qint8)
    ```

    ## Fix safety
    Safe: the quantized result is the same.
    """

    code = "RC346"
    name = "copy-then-quantize"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("quantize",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            def f(w: torch.Tensor):
                return torch.quantize_per_tensor(w, 0.1, 0, torch.qint8)
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(w: torch.Tensor):
                return torch.quantize_per_tensor(w.clone(), 0.1, 0, torch.qint8)
            """,
            line=3,
            fix="""
            import torch
            def f(w: torch.Tensor):
                return torch.quantize_per_tensor(w, 0.1, 0, torch.qint8)
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if not event.is_any(_QUANTIZERS) or not event.call.args:
                continue
            first = event.call.args[0].value
            base = clone_receiver(first)
            if base is None:
                continue
            message = (
                f"`{short_code(first)}` copies `{short_code(base)}` only for the quantizer to read it once: quantization writes a new "
                "tensor and never changes its input. Pass the tensor itself."
            )
            yield Hit(event.node, message, (first, base))


_QUANTIZERS = frozenset(
    ("torch.quantize_per_tensor", "torch.quantize_per_channel", "torch.quantize_per_tensor_dynamic", "torch.fake_quantize_per_tensor_affine", "torch.fake_quantize_per_channel_affine")
)
