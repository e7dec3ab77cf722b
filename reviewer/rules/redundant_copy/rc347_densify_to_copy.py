"""RC347 densify-to-copy."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow
from review_copies.analysis.guesses import BACKUP_NAME
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.syntax import call_method_name, receiver_of, short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class DensifyToCopy(Rule):
    """
    ## What it does
    Finds a sparse tensor copied by densifying it and converting back
    (`s.to_dense().to_sparse()`), or densified only to be cloned.

    ## Why is this bad?
    `to_dense()` materialises every zero: memory grows from the number of non-zeros to the
    full size (often by orders of magnitude) just to make a copy that `s.clone()` makes at
    sparse size.

    ## Example
    ```python
    backup = adjacency.to_dense().to_sparse()
    ```

    ## Use instead
    ```python
    backup = adjacency.clone().coalesce()
    ```

    ## Fix safety
    Safe: the same values, still sparse and coalesced, without the dense intermediate.
    """

    code = "RC347"
    name = "densify-to-copy"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("to_dense",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            def f(s: torch.Tensor):
                return s.to_dense()
            """,
            "dense is what is wanted",
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def fit(adj: torch.Tensor, logits: torch.Tensor):
                adj_orig = adj.to_dense()
                return F.binary_cross_entropy_with_logits(logits, adj_orig)
            """,
            "the dense matrix is the loss's target, never restored as the sparse one: densifying is the point",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(s: torch.Tensor):
                return s.to_dense().to_sparse()
            """,
            line=3,
            fix="""
            import torch
            def f(s: torch.Tensor):
                return s.clone().coalesce()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            if isinstance(bind.expr, cst.Call) and call_method_name(bind.expr) == "to_dense" and not bind.expr.args and BACKUP_NAME.search(bind.name):
                base = receiver_of(bind.expr)
                if name_of(base) == bind.name:
                    continue  # `x = x.to_dense()`: converting, not keeping a backup
                if f"{bind.name}.to_sparse(" not in flow.file.text:
                    continue  # never turned back into the sparse tensor: the dense one is what is used
                message = (
                    f"`{bind.name} = {short_code(bind.expr)}` keeps a copy of a sparse tensor by densifying it: every zero is "
                    f"materialised (full-size memory) for a backup that `{short_code(base)}.clone()` makes at sparse size "
                    "(restore it without `.to_sparse()` then)."
                )
                yield Hit(bind.node, message)
        for event in flow.of(Call):
            if event.method != "to_sparse" or event.call.args or event.receiver_node is None:
                continue
            inner = event.receiver_node
            if not (isinstance(inner, cst.Call) and call_method_name(inner) == "to_dense" and not inner.args):
                continue
            base = receiver_of(inner)
            message = (
                f"`{short_code(event.node)}` copies a sparse tensor through a dense one: every zero is materialised (full-size memory) "
                f"for a copy that `{short_code(base)}.clone().coalesce()` makes at sparse size."
            )
            yield Hit(event.node, message, (event.node, chain(atom(base), "clone", "coalesce")), probe=_sparse_probe(flow, base))


def _sparse_probe(flow: FunctionFlow, base: cst.BaseExpression) -> str:
    """A call of the function with a sparse tensor for the densified argument."""
    scope = flow.scope
    if scope is None or scope.kind != "function" or not isinstance(base, cst.Name) or list(flow.params) != [base.value]:
        return ""
    return f"import torch\n{scope.name}(torch.eye(4).to_sparse())\n"
