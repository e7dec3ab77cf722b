"""RC103 write-through-detach-or-data."""

from __future__ import annotations

from review_copies.analysis.queries.aliasing import AliasPair
from review_copies.rules.alias_mutation.helpers import WriteThroughAlias, read_lines, write_text
from review_copies.rules.base import Invalid, Valid


class WriteThroughDetachOrData(WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through the result of `.detach()` or `.data` while the
    original tensor is read again afterwards.

    ## Why is this bad?
    `detach()` and `.data` cut the autograd graph, they do not copy: the result shares
    memory with the original (and, for `detach()`, its version counter). Writing into it
    changes the original under every other name that reads it.

    ## Example
    ```python
    def clipped(w: torch.Tensor):
        v = w.detach()
        v.clamp_(max=1.0)
        return w.sum() + v.sum()     # w was clamped too
    ```

    ## Use instead
    ```python
    def clipped(w: torch.Tensor):
        v = w.detach().clone()
        v.clamp_(max=1.0)
        return w.sum() + v.sum()
    ```

    ## Fix safety
    The fix copies at the assignment; the original then keeps its values.

    ## Known problems
    Not reported when the name written through is never read again: the write can then only
    be meant for the tensor it shares memory with (normalising a tensor in groups through a
    reshaped view of it).
    """

    code = "RC103"
    name = "write-through-detach-or-data"
    prefilter = ("detach", ".data")
    VIAS = frozenset(("detach", "data"))

    VALID = (
        Valid(
            """
            import torch


            class SlowMo:
                def init_old_params(self, params: list[torch.Tensor], length: int, device: torch.device):
                    self.old_params = torch.empty(length).to(device).detach()
                    offset = 0
                    for p in params:
                        n = p.numel()
                        current_p_old = self.old_params[offset:offset + n]
                        current_p_old.copy_(p.view(-1))
                        offset += n
                    self.momentum = torch.zeros_like(self.old_params).detach()
            """,
            "a new buffer filled slice by slice: each slice is written once, on purpose",
        ),
        Valid(
            """
            import torch
            from torch import nn
            def fuse_bn(conv: nn.Conv2d, bn: nn.BatchNorm2d):
                bias = conv.bias.data
                bias.add_(bn.bias - bn.running_mean * bn.weight)
                conv.bias.data = bias
            """,
            "the alias is assigned back: changing the layer is the point",
        ),
        Valid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach().clone()
                v.zero_()
                return w, v
            """
        ),
        Valid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach()
                v.zero_()
                return v
            """,
            "the original is not read again",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach()
                v.clamp_(max=1.0)
                return w.sum() + v.sum()
            """,
            line=5,
            fix="""
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach().clone()
                v.clamp_(max=1.0)
                return w.sum() + v.sum()
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                h = torch.ones(4) * 3
                raw = h.data
                raw[0] = 0
                return h.mean(), raw
            """,
            line=5,
            fix="""
            import torch
            def f():
                h = torch.ones(4) * 3
                raw = h.data.clone()
                raw[0] = 0
                return h.mean(), raw
            """,
        ),
    )

    def message(self, pair: AliasPair) -> str:
        how = "`.detach()`" if pair.write.target.via == "detach" else "`.data`"
        return (
            f"`{write_text(pair.write)}` writes in place into {self.bind_text(pair)}, and {how} does not copy: it shares memory "
            f"with `{pair.holder}`, which therefore changes too and is read again at {read_lines(pair.reads)}. "
            f"Use `.detach().clone()` for an independent copy."
        )
