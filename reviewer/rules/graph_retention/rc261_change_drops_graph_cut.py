"""RC261 change-drops-graph-cut."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Accumulate, Bind, Call, Event, FunctionFlow, Return, Store
from review_copies.analysis.queries.autograd import graphless_helper_call
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.loops import loop_of
from review_copies.analysis.syntax import code_of, short_code
from review_copies.analysis.values import Kind, Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import dropped_at, dropped_words, restore
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.graph_retention.helpers import combined_after, differentiated, same_key_each_pass, under_tensor_methods

_CUTS = (".detach()", ".item()", "float(...)", "with torch.no_grad():")
_ADDERS = frozenset(("append", "extend", "insert", "put", "appendleft"))


_VALID = (
    Valid(
        """
        import torch
        class Model:
            def __init__(self, model):
                self.model = model

            def forward(self, batch):
                output = self.model(batch)
                results: dict[str, torch.Tensor] = {}
                energy = output["energy"]
                results["energy"] = energy
                forces = output["forces"]
                results["forces"] = forces
                results = {k: v.detach() for k, v in results.items()}
                return results
        """,
        "the change moved the cut: the dict is rebuilt from `v.detach()` before it is returned (SevenNet)",
        before="""
        import torch
        class Model:
            def __init__(self, model):
                self.model = model

            def forward(self, batch):
                output = self.model(batch)
                results: dict[str, torch.Tensor] = {}
                energy = output["energy"]
                results["energy"] = energy.detach()
                forces = output["forces"]
                results["forces"] = forces.detach()
                return results
        """,
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        def observe(net, opt, loss_fn, inputs, labels, buf_inputs, buf_logits, alpha: float):
            opt.zero_grad()
            tot_loss = 0
            loss = loss_fn(net(inputs), labels)
            tot_loss += loss
            loss_mse = alpha * F.mse_loss(net(buf_inputs), buf_logits)
            tot_loss += loss_mse
            tot_loss.backward()
            opt.step()
            return tot_loss.item()
        """,
        "the change backpropagates the sum once instead of each loss on its own: the dropped `.item()` is the point (mammoth's DER)",
        before="""
        import torch
        import torch.nn.functional as F
        def observe(net, opt, loss_fn, inputs, labels, buf_inputs, buf_logits, alpha: float):
            opt.zero_grad()
            tot_loss = 0
            loss = loss_fn(net(inputs), labels)
            loss.backward()
            tot_loss += loss.item()
            loss_mse = alpha * F.mse_loss(net(buf_inputs), buf_logits)
            loss_mse.backward()
            tot_loss += loss_mse.item()
            opt.step()
            return tot_loss
        """,
    ),
    Valid(
        """
        import torch
        def accuracy(scores, labels, num_classes=4):
            predictions = torch.max(scores, dim=1).indices
            accuracies = []
            for label in range(num_classes):
                mask = labels == label
                per_class = ((predictions == labels) & mask).float().sum() / mask.float().sum()
                accuracies.append(per_class.cpu().item())
            return accuracies
        def train(model, loader, opt, criterion):
            accuracies = []
            for points, labels in loader:
                scores = model(points)
                loss = criterion(scores, labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                accuracies.append(accuracy(scores, labels))
            return accuracies
        """,
        "the change moved `.item()` into `accuracy`, which now returns a list of numbers (RandLA-Net-pytorch)",
        before="""
        import torch
        def accuracy(scores, labels):
            predictions = torch.max(scores, dim=1).indices
            return (predictions == labels).float().mean()
        def train(model, loader, opt, criterion):
            accuracies = []
            for points, labels in loader:
                scores = model(points)
                loss = criterion(scores, labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                accuracies.append(accuracy(scores, labels).cpu().item())
            return accuracies
        """,
    ),
    Valid(
        """
        import torch
        class DinoLoss:
            def __init__(self):
                self.losses = {}
            def __call__(self, pred, target):
                dino_loss = torch.nn.functional.mse_loss(pred, target)
                if "dinov3" not in self.losses:
                    self.losses["dinov3"] = dino_loss.detach()
                else:
                    self.losses["dinov3"] = self.losses["dinov3"] + dino_loss.detach()
                return dino_loss
        """,
        "`.item()` became `.detach()` to keep the sum on the device: the graph is still cut (ai-toolkit)",
        before="""
        import torch
        class DinoLoss:
            def __init__(self):
                self.losses = {}
            def __call__(self, pred, target):
                dino_loss = torch.nn.functional.mse_loss(pred, target)
                if "dinov3" not in self.losses:
                    self.losses["dinov3"] = dino_loss.item()
                else:
                    self.losses["dinov3"] += dino_loss.item()
                return dino_loss
        """,
    ),
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
        def permutation_test(mmd, pooled: torch.Tensor, n: int, rounds: int):
            stats = []
            for _ in range(rounds):
                perm = torch.randperm(pooled.shape[0])
                stats.append(mmd(pooled[perm[:n]], pooled[perm[n:]]))
            return torch.stack(stats)
        """,
        "the list is stacked into the call's result after the loop: what it keeps is what the function returns",
        before="""
        import torch
        def permutation_test(mmd, pooled: torch.Tensor, n: int, rounds: int):
            stats = []
            for _ in range(rounds):
                perm = torch.randperm(pooled.shape[0])
                stats.append(mmd(pooled[perm[:n]], pooled[perm[n:]]).item())
            return torch.tensor(stats)
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
    Valid(
        """
        import torch
        def distil_observe(target: torch.Tensor, space):
            space.hidden_state = target
            return target
        """,
        "the attribute is set anew on each call: it holds the last step's graph (for a distillation loss), not one per step",
        before="""
        import torch
        def distil_observe(target: torch.Tensor, space):
            space.hidden_state = target.clone().detach()
            return target
        """,
    ),
)


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

    VALID = _VALID
    INVALID = (
        Invalid(
            """
            import torch
            class Strategy(torch.nn.Module):
                def predict(self, covar, mean_diff, test_mean):
                    if not hasattr(self, "_mean_cache"):
                        self._mean_cache = torch.linalg.solve(covar, mean_diff)
                    return test_mean + self._mean_cache
            """,
            line=5,
            before="""
            import torch
            class Strategy(torch.nn.Module):
                def predict(self, covar, mean_diff, test_mean):
                    if not hasattr(self, "_mean_cache"):
                        self._mean_cache = torch.linalg.solve(covar, mean_diff).detach()
                    return test_mean + self._mean_cache
            """,
            fix="""
            import torch
            class Strategy(torch.nn.Module):
                def predict(self, covar, mean_diff, test_mean):
                    if not hasattr(self, "_mean_cache"):
                        self._mean_cache = torch.linalg.solve(covar, mean_diff).detach()
                    return test_mean + self._mean_cache
            """,
        ),
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
            if event.line in reported or event.no_grad or not isinstance(event, (Call, Store, Accumulate, Bind)):
                continue
            # What the change dropped on this line first: it is cheap, and rare, where
            # `_kept` may walk the function for the `if` around a cache.
            dropped = dropped_at(flow, event.line, _CUTS)
            if not dropped:
                continue
            kept = _kept(flow, event)
            if kept is None or _detached_after(flow, event):
                continue
            value = event.args[0] if isinstance(event, Call) else event.value  # type: ignore[attr-defined]
            if value.kind not in (Kind.TENSOR, Kind.UNKNOWN) or value.grad is Tri.NO:
                continue  # (`.item()` swapped for `.detach()`: the graph is cut still, on the device)
            if value.kind is Kind.UNKNOWN and graphless_helper_call(flow, _kept_expression(event)):
                continue  # `accuracy(...)` now returns numbers: the `.item()` moved into it
            if isinstance(event, Accumulate) and differentiated(flow, event):
                continue  # `tot_loss += loss` then `tot_loss.backward()`: the change made it an in-graph sum on purpose
            loop = loop_of(flow, event)
            held = event.receiver_node.value if isinstance(event, Call) and isinstance(event.receiver_node, cst.Name) else event.container if isinstance(event, Store) else None
            if held is not None and loop is not None and combined_after(flow, held, loop):
                continue  # `perm_mmds.append(self.mmd(x, y))`, stacked into the result after the loop: this call's material
            reported.add(event.line)
            stmt = event.stmt or event.node
            if isinstance(event, Bind) or (isinstance(event, Store) and event.how == "setattr"):  # a cache filled once
                harm = (
                    "caches a value attached to the autograd graph, so the graph of the call that filled it stays alive as long as "
                    "the cache, and every later call reuses it (a second backward through it raises)"
                )
            elif isinstance(event, Store) and event.how == "setitem" and (loop is None or same_key_each_pass(flow, event, loop)):
                # One entry, replaced: what it keeps is the last value's graph, not one per step.
                harm = (
                    f"keeps {kept} attached to the autograd graph, so the graph of the last value put there (its nodes, and the "
                    f"activations too until `backward()` frees them) stays alive as long as `{event.container}` does"
                )
            else:
                harm = (
                    f"keeps {kept} attached to the autograd graph, so each step's graph (its nodes, and the activations too until "
                    "`backward()` frees them) stays alive as long as it does and memory grows step after step"
                )
            what = dropped_words(dropped)
            message = f"This change drops {what} from `{dropped[0].before}`: `{short_code(stmt)}` now {harm}. Put {what} back."
            if called_grad_off_in_repository(flow):
                return  # every caller runs it with autograd off: nothing it keeps holds a graph
            yield Hit(event.node, message, restore(event.stmt, dropped))


def _kept_expression(event: Event) -> cst.BaseExpression | None:
    """The code of what the statement keeps, stripped of the calls a graph passes through
    (`.cpu()`, `.float()`)."""
    if isinstance(event, Call):
        expr = event.call.args[0].value if event.call.args else None
    else:
        expr = event.expr if isinstance(event, Bind) else getattr(event, "value_node", None)
    return under_tensor_methods(expr)


def _kept(flow: FunctionFlow, event: Event) -> str | None:
    """How the statement keeps its value past the step, in a few words; None if it does not."""
    if isinstance(event, Call) and event.method in _ADDERS and event.args and isinstance(event.receiver_node, (cst.Name, cst.Attribute)):
        # `history.append(x)` on a container the analysis knows nothing of (an argument).
        return f"what it adds to `{short_code(event.receiver_node)}`"
    if isinstance(event, Store) and event.how != "setattr":
        return f"what it puts in `{event.container}`"
    if isinstance(event, Accumulate):
        return f"what `{event.name}` accumulates"
    # `self.last = x` or `space.hidden_state = x` replaces what the attribute held: it keeps
    # the last step's graph, not one per step (a distillation hook keeps it for its loss).
    # Filled once and reused (`if not hasattr(self, "_cache"): self._cache = ...`), it keeps
    # the graph of the step that filled it for every later one.
    name = event.name if isinstance(event, Bind) else event.container if isinstance(event, Store) else None
    if name is not None and name.startswith("self.") and _filled_once(flow, event, name):
        return f"`{name}`"
    return None


def _detached_after(flow: FunctionFlow, event: Event) -> bool:
    """`results["energy"] = energy`, then `results = {k: v.detach() for k, v in results.items()}`
    before anything returns: the change moved the cut to one place, and the dict that held the
    graph is dropped there."""
    if not isinstance(event, Store) or "." in event.container:
        return False
    for later in flow.events:
        if later.index <= event.index:
            continue
        if isinstance(later, Return):
            return False
        if isinstance(later, Bind) and later.name == event.container and isinstance(later.expr, (cst.DictComp, cst.ListComp)):
            element = later.expr.value if isinstance(later.expr, cst.DictComp) else later.expr.elt
            return isinstance(element, cst.Call) and isinstance(element.func, cst.Attribute) and element.func.attr.value in ("detach", "item", "tolist")
    return False


def _filled_once(flow: FunctionFlow, event: Event, name: str) -> bool:
    """Is the assignment inside an `if` that fills the attribute only while it is missing
    (`if not hasattr(self, "_cache"):`, `if self._cache is None:`)?"""
    attr = name.split(".", 1)[1]
    scope = flow.scope
    if scope is None or event.stmt is None:
        return False
    found: list[bool] = []
    target = event.stmt

    class _Guards(cst.CSTVisitor):
        def __init__(self) -> None:
            self.tests: list[str] = []

        def visit_If(self, node: cst.If) -> None:
            self.tests.append(code_of(node.test))

        def leave_If(self, original_node: cst.If) -> None:
            self.tests.pop()

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            if node is target or any(small is target for small in node.body):
                found.append(any(re.search(rf"hasattr\(\s*self\s*,\s*['\"]{re.escape(attr)}['\"]", t) or f"self.{attr} is None" in t for t in self.tests))

    scope.node.visit(_Guards())
    return any(found)
