"""RC303 change-constructs-from-tensor."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import FunctionFlow
from review_copies.analysis.syntax import short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class ChangeConstructsFromTensor(Rule):
    """
    ## What it does
    Finds a change that replaces an explicit tensor copy (`x.detach().clone()`,
    `x.clone()`) with `torch.tensor(x)` (or `tensor(x)`, `torch.Tensor(x)`): the base
    version's `.clone()` says `x` is a tensor.

    ## Why is this bad?
    `torch.tensor(t)` on a tensor copies it and warns ("To copy construct from a tensor,
    it is recommended to use sourceTensor.clone().detach()"); the legacy constructors may
    even share its memory. It does what the base version did, less clearly, with a
    warning on every call (torchmetrics replaced `torch.tensor(fpr_range)` with
    `fpr_range.detach().clone()` to silence it).

    ## Example
    ```python
    # before the change: bounds = torch.log10(fpr_range.detach().clone())
    bounds = torch.log10(torch.tensor(fpr_range))
    ```

    ## Use instead
    ```python
    bounds = torch.log10(fpr_range.detach().clone())
    ```

    ## Fix safety
    Safe: the fix is the statement as the base version wrote it.
    """

    code = "RC303"
    name = "change-constructs-from-tensor"
    category = Category.COPY_CONSTRUCT
    severity = Severity.WARNING
    prefilter = ("ensor(",)
    recipes = ("warning", "alias")
    follows_change = True

    VALID = (
        Valid(
            """
            import torch
            def ids(tokens):
                return torch.tensor(tokens)
            """,
            "the base version took `tokens` as it was: nothing says it is a tensor",
            before="""
            import torch
            def ids(tokens):
                return torch.as_tensor(tokens)
            """,
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def bounds(fpr_range):
                return torch.log10(torch.tensor(fpr_range))
            """,
            line=3,
            before="""
            import torch
            def bounds(fpr_range):
                return torch.log10(fpr_range.detach().clone())
            """,
            fix="""
            import torch
            def bounds(fpr_range):
                return torch.log10(fpr_range.detach().clone())
            """,
            note="torchmetrics' logauc, simplified",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if flow.change is None:
            return
        for made in flow.change.constructed:
            if ".clone()" not in made.before and ".detach()" not in made.before:
                continue
            stmt = next((e.stmt for e in flow.events if e.line == made.line and e.stmt is not None), None)
            if stmt is None:
                continue
            message = (
                f"This change replaces the explicit copy of `{made.before}` with `{made.constructor}`: the base version's "
                f"`.clone()` says the value is a tensor, and `{made.constructor}` on a tensor copies it with a warning on every "
                f"call (`{short_code(stmt)}`). Keep `.detach().clone()`."
            )
            yield Hit(stmt, message, _restore(stmt, made.before))


def _restore(stmt: cst.CSTNode, before: str) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    try:
        line = cst.parse_statement(before + "\n")
    except cst.ParserSyntaxError:
        return None
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or type(line.body[0]) is not type(stmt):
        return None
    return stmt, line.body[0]
