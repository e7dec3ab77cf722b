"""graph-retention: a tensor still attached to the graph is kept past its step."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from review_copies.analysis.flow import Accumulate, Backward, Bind, FunctionFlow, Store, short_code
from review_copies.analysis.flowquery import bound_outside, loop_of, name_of, outermost_loop, training_loop
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


def _backward_on(flow: FunctionFlow, name: str) -> bool:
    for event in flow.of(Backward):
        func = event.node.func if isinstance(event.node, cst.Call) else None
        if isinstance(func, cst.Attribute) and name_of(func.value) == name:
            return True
    return False


def _detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    return chain(atom(expr), "detach")


class AccumulatedAttachedTensor(Rule):
    """
    ## What it does
    Finds `total += loss` (or another tensor attached to the graph) in a loop, where the
    accumulator lives across iterations and is never backpropagated.

    ## Why is this bad?
    Each `+=` adds a node that references the iteration's whole graph, so every
    iteration's activations stay alive until the accumulator dies: memory grows with
    every step (torch 2.13, a small MLP: +98.5 MiB over 50 iterations with `+= loss`,
    +4.0 MiB with `+= loss.item()`). This is the first item of PyTorch's FAQ on memory.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    ```

    ## Use instead
    ```python
        total += loss.item()     # or loss.detach()
    ```

    ## Fix safety
    Safe: `.detach()` keeps the same value and type (a tensor), only without the graph;
    `.item()` is the idiom when a Python number is wanted. Accumulators that are
    backpropagated (an in-graph sum of losses) are not reported.
    """

    code = "RC251"
    name = "accumulated-attached-tensor"
    category = Category.GRAPH_RETENTION
    severity = Severity.WARNING
    prefilter = ("+", "-=")
    probe = "retention"

    VALID = (
        Valid(
            """
            import torch
            def train(model, loader, optimizer):
                total = 0.0
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
                return total
            """
        ),
        Valid(
            """
            import torch
            def train(model, batches, optimizer):
                total = 0
                for x, y in batches:
                    total += (model(x) - y).pow(2).mean()
                total.backward()
                optimizer.step()
            """,
            "an in-graph sum that is backpropagated",
        ),
        Valid(
            """
            import torch
            def evaluate(model, loader):
                total = 0.0
                with torch.no_grad():
                    for x, y in loader:
                        total += (model(x) - y).abs().mean()
                return total
            """,
            "under no_grad nothing is attached",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def train(model, loader, optimizer):
                total = 0.0
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    total += loss
                return total
            """,
            line=8,
            fix="""
            import torch
            def train(model, loader, optimizer):
                total = 0.0
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    total += loss.detach()
                return total
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for acc in flow.of(Accumulate):
            loop = loop_of(flow, acc)
            persistent = acc.name.startswith("self.")
            if acc.no_grad or not acc.value.attached or _backward_on(flow, acc.name):
                continue
            if loop is None and not persistent:
                continue
            outer = (outermost_loop(flow, acc) or loop) if loop is not None else None
            # Sums over layers or heads inside one forward are part of the graph on purpose:
            # only accumulation across training steps (or across calls, on self) retains graphs.
            if outer is not None and not persistent and not (training_loop(flow, outer) and bound_outside(flow, acc.name, loop)):
                continue
            what = short_code(acc.value_node)
            where = f"on every iteration of the loop at line {outer.start}" if outer is not None else "on every call (it lives on `self`)"
            message = (
                f"`{acc.name}` accumulates `{what}`, which is attached to the autograd graph, {where}: each step's graph "
                f"(all its activations) stays alive as long as `{acc.name}`, so memory grows step after step. Accumulate "
                f"`{what}.item()` or `{what}.detach()`."
            )
            yield Hit(acc.node, message, (acc.value_node, _detached(acc.value_node)))


class StoredAttachedTensor(Rule):
    """
    ## What it does
    Finds a tensor attached to the graph (a loss, a model output) stored in a list, a
    dict or an attribute that outlives the loop iteration (`losses.append(loss)`,
    `history["loss"] = loss`, `self.outputs.append(out)`), without `.detach()` or
    `.item()`.

    ## Why is this bad?
    The container keeps each iteration's whole graph alive: memory grows with every step
    until the container is dropped, and a long run ends in an out-of-memory error.

    ## Example
    ```python
    losses = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    ```

    ## Use instead
    ```python
        losses.append(loss.item())      # or loss.detach()
    ```

    ## Fix safety
    Safe: `.detach()` stores the same values; only the graph is let go. Lists that are
    summed and backpropagated afterwards are not reported.
    """

    code = "RC252"
    name = "stored-attached-tensor"
    category = Category.GRAPH_RETENTION
    severity = Severity.WARNING
    prefilter = ("append", "[", "self.", "extend", "insert")
    probe = "retention"

    VALID = (
        Valid(
            """
            import torch
            def train(model, loader, optimizer):
                losses = []
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.item())
                return losses
            """
        ),
        Valid(
            """
            import torch
            def multi_loss(model, batches):
                losses = []
                for x, y in batches:
                    losses.append((model(x) - y).pow(2).mean())
                torch.stack(losses).sum().backward()
            """,
            "kept to be backpropagated together",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def train(model, loader, optimizer):
                losses = []
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss)
                return losses
            """,
            line=8,
            fix="""
            import torch
            def train(model, loader, optimizer):
                losses = []
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.detach())
                return losses
            """,
        ),
        Invalid(
            """
            import torch
            def train(model, loader, optimizer, log: dict):
                for step, (x, y) in enumerate(loader):
                    out = model(x)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    log[step] = loss
            """,
            line=8,
            fix="""
            import torch
            def train(model, loader, optimizer, log: dict):
                for step, (x, y) in enumerate(loader):
                    out = model(x)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    log[step] = loss.detach()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for store in flow.of(Store):
            if store.how not in ("append", "insert", "extend", "setitem", "add") or store.no_grad or not store.value.attached:
                continue
            if store.value.kind is not Kind.TENSOR or store.value_node is None or store.value.leaf:
                continue
            loop = loop_of(flow, store)
            container = store.container
            # Growing a list on self keeps every call's graph; a keyed cache on self does not grow.
            persistent = container.startswith("self.") and store.how in ("append", "extend", "insert")
            if loop is None and not persistent:
                continue
            outer = outermost_loop(flow, store) or loop
            if loop is not None and not persistent and not (training_loop(flow, outer) and bound_outside(flow, container, loop)):
                continue
            if loop is not None and any(isinstance(e, Backward) and e.line > loop.end for e in flow.events):
                continue
            what = short_code(store.value_node)
            where = f"on every iteration of the loop at line {loop.start}" if loop is not None else "on every call"
            message = (
                f"`{what}` is attached to the autograd graph and is kept in `{container}` {where}: each stored tensor keeps its "
                f"step's whole graph alive, so memory grows step after step. Store `{what}.detach()` (or `.item()` for a number)."
            )
            yield Hit(store.node, message, (store.value_node, _detached(store.value_node)))


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
    probe = "retention"

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
            message = (
                f"`{bind.name}` is fed back into `{short_code(stmt.value.func)}` on every step of the loop at line {loop.start} straight from "
                f"its output, which is attached to the previous step's graph: the graph grows over the loop and the next backward() "
                f"goes through the freed one (\"Trying to backward through the graph a second time\"). Detach `{bind.name}` between steps."
            )
            yield Hit(bind.node, message)
