"""RC253 carried-hidden-state."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Backward, Bind, Call, FunctionFlow
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.loops import bound_outside, loop_of
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Kind, Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class CarriedHiddenState(Rule):
    """
    ## What it does
    Finds a recurrent state carried from one training step to the next straight from the
    model's output — `out, hidden = model(x, hidden)` in a loop that backpropagates every
    step — without `.detach()`.

    ## Why is this bad?
    The carried state keeps the previous step's graph: the graph grows over the whole
    loop, and the second `loss.backward()` raises "Trying to backward through the graph a
    second time" (or, with `retain_graph=True`, backpropagates through every earlier
    batch). Truncated BPTT detaches the state between batches (pytorch/examples'
    `repackage_hidden`).

    ## Example
    ```python
    hidden = None
    for x, y in batches:
        out, hidden = model(x, hidden)
        loss = criterion(out, y)
        loss.backward()
    ```

    ## Use instead
    ```python
    for x, y in batches:
        if hidden is not None:
            hidden = hidden.detach()        # or a repackage_hidden() for LSTM tuples
        out, hidden = model(x, hidden)
    ```

    ## Fix safety
    No automatic fix (the state's shape, a tensor or a tuple, decides how to detach it).
    """

    code = "RC253"
    name = "carried-hidden-state"
    category = Category.GRAPH_RETENTION
    severity = Severity.ERROR
    prefilter = ("backward",)
    recipes = ("retention",)

    VALID = (
        Valid(
            """
            import torch
            def train(model, batches, opt):
                hidden = None
                for x, y in batches:
                    if hidden is not None:
                        hidden = hidden.detach()
                    out, hidden = model(x, hidden)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    opt.step()
            """
        ),
        Valid(
            """
            import torch
            def run(model, batches, opt, repackage):
                hidden = None
                for x, y in batches:
                    out, hidden = model(x, hidden)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    opt.step()
                    hidden = repackage(hidden)
            """,
            "the state is rebound after each step by a helper that detaches it (depthbasedRL's `detach_hidden_state`)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def train(model, batches, opt):
                hidden = None
                for x, y in batches:
                    out, hidden = model(x, hidden)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    opt.step()
            """,
            line=5,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            def train(model, batches, opt):
                proj = nn.Linear(8, 8)
                hidden = None
                for x, y in batches:
                    out, hidden = model(x, hidden)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    opt.step()
                    hidden = proj(hidden)
            """,
            line=7,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            loop = loop_of(flow, bind)
            stmt = bind.stmt
            if loop is None or not isinstance(stmt, cst.Assign) or not isinstance(stmt.value, cst.Call) or bind.value.kind is Kind.SCALAR:
                continue
            passed = {name_of(a.value) for a in stmt.value.args}
            if bind.name not in passed or not bound_outside(flow, bind.name, loop) or bind.no_grad:
                continue
            if not any(isinstance(e, Backward) and loop.start <= e.line <= loop.end for e in flow.events):
                continue
            callee = flow.value(stmt.value.func)
            if callee.kind is not Kind.MODULE:
                continue
            if any(isinstance(e, Bind) and e.name == bind.name and e.index < bind.index and set(e.loops) & set(bind.loops) for e in flow.events):
                continue  # rebound earlier in the iteration (detached, repackaged)
            if any(isinstance(e, Bind) and e.name == bind.name and e.index > bind.index and set(e.loops) & set(bind.loops) and _repackaged(flow, e) for e in flow.events):
                continue  # rebound later in the iteration by a helper (`h = detach_hidden(h)` after the step)
            message = (
                f"`{bind.name}` is fed back into `{short_code(stmt.value.func)}` on every step of the loop at line {loop.start} straight from "
                f"its output, which is attached to the previous step's graph: the graph grows over the loop and the next backward() "
                f"goes through the freed one (\"Trying to backward through the graph a second time\"). Detach `{bind.name}` between steps."
            )
            if called_grad_off_in_repository(flow):
                return  # every caller runs it with autograd off: nothing it keeps holds a graph
            yield Hit(bind.node, message)


def _repackaged(flow: FunctionFlow, bind: Bind) -> bool:
    """`h = h.detach()`, or `h = repackage(h)`: a function of this repository (or one handed in)
    rebuilds the state, as truncated BPTT does. `h = h * decay`, `torch.tanh(h)` or a module's
    `h = proj(h)` keeps the graph."""
    if bind.value.grad is Tri.NO:
        return True
    call = next((e for e in flow.of(Call) if e.node is bind.expr), None)
    if call is None or call.method is not None or not isinstance(call.call.func, cst.Name) or flow.value(call.call.func).kind is Kind.MODULE:
        return False  # `h = proj(h)` with a module: its output is attached
    return not any(q.startswith("torch") for q in call.qualnames)

