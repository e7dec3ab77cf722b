"""RC111 change-drops-copy-before-write."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, FunctionFlow
from review_copies.analysis.syntax import short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import dropped_at, dropped_words, restore, written_through
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_COPIES = (".clone()", ".copy()", "copy.deepcopy(...)", "deepcopy(...)", ".contiguous()")


class ChangeDropsCopyBeforeWrite(Rule):
    """
    ## What it does
    Finds a change that takes the `.clone()` (or `.copy()`, `copy.deepcopy(...)`,
    `.contiguous()`) off `t = x.clone()` when `t` is then written in place: the write
    that used to land in a copy now lands in `x`.

    ## Why is this bad?
    `t = x` makes a second name for the same memory. The in-place write through `t`
    changes `x` for everyone who holds it: the caller's argument, a module's buffer,
    the batch a later line reads (detectron2's `BoxMode.convert` changed the caller's
    boxes this way until `arr = copy.deepcopy(box)` came back). The base version's copy
    is the evidence that `x` needed protecting.

    ## Example
    ```python
    # before the change: target = x.clone()
    target = x
    target.clamp_(0, 1)
    ```

    ## Use instead
    ```python
    target = x.clone()
    target.clamp_(0, 1)
    ```

    ## Fix safety
    Safe: the fix is the statement as the base version wrote it; only the copy differs.

    ## Known problems
    A copy dropped on purpose because `x` is now a fresh tensor (made on the line above)
    is still reported when the analysis cannot tell that `x` is fresh.
    """

    code = "RC111"
    name = "change-drops-copy-before-write"
    category = Category.ALIAS_MUTATION
    severity = Severity.WARNING
    prefilter = ("torch",)
    recipes = ("input-mutation", "alias")
    follows_change = True

    VALID = (
        Valid(
            """
            import torch
            def scale(x):
                t = x
                return t * 2
            """,
            "nothing writes through `t`",
            before="""
            import torch
            def scale(x):
                t = x.clone()
                return t * 2
            """,
        ),
        Valid(
            """
            import torch
            def scale(x):
                t = x * 1.0
                t.mul_(2)
                return t
            """,
            "`x * 1.0` is a new tensor: the change replaced the copy, it did not drop it",
            before="""
            import torch
            def scale(x):
                t = x.clone()
                t.mul_(2)
                return t
            """,
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def convert(box):
                arr = box
                arr[:, 2] += arr[:, 0]
                return arr
            """,
            line=3,
            before="""
            import torch
            def convert(box):
                arr = box.clone()
                arr[:, 2] += arr[:, 0]
                return arr
            """,
            fix="""
            import torch
            def convert(box):
                arr = box.clone()
                arr[:, 2] += arr[:, 0]
                return arr
            """,
            note="detectron2's BoxMode.convert, simplified",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if flow.change is None:
            return
        for bind in flow.of(Bind):
            dropped = dropped_at(flow, bind.line, _COPIES)
            if not dropped or bind.expr is None or not isinstance(bind.expr, (cst.Name, cst.Attribute, cst.Subscript)):
                continue
            write = written_through(flow, bind.name, bind.line)
            if write is None:
                continue
            source = short_code(bind.expr)
            message = (
                f"This change drops {dropped_words(dropped)} from `{dropped[0].before}`: `{bind.name}` is now `{source}` itself, so "
                f"`{short_code(write)}` on line {flow.file.line_of(write)} writes into `{source}` for everyone who holds it. "
                "Keep the copy."
            )
            yield Hit(bind.node, message, restore(bind.stmt, dropped), anchors=(write,))
