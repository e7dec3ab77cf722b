"""RC204 inplace-on-forward-input."""

from __future__ import annotations

from collections.abc import Iterator

from review_copies.analysis import roots
from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.guesses import LABEL_PARAMETER, OUTPUT_NAME
from review_copies.analysis.queries.autograd import saved_before
from review_copies.analysis.queries.callers import returns_argument
from review_copies.analysis.queries.intent import deliberate_write, in_place_module
from review_copies.analysis.rewrite import out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class InplaceOnForwardInput(Rule):
    """
    ## What it does
    Finds an `nn.Module.forward` that returns its own input modified in place
    (`return x.mul_(s)`, `x += self.bias; return x`) outside `torch.no_grad()`.

    ## Why is this bad?
    The input is the previous layer's output, which that layer has often saved for its
    backward (`tanh`, `sigmoid`, `softmax`, `relu` keep their output; norms and linears keep
    their input). Writing into it in place makes `loss.backward()` raise "one of the
    variables needed for gradient computation has been modified by an inplace operation"
    as soon as the module is put after such a layer, and it changes the caller's tensor.
    A write in the arm an `inplace` flag selects (`if self.inplace:`, `x.mul_(w) if inplace
    else x * w`) is the mode the caller asked for and is not reported.

    ## Example
    ```python
    def forward(self, x):
        return x.mul_(self.scale)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return x * self.scale
    ```

    ## Fix safety
    Safe: the out-of-place op computes the same values into a new tensor.

    ## Known problems
    Reported only where an `nn.Sequential` of the repository puts the module right after a
    layer that saves its output (`nn.Tanh()`, `nn.ReLU()`, `nn.Softmax()`): a module fed
    such a tensor in `forward` code, or from a config, is not seen.
    """

    code = "RC204"
    name = "inplace-on-forward-input"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.WARNING
    prefilter = ("forward",)
    recipes = ("backward", "input-mutation")

    VALID = (
        Valid(
            """
            import torch
            from torch import nn
            class MixUp(nn.Module):
                def __init__(self, alpha: float):
                    super().__init__()
                    self.beta = torch.distributions.beta.Beta(alpha, alpha)
                def forward(self, x_video: torch.Tensor, labels: torch.Tensor):
                    lam = self.beta.sample()
                    flipped = x_video.flip(0).mul_(1.0 - lam)
                    x_video.mul_(lam).add_(flipped)
                    return x_video, labels
            augment = nn.Sequential(nn.Sigmoid(), MixUp(0.2))
            """,
            "a transform given the labels too mixes a batch from the data loader: no layer saved it",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Add_(nn.Module):
                def forward(self, x: torch.Tensor):
                    return x.add_(1)
            net = nn.Sequential(nn.Tanh(), Add_())
            """,
            "named as an in-place op (`Add_`, like `Tensor.add_`): writing into its input is what it declares",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = nn.Parameter(torch.ones(4))
                def forward(self, x):
                    return x * self.scale
            net = nn.Sequential(nn.Tanh(), Scale())
            """
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.bn = nn.BatchNorm1d(4)
                def forward(self, x):
                    out = self.bn(self.fc(x))
                    out += x
                    return out.relu()
            net = nn.Sequential(nn.ReLU(), Block())
            """,
            "the residual add writes into the block's own tensor, not its input",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class LayerScale(nn.Module):
                def __init__(self, dim: int, inplace: bool = False):
                    super().__init__()
                    self.inplace = inplace
                    self.weight = nn.Parameter(torch.ones(dim))
                def forward(self, x):
                    if self.inplace:
                        return x.mul_(self.weight)
                    return x * self.weight
            net = nn.Sequential(nn.Tanh(), LayerScale(4, inplace=True))
            """,
            "an opt-in mode: the caller built the module with `inplace=True` to save the memory",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Readout(nn.Module):
                def forward(self, u, v):
                    u += v.sum(0)
                    return u
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.readouts = nn.ModuleList([Readout() for _ in range(3)])
                def forward(self, v):
                    u = torch.zeros(v.shape[1])
                    for readout in self.readouts:
                        u = readout(u, v)
                    return u
            """,
            "nothing in the repository puts it after a layer that saves its output: here it sums into a running total the caller rebinds",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = nn.Parameter(torch.ones(4))
                def forward(self, x):
                    x += self.scale
                    return x
            net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), Scale())
            """,
            line=8,
            fix="""
            import torch
            from torch import nn
            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = nn.Parameter(torch.ones(4))
                def forward(self, x):
                    x = x + self.scale
                    return x
            net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), Scale())
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if not flow.is_forward or in_place_module(flow):
            return
        # A forward given the labels too transforms a data batch (MixUp); a loss given them
        # still gets the model's output, which a layer may have saved.
        with_labels = any(LABEL_PARAMETER.search(p) for p in flow.params)
        inputs = {roots.argument(p) for p, v in flow.params.items() if v.kind is Kind.TENSOR}
        for write in flow.of(Write):
            if write.no_grad or write.opted_in or deliberate_write(write) or not write.target.roots & inputs or not write.target.certain:
                continue
            if write.op.startswith("[...]") or saved_before(flow, write) is not None:
                continue  # masking entries is common and mostly harmless; a saved tensor is RC201's
            arg = sorted(r[4:] for r in write.target.roots & inputs)[0]
            if with_labels and not OUTPUT_NAME.search(arg):
                continue
            if not returns_argument(flow, arg):
                continue  # the module's output is something else: the write is a local detail
            if not _after_a_saving_layer(flow):
                return  # asked last: it reads the files that build this module
            message = (
                f"`{short_code(write.stmt or write.node)}` writes in place into `{arg}`, the input of `forward`: the layer before "
                "this module has often saved that tensor for backward (tanh, sigmoid, softmax and relu keep their output), so "
                "training raises \"modified by an inplace operation\", and the caller's tensor changes too. Use the out-of-place op."
            )
            yield Hit(write.node, message, out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor"))


def _after_a_saving_layer(flow: FunctionFlow) -> bool:
    """The repository puts this module right after a layer that saves its output: only there
    is the write known to break backward. Without that, the input is as likely a linear's or
    an embedding's output, or a sum the caller rebinds, and a guess would be noise."""
    cls = flow.scope.class_node if flow.scope is not None else None
    return cls is not None and flow.index is not None and flow.index.follows_saving_layer(cls.name.value)
