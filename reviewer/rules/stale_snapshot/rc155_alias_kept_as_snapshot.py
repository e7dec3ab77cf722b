"""RC155 alias-kept-as-snapshot."""

from __future__ import annotations

from collections.abc import Iterator

from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.queries.aliasing import alias_pairs
from review_copies.analysis.queries.intent import deliberate_write
from review_copies.analysis.syntax import short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import attribute_source, copy_at_binding
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class AliasKeptAsSnapshot(Rule):
    """
    ## What it does
    Finds `prev = x` (or `prev = x.detach()`, `prev = self.running_mean`, ...) kept to
    remember a value, followed by an in-place update of `x` and a read of `prev`.

    ## Why is this bad?
    `prev` is the same tensor as `x`, not a copy of its values: the in-place update
    changes `prev` too, and the comparison or restore that reads it sees the new values.

    ## Example
    ```python
    prev = self.running_mean
    self.running_mean.mul_(1 - m).add_(m * batch_mean)
    shift = (self.running_mean - prev).abs().max()     # always 0
    ```

    ## Use instead
    ```python
    prev = self.running_mean.clone()
    ```

    ## Fix safety
    Safe: the copy holds the values at that moment.
    """

    code = "RC155"
    name = "alias-kept-as-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("=",)
    recipes = ("snapshot",)

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                prev = x.clone()
                x.mul_(2)
                return (x - prev).abs().max()
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            def shift(bn: nn.BatchNorm1d, batch: torch.Tensor):
                prev = bn.running_mean
                bn.running_mean.mul_(0.9).add_(0.1 * batch.mean(0))
                return (bn.running_mean - prev).abs().max()
            """,
            line=4,
            fix="""
            import torch
            from torch import nn
            def shift(bn: nn.BatchNorm1d, batch: torch.Tensor):
                prev = bn.running_mean.clone()
                bn.running_mean.mul_(0.9).add_(0.1 * batch.mean(0))
                return (bn.running_mean - prev).abs().max()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        reported: set[str] = set()
        for write in flow.of(Write):
            if deliberate_write(write) and write.op != "optimizer.step()":
                continue
            for pair in alias_pairs(flow, write):
                if pair.writer_is_alias or pair.holder_bind is None or pair.holder_bind.expr is None or pair.holder in reported:
                    continue
                if not pair.holder_value.certain or not attribute_source(pair.holder_bind.expr):
                    continue  # local tensors kept by reference are alias-mutation (RC101...)
                reported.add(pair.holder)
                bind = pair.holder_bind
                message = (
                    f"`{pair.holder} = {short_code(bind.expr)}` keeps a reference, not the values: `{short_code(write.stmt or write.node)}` at line "
                    f"{write.line} updates that same tensor in place, so `{pair.holder}` read at line {pair.reads[0].line} shows the new "
                    "values. Copy with `.clone()`."
                )
                yield Hit(bind.node, message, copy_at_binding(bind), anchors=(write.node,))
