"""RC254 argument-kept-by-accumulator."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow
from review_copies.analysis.queries.aliasing import last_bind
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.loops import bound_outside, loop_of, training_loop
from review_copies.analysis.rewrite import atom
from review_copies.analysis.syntax import dotted, short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.graph_retention.helpers import detached


class ArgumentKeptByAccumulator(Rule):
    """
    ## What it does
    Finds a tensor attached to the graph (a loss, a model output) handed, inside a
    training loop, to a method of an object that outlives the loop when that method
    keeps its argument: `meter.update(loss)` where `AverageMeter.update` does
    `self.sum += val * n`, or appends it to a list on `self`. The method is read from the
    repository (its file, or any file that defines the class).

    ## Why is this bad?
    `self.sum += val * n` with `val` attached builds a graph node that references the
    step's whole graph, every step: the meter keeps every iteration's activations alive,
    and memory grows until the epoch ends or the process dies. The call looks harmless
    at the call site; the fact lives in the class.

    ## Example
    ```python
    losses = AverageMeter()
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.update(loss, x.size(0))
    ```

    ## Use instead
    ```python
        losses.update(loss.detach(), x.size(0))   # or loss.item()
    ```

    ## Fix safety
    Safe: `.detach()` passes the same value, without the graph; the method computes what
    it did.

    ## Known problems
    The object's class is read from `obj = Class(...)` in the same function; an object
    handed in as an argument or built elsewhere is not followed.
    """

    code = "RC254"
    name = "argument-kept-by-accumulator"
    category = Category.GRAPH_RETENTION
    severity = Severity.WARNING
    prefilter = ("backward", "step(")
    recipes = ("retention",)

    VALID = (
        Valid(
            """
            import torch
            class AverageMeter:
                def __init__(self):
                    self.sum, self.count = 0.0, 0
                def update(self, val, n=1):
                    self.sum += val * n
                    self.count += n
            def train(model, loader, optimizer):
                losses = AverageMeter()
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.update(loss.item(), x.size(0))
                return losses.sum
            """,
        ),
        Valid(
            """
            import torch
            class Printer:
                def update(self, val, n=1):
                    print(val, n)
            def train(model, loader, optimizer):
                log = Printer()
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    log.update(loss, x.size(0))
            """,
            "the method does not keep what it is given",
        ),
        Valid(
            """
            import torch
            class Meter:
                def __init__(self):
                    self.y_pred, self.y_true = [], []
                def update(self, y_pred, y_true):
                    self.y_pred.append(y_pred.detach().cpu())
                    self.y_true.append(y_true.detach().cpu())
            def train(model, loader, optimizer):
                meter = Meter()
                for x, y in loader:
                    prediction = model(x)
                    loss = (prediction - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    meter.update(prediction, y)
            """,
            "the method keeps `y_pred.detach().cpu()`: values, no graph",
        ),
        Valid(
            """
            import torch
            class Classifier:
                def fit_with_differentiable_input(self, x, y):
                    self.executor_ = (x, y)
                def predict(self, x):
                    return self.executor_[0].sum() * x
            def tune(prompt_x, prompt_y, loader, lossfn):
                clf = Classifier()
                prompt_x.requires_grad_(True)
                optim = torch.optim.Adam([prompt_x], lr=1e-2)
                for xb, yb in loader:
                    optim.zero_grad()
                    clf.fit_with_differentiable_input(prompt_x, prompt_y)
                    loss = lossfn(clf.predict(xb), yb)
                    loss.backward()
                    optim.step()
            """,
            "the prompt being tuned is a leaf: keeping it keeps no graph (TabPFN's prompt tuning)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            class AverageMeter:
                def __init__(self):
                    self.sum, self.count = 0.0, 0
                def update(self, val, n=1):
                    self.sum += val * n
                    self.count += n
            def train(model, loader, optimizer):
                losses = AverageMeter()
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.update(loss, x.size(0))
                return losses.sum
            """,
            line=14,
            fix="""
            import torch
            class AverageMeter:
                def __init__(self):
                    self.sum, self.count = 0.0, 0
                def update(self, val, n=1):
                    self.sum += val * n
                    self.count += n
            def train(model, loader, optimizer):
                losses = AverageMeter()
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.update(loss.detach(), x.size(0))
                return losses.sum
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if flow.index is None:
            return
        for call in flow.of(Call):
            if call.method is None or call.no_grad or not isinstance(call.receiver_node, cst.Name):
                continue
            loop = loop_of(flow, call)
            owner = call.receiver_node.value
            if loop is None or not training_loop(flow, loop) or not bound_outside(flow, owner, loop):
                continue
            cls = _class_of(flow, owner, call)
            if cls is None:
                continue
            for position, (arg, value) in enumerate(zip(call.call.args, call.args)):
                if not value.attached or value.leaf or arg.star:
                    continue  # (a leaf, a parameter or a prompt being tuned, has no graph behind it to keep)
                keyword = arg.keyword.value if arg.keyword is not None else None
                kept = flow.index.keeps(cls, call.method, None if keyword else position, keyword)
                if kept is None:
                    continue
                what = short_code(arg.value)
                operand = short_code(atom(arg.value))
                verb = "accumulates it into" if kept.how == "accumulates" else "stores it in"
                message = (
                    f"`{short_code(call.node)}` hands `{what}`, which is attached to the autograd graph, to "
                    f"`{cls}.{call.method}`, which {verb} `self.{kept.attr}` ({kept.path}:{kept.line}): the object outlives "
                    f"the loop at line {loop.start}, so every step's graph (its nodes, and the activations too until `backward()` frees them) stays alive with it. Pass "
                    f"`{operand}.detach()` (or `{operand}.item()`)."
                )
                if called_grad_off_in_repository(flow):
                    return  # every caller runs it with autograd off: nothing it keeps holds a graph
                yield Hit(call.node, message, (arg.value, detached(arg.value)))
                break


def _class_of(flow: FunctionFlow, name: str, call: Call) -> str | None:
    """The class `name` was built from in this function: `name = Class(...)`."""
    bind = last_bind(flow, name, call.index)
    if not isinstance(bind, Bind) or not isinstance(bind.expr, cst.Call):
        return None
    cls = dotted(bind.expr.func).rsplit(".", 1)[-1]
    return cls if cls[:1].isupper() else None
