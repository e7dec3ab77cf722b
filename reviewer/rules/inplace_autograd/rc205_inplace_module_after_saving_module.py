"""RC205 inplace-module-after-saving-module."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.rewrite import clean_args
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of, last, short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class InplaceModuleAfterSavingModule(Rule):
    """
    ## What it does
    Finds, in an `nn.Sequential(...)`, a module run in place (`nn.ReLU(inplace=True)`,
    `nn.Dropout(p, inplace=True)`...) right after a module whose backward needs its own
    output (`nn.Tanh()`, `nn.Sigmoid()`, `nn.Softmax()`...).

    ## Why is this bad?
    The in-place module overwrites the previous module's output, which autograd saved to
    compute that module's gradient; in training, `backward()` raises "one of the variables
    needed for gradient computation has been modified by an inplace operation". After
    `Linear`, `Conv` or `BatchNorm` the same in-place module is fine, which is why this
    slips through.

    ## Example
    ```python
    nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Dropout(0.1, inplace=True), nn.Linear(h, 1))
    ```

    ## Use instead
    ```python
    nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Dropout(0.1), nn.Linear(h, 1))
    ```

    ## Fix safety
    Safe: the module computes the same values out of place.
    """

    code = "RC205"
    name = "inplace-module-after-saving-module"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = ("inplace=True",)
    recipes = ("backward",)

    VALID = (
        Valid(
            """
            from torch import nn
            def make(d: int):
                return nn.Sequential(nn.Linear(d, d), nn.BatchNorm1d(d), nn.ReLU(inplace=True))
            """
        ),
        Valid(
            """
            from mmcv.cnn import ConvModule
            from torch import nn
            def stem(c: int):
                # ConvModule's inplace=True is its own activation's, run on the conv's output.
                return nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), ConvModule(c, c, 3, padding=1, inplace=True))
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            from torch import nn
            def make(d: int):
                return nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Dropout(0.1, inplace=True), nn.Linear(d, 1))
            """,
            line=3,
            fix="""
            from torch import nn
            def make(d: int):
                return nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Dropout(0.1), nn.Linear(d, 1))
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if not event.is_any(("torch.nn.Sequential", "torch.nn.modules.container.Sequential")):
                continue
            layers = [a.value for a in event.call.args if a.keyword is None and not a.star]
            for before, layer in itertools.pairwise(layers):
                # Only a torch.nn layer known to run in place on its input: elsewhere (mmcv's
                # `ConvModule(..., inplace=True)`) the flag is the layer's own activation's.
                if _module_name(flow, before) in _SAVES_OUTPUT_MODULES and _module_name(flow, layer) in api.INPLACE_MODULES and _inplace_arg(layer) is not None:
                    message = (
                        f"`{short_code(layer)}` overwrites in place the output of `{short_code(before)}`, which autograd saved to "
                        "compute that layer's gradient; in training, backward() raises \"modified by an inplace operation\". "
                        "Drop `inplace=True` here."
                    )
                    yield Hit(layer, message, (layer, _without_inplace(layer)))


_SAVES_OUTPUT_MODULES = ("Tanh", "Sigmoid", "Softmax", "LogSoftmax", "ReLU", "ReLU6", "Hardtanh")


def _module_name(flow: FunctionFlow, node: cst.BaseExpression) -> str:
    """`nn.ReLU(inplace=True)` -> `ReLU`: the torch.nn class a call builds."""
    if not isinstance(node, cst.Call):
        return ""
    return next((last(q) for q in flow.file.imports.resolve(code_of(node.func)) if q.startswith("torch.nn.")), "")


def _inplace_arg(node: cst.BaseExpression) -> cst.Arg | None:
    if not isinstance(node, cst.Call):
        return None
    return next((a for a in node.args if a.keyword is not None and a.keyword.value == "inplace" and isinstance(a.value, cst.Name) and a.value.value == "True"), None)


def _without_inplace(node: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(node, cst.Call)
    return node.with_changes(args=clean_args([a for a in node.args if a is not _inplace_arg(node)]))
