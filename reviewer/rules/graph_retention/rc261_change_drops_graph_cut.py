"""RC261 change-drops-graph-cut."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Accumulate, Bind, Call, Event, FunctionFlow, Store
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import dropped_at, dropped_words, restore
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_CUTS = (".detach()", ".item()", "float(...)", "with torch.no_grad():")
_ADDERS = frozenset(("append", "extend", "insert", "put", "appendleft"))


class ChangeDropsGraphCut(Rule):
    """
    ## What it does
    Finds a change that takes the `.detach()`, `.item()`, `float(...)` or `with
    torch.no_grad():` off a statement that keeps a value past its step: appends it to a
    list, stores it in a dict or on `self`, or accumulates it.

    ## Why is this bad?
    The protection was what cut the value off the autograd graph. Without it, what is
    kept is a tensor attached to the step's graph, and every step's activations stay
    alive as long as the list, dict or accumulator: memory grows until the process runs
    out (trl's CPO trainer kept `policy_nll_loss.cpu().mean()` in its metrics and leaked
    this way). The author of the base version knew the value could be attached; the
    change is the evidence.

    ## Example
    ```python
    # before the change: self.history.append(loss.detach())
    self.history.append(loss)
    ```

    ## Use instead
    ```python
    self.history.append(loss.detach())
    ```

    ## Fix safety
    Safe: the fix is the statement as the base version wrote it; only the protection
    differs. A dropped `no_grad` block is reported without a fix.

    ## Known problems
    Statements are compared as text: a change that also rewrites the statement is not
    matched, and the rules then judge the new version alone.
    """

    code = "RC261"
    name = "change-drops-graph-cut"
    category = Category.GRAPH_RETENTION
    severity = Severity.WARNING
    prefilter = ("torch",)
    recipes = ("retention",)
    follows_change = True

    VALID = (
        Valid(
            """
            import torch
            class Tracker:
                def __init__(self):
                    self.history = []
                def log(self, loss):
                    self.history.append(loss.detach())
            """,
            "the change keeps the detach",
            before="""
            import torch
            class Tracker:
                def __init__(self):
                    self.history = []
                def log(self, loss):
                    self.history.append(loss.detach().cpu())
            """,
        ),
        Valid(
            """
            import torch
            def scores(values):
                out = []
                for v in values:
                    out.append(v)
                return out
            """,
            "the dropped `.item()` was on a statement that keeps nothing across steps",
            before="""
            import torch
            def scores(values):
                out = []
                for v in values:
                    n = v.item()
                    out.append(v)
                return out
            """,
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            class Tracker:
                def __init__(self):
                    self.history = []
                def log(self, loss):
                    self.history.append(loss)
            """,
            line=6,
            before="""
            import torch
            class Tracker:
                def __init__(self):
                    self.history = []
                def log(self, loss):
                    self.history.append(loss.detach())
            """,
            fix="""
            import torch
            class Tracker:
                def __init__(self):
                    self.history = []
                def log(self, loss):
                    self.history.append(loss.detach())
            """,
        ),
        Invalid(
            """
            import torch
            def train(model, loader, opt, metrics):
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    opt.step()
                    metrics["loss"] = loss.cpu().mean()
            """,
            line=7,
            before="""
            import torch
            def train(model, loader, opt, metrics):
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    opt.step()
                    metrics["loss"] = loss.detach().mean().cpu()
            """,
            fix="""
            import torch
            def train(model, loader, opt, metrics):
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    opt.step()
                    metrics["loss"] = loss.detach().mean().cpu()
            """,
            note="trl's CPO trainer, simplified",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if flow.change is None:
            return
        reported: set[int] = set()
        for event in flow.events:
            kept = _kept(event)
            if kept is None or event.line in reported or event.no_grad:
                continue
            dropped = dropped_at(flow, event.line, _CUTS)
            value = event.args[0] if isinstance(event, Call) else event.value  # type: ignore[attr-defined]
            if not dropped or value.kind not in (Kind.TENSOR, Kind.UNKNOWN):
                continue
            reported.add(event.line)
            stmt = event.stmt or event.node
            message = (
                f"This change drops {dropped_words(dropped)} from `{dropped[0].before}`: `{short_code(stmt)}` now keeps "
                f"{kept} attached to the autograd graph, so each step's graph (its nodes, and the activations too until `backward()` frees them) stays alive as long as it "
                f"does and memory grows step after step. Put {dropped_words(dropped)} back."
            )
            if called_grad_off_in_repository(flow):
                return  # every caller runs it with autograd off: nothing it keeps holds a graph
            yield Hit(event.node, message, restore(event.stmt, dropped))


def _kept(event: Event) -> str | None:
    """How the statement keeps its value past the step, in a few words; None if it does not."""
    if isinstance(event, Call) and event.method in _ADDERS and event.args and isinstance(event.receiver_node, (cst.Name, cst.Attribute)):
        # `history.append(x)` on a container the analysis knows nothing of (an argument).
        return f"what it adds to `{short_code(event.receiver_node)}`"
    if isinstance(event, Store):
        return f"what it puts in `{event.container}`"
    if isinstance(event, Accumulate):
        return f"what `{event.name}` accumulates"
    if isinstance(event, Bind) and event.name.startswith("self."):
        return f"`{event.name}`"
    return None
