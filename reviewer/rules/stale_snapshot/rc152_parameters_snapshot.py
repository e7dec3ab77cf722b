"""RC152 parameters-snapshot."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import Bind, FunctionFlow
from review_copies.analysis.guesses import SNAPSHOT_NAME
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.stale_snapshot.helpers import changes_after, owner_of, read_after


class ParametersSnapshot(Rule):
    """
    ## What it does
    Finds parameters kept as a "before" snapshot by reference — `init = list(model.parameters())`,
    `w0 = model.fc.weight`, `[p for p in model.parameters()]` — while training goes on
    changing them, and the snapshot is read afterwards (to compare, to measure drift, to
    restore).

    ## Why is this bad?
    These are the live `Parameter` objects. Optimizer steps update them in place, so the
    snapshot changes with them and every comparison against it sees no difference.

    ## Example
    ```python
    initial = [p for p in model.parameters()]
    train(model, optimizer)
    drift = sum((p - q).norm() for p, q in zip(model.parameters(), initial))   # always 0
    ```

    ## Use instead
    ```python
    initial = [p.detach().clone() for p in model.parameters()]
    ```

    ## Fix safety
    Safe: the copies hold the values at that moment and are out of the graph.
    """

    code = "RC152"
    name = "parameters-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("parameters", "weight", "bias")
    recipes = ("snapshot",)

    VALID = (
        Valid(
            """
            import torch
            def fit(model, loader):
                params = list(model.parameters())
                opt = torch.optim.SGD(params, lr=0.1)
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    torch.nn.utils.clip_grad_norm_(params, 1.0)
                    opt.step()
            """,
            "a handle on the parameters, not a snapshot",
        ),
        Valid(
            """
            import torch
            def drift(model, loader, opt):
                initial = [p.detach().clone() for p in model.parameters()]
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return sum((p - q).norm() for p, q in zip(model.parameters(), initial))
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def drift(model, loader, opt):
                initial = list(model.parameters())
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return sum((p - q).norm() for p, q in zip(model.parameters(), initial))
            """,
            line=3,
            fix="""
            import torch
            def drift(model, loader, opt):
                initial = [p.detach().clone() for p in model.parameters()]
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return sum((p - q).norm() for p, q in zip(model.parameters(), initial))
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            value = bind.value
            element = value.element
            is_list = (
                value.kind in (Kind.PARAMETER_LIST, Kind.LIST)
                and element is not None
                and element.kind is Kind.TENSOR
                and (element.leaf or any(roots.is_gradient(r) for r in element.roots))
            )
            is_param = value.kind is Kind.TENSOR and value.leaf and isinstance(bind.expr, cst.Attribute)
            if not (is_list or is_param) or bind.expr is None or not SNAPSHOT_NAME.search(bind.name):
                continue
            held = element.roots if is_list and element is not None else value.roots
            change = changes_after(flow, bind, held, owner_of(bind.expr))
            if change is None:
                continue
            read = read_after(flow, bind.name, change, held, bind)
            if read is None:
                continue
            message = (
                f"`{bind.name} = {short_code(bind.expr)}` keeps the live parameters, not their values: `{short_code(change.node)}` at "
                f"line {change.line} updates them in place, so `{bind.name}` read at line {read.line} shows the new values. "
                "Copy with `.detach().clone()`."
            )
            yield Hit(bind.node, message, _param_fix(bind.expr, is_list), anchors=(read.node,))


def _param_fix(expr: cst.BaseExpression, is_list: bool) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    if not is_list:
        return expr, chain(atom(expr), "detach", "clone")
    source = expr
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1:
        source = expr.args[0].value
    elif isinstance(expr, cst.ListComp) and isinstance(expr.elt, cst.Name) and isinstance(expr.for_in.target, cst.Name) and expr.elt.value == expr.for_in.target.value and not expr.for_in.ifs:
        source = expr.for_in.iter
    else:
        return None
    p = cst.Name("p")
    return expr, cst.ListComp(elt=chain(p, "detach", "clone"), for_in=cst.CompFor(target=p, iter=source))
