"""RC322 change-drops-detach-before-numpy."""

from __future__ import annotations

from collections.abc import Iterator

from review_copies.analysis.events import FunctionFlow
from review_copies.analysis.syntax import short_code
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
            reported.add(event.line)
            risks = []
            if any(d.what == ".detach()" for d in dropped):
                risks.append("requires grad (\"Can't call numpy() on Tensor that requires grad\")")
            if any(d.what == ".cpu()" for d in dropped):
                risks.append("lives on a GPU (\"can't convert cuda:0 device type tensor to numpy\")")
            message = (
                f"This change drops {dropped_words(dropped)} from `{dropped[0].before}`: the base version guarded against a "
                f"tensor that {' or '.join(risks)}, and `{code}` now raises on one. Put {dropped_words(dropped)} back."
            )
            claims = frozenset(({"grad"} if "requires" in message else set()) | ({"gpu"} if "GPU" in message else set()))
            yield Hit(event.stmt, message, restore(event.stmt, dropped), claims=claims)
