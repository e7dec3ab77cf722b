"""RC322 change-drops-detach-before-numpy."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.change import Dropped
from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Device, Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import dropped_at, dropped_words, restore
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_GUARDS = (".detach()", ".cpu()")
_CONVERSIONS = (".numpy()", "np.asarray(", "np.array(", "numpy.asarray(", "numpy.array(")


class ChangeDropsDetachBeforeNumpy(Rule):
    """
    ## What it does
    Finds a change that takes the `.detach()` or `.cpu()` off a statement that converts a
    tensor to NumPy (`.numpy()`, `np.asarray(t)`).

    ## Why is this bad?
    The base version's guard is the evidence that the tensor can require grad or live on
    a GPU. Without `.detach()`, `.numpy()` raises "Can't call numpy() on Tensor that
    requires grad"; without `.cpu()`, it raises "can't convert cuda:0 device type tensor
    to numpy" (allennlp's saliency interpreters did both until `.detach().cpu()` came in).

    ## Example
    ```python
    # before the change: return [e.detach().cpu().numpy() for e in embeddings]
    return [e.numpy() for e in embeddings]
    ```

    ## Use instead
    ```python
    return [e.detach().cpu().numpy() for e in embeddings]
    ```

    ## Fix safety
    Safe: the fix is the statement as the base version wrote it; `.detach().cpu()` gives
    the same array wherever the new version works.
    """

    code = "RC322"
    name = "change-drops-detach-before-numpy"
    category = Category.NUMPY_BRIDGE
    severity = Severity.ERROR
    prefilter = ("numpy", "asarray", "array(")
    recipes = ("raises",)
    follows_change = True

    VALID = (
        Valid(
            """
            import torch
            def to_host(t):
                return t.detach().cpu().numpy()
            """,
            "the guards are still there",
            before="""
            import torch
            def to_host(t):
                return t.detach().cpu().clone().numpy()
            """,
        ),
        Valid(
            """
            import pandas as pd
            import torch
            def build_table(g, res):
                g, res = g.cpu().detach(), res.cpu().detach()
                table = pd.DataFrame({"gt": list(g.flatten().numpy())})
                table["predicted"] = res.argmax(dim=1).numpy()
                return table
            """,
            "the change moved the guards up, onto both tensors at once (pytorch_medical_imaging)",
            before="""
            import pandas as pd
            import torch
            def build_table(g, res):
                table = pd.DataFrame({"gt": list(g.flatten().cpu().detach().numpy())})
                table["predicted"] = res.argmax(dim=1).cpu().detach().numpy()
                return table
            """,
        ),
        Valid(
            """
            import torch
            def step(model, x: torch.Tensor):
                probs = model(x).softmax(-1)
                (-probs[:, 0].log().mean()).backward()
                with torch.no_grad():
                    return probs.numpy()
            """,
            "under `no_grad` `.numpy()` converts a tensor that requires grad: the dropped `.detach()` guarded nothing",
            before="""
            import torch
            def step(model, x: torch.Tensor):
                probs = model(x).softmax(-1)
                (-probs[:, 0].log().mean()).backward()
                with torch.no_grad():
                    return probs.detach().numpy()
            """,
        ),
        Valid(
            """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader
            def fit(regressor, dataloader: DataLoader):
                X, Y = next(iter(dataloader))
                X = X.cpu().numpy()
                regressor.fit(X, np.ravel(Y.cpu().numpy()))
            """,
            "a batch drawn from a `DataLoader` is data, which does not require grad: the dropped `.detach()` guarded nothing (causalpruning)",
            before="""
            import numpy as np
            import torch
            from torch.utils.data import DataLoader
            def fit(regressor, dataloader: DataLoader):
                X, Y = next(iter(dataloader))
                X = X.detach().cpu().numpy()
                regressor.fit(X, np.ravel(Y.cpu().numpy()))
            """,
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def to_host(embeddings):
                return [e.numpy() for e in embeddings]
            """,
            line=3,
            before="""
            import torch
            def to_host(embeddings):
                return [e.detach().cpu().numpy() for e in embeddings]
            """,
            fix="""
            import torch
            def to_host(embeddings):
                return [e.detach().cpu().numpy() for e in embeddings]
            """,
            note="allennlp's saliency interpreter, simplified",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if flow.change is None:
            return
        reported: set[int] = set()
        for event in flow.events:
            if event.line in reported or event.stmt is None:
                continue
            dropped = dropped_at(flow, event.line, _GUARDS)
            code = short_code(event.stmt)
            if not dropped or not any(c in dropped[0].before for c in _CONVERSIONS):
                continue
            if _guarded_before(flow, event.stmt, dropped):
                continue  # `g, res = g.cpu().detach(), res.cpu().detach()` first: the guard moved up, it was not dropped
            risks = []
            # Under `no_grad` the conversion takes a tensor that requires grad: only the grad mode is checked.
            if any(d.what == ".detach()" for d in dropped) and not event.no_grad and not called_grad_off_in_repository(flow):
                risks.append("requires grad (\"Can't call numpy() on Tensor that requires grad\")")
            if any(d.what == ".cpu()" for d in dropped):
                risks.append("lives on a GPU (\"can't convert cuda:0 device type tensor to numpy\")")
            if not risks:
                continue
            reported.add(event.line)
            message = (
                f"This change drops {dropped_words(dropped)} from `{dropped[0].before}`: the base version guarded against a "
                f"tensor that {' or '.join(risks)}, and `{code}` now raises on one. Put {dropped_words(dropped)} back."
            )
            claims = frozenset(({"grad"} if "requires" in message else set()) | ({"gpu"} if "GPU" in message else set()))
            yield Hit(event.stmt, message, restore(event.stmt, dropped), claims=claims)


def _guarded_before(flow: FunctionFlow, stmt: cst.CSTNode, dropped: list[Dropped]) -> bool:
    """Every tensor the statement converts is, by the head's own flow, already detached
    (and on the CPU) where the base version detached (moved) it in the statement."""
    grad_off = any(d.what == ".detach()" for d in dropped)
    on_cpu = any(d.what == ".cpu()" for d in dropped)
    converted = [e.receiver for e in flow.of(Call) if e.stmt is stmt and e.method == "numpy" and e.receiver is not None]
    converted += [e.args[0] for e in flow.of(Call) if e.stmt is stmt and e.args and e.is_any(("numpy.asarray", "numpy.array"))]
    return bool(converted) and all((not grad_off or v.grad is Tri.NO) and (not on_cpu or v.device is Device.CPU) for v in converted)
