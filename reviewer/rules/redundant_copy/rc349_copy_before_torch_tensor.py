"""RC349 copy-before-torch-tensor."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow
from review_copies.analysis.syntax import call_method_name, code_of, names_in, receiver_of, short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class CopyBeforeTorchTensor(Rule):
    """
    ## What it does
    Finds `torch.tensor(a.copy())` / `torch.tensor(np.copy(a))`: an array copied just
    before `torch.tensor`, which copies it again.

    ## Why is this bad?
    `torch.tensor` always copies its data (unlike `torch.from_numpy`/`torch.as_tensor`),
    so the first copy is allocated, read once and freed: double the memory traffic for
    every batch.

    ## Example
    ```python
    yield torch.tensor(array[i:i + n].copy())
    ```

    ## Use instead
    ```python
    yield torch.tensor(array[i:i + n])
    ```

    ## Fix safety
    Safe where the array has no negative strides: `torch.tensor` copies anyway, so the result
    owns its memory in both versions. `torch.tensor` raises on a negative stride, so a copy of
    a reversed or rotated view (`a[::-1]`, `np.flip`, `np.rot90`, here or where the name was
    bound in the function) is load-bearing and is not reported; so is a copy of a named field
    (`records["atom_idxs"].copy()`): a field of a NumPy structured array has the record's
    stride, which `torch.tensor` rejects unless it is a multiple of the field's item size.

    ## Known problems
    A string-keyed item of a dict of arrays is left too: the analysis cannot tell it from a
    structured array's field.
    """

    code = "RC349"
    name = "copy-before-torch-tensor"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("copy(",)
    recipes = ()
    observable = False  # the first copy is NumPy's

    VALID = (
        Valid(
            """
            import numpy as np
            import torch
            def f(a: np.ndarray):
                return torch.from_numpy(a.copy())
            """,
            "from_numpy shares memory: the copy is what makes it independent",
        ),
        Valid(
            """
            import numpy as np
            import torch
            def reversed_filter(h0):
                return torch.tensor(np.copy(np.array(h0).ravel()[::-1]), dtype=torch.float)
            """,
            "`torch.tensor` raises on the negative strides of `[::-1]`: the copy is what makes it work",
        ),
        Valid(
            """
            import numpy as np
            import torch
            def masks(instance_masks: np.ndarray):
                instance_masks = np.rot90(instance_masks, k=-1, axes=(1, 2))
                return torch.tensor(instance_masks.copy())
            """,
            "the name holds a rotated view, whose strides are negative: without the copy `torch.tensor` raises",
        ),
        Valid(
            """
            import numpy as np
            import torch
            def bounds(constraints: np.ndarray):
                return torch.tensor(constraints["atom_idxs"].copy(), dtype=torch.long).T
            """,
            "a field of a structured array (`2i4` in an 18-byte record) has strides `torch.tensor` rejects: the copy makes it work",
        ),
        Valid(
            """
            import random
            import numpy as np
            import torch
            class Cubes(torch.utils.data.Dataset):
                def random_flip(self, data, r=0.5):
                    return np.flip(data, 1) if random.random() < r else data
                def __getitem__(self, index):
                    data = self.random_flip(self.cubes[index])
                    return torch.tensor(data.copy(), dtype=torch.float32)
            """,
            "the class's own augmentation may hand back `np.flip`'s view, whose strides are negative: the copy is what makes `torch.tensor` work (a hyperspectral model zoo's datasets)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import numpy as np
            import torch
            def f(a: np.ndarray):
                return torch.tensor(a[:4].copy())
            """,
            line=4,
            fix="""
            import numpy as np
            import torch
            def f(a: np.ndarray):
                return torch.tensor(a[:4])
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if not event.is_any(("torch.tensor",)) or not event.call.args or event.call.args[0].keyword is not None:
                continue
            arg = event.call.args[0].value
            inner: cst.BaseExpression | None = None
            if isinstance(arg, cst.Call) and call_method_name(arg) == "copy" and not arg.args:
                inner = receiver_of(arg)
                if flow.value(inner).kind is Kind.TENSOR:
                    continue  # (tensors have no .copy(); a mis-typed value is not this rule's)
            elif isinstance(arg, cst.Call) and code_of(arg.func).endswith(("np.copy", "numpy.copy")) and len(arg.args) == 1:
                inner = arg.args[0].value
            if inner is None or _may_have_negative_strides(flow, inner, event.index) or _a_named_field(inner):
                continue  # (`torch.tensor` raises on a negative stride or a record's stride: the copy is what makes it work)
            message = (
                f"`{short_code(arg)}` copies the array only for `torch.tensor` to copy it again: `torch.tensor` always copies its "
                f"input. Pass `{short_code(inner)}` directly."
            )
            yield Hit(event.node, message, (arg, inner))


def _a_named_field(expr: cst.BaseExpression) -> bool:
    """`records["atom_idxs"]`, or a part of one (`records["xyz"][:, 0]`): maybe a field of a
    structured array, strided by the whole record."""
    while True:
        if isinstance(expr, cst.Subscript):
            if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) and isinstance(expr.slice[0].slice.value, cst.SimpleString):
                return True
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        else:
            return False


_FLIPS = frozenset(("flip", "flipud", "fliplr", "rot90"))


def _may_have_negative_strides(flow: FunctionFlow, expr: cst.BaseExpression, before: int, depth: int = 3) -> bool:
    """A reversed view (`a[::-1]`, `np.flip(a)`), or a step of unknown sign, in the expression
    or in what a name in it was bound to earlier in the function (`m = np.rot90(m)`)."""
    if _reverses(expr) or _calls_a_reversing_helper(flow, expr):
        return True
    if depth == 0:
        return False
    names = names_in(expr)
    return any(
        isinstance(b, Bind) and b.name in names and b.expr is not None and b.index < before and _may_have_negative_strides(flow, b.expr, b.index, depth - 1)
        for b in flow.events
    )


def _calls_a_reversing_helper(flow: FunctionFlow, expr: cst.BaseExpression) -> bool:
    """`data = self.random_flip(data)`: a call of a function of this file (a method of this
    class, through `self`) that reverses an array somewhere in its body (`return np.flip(data, 1)`),
    so what it hands back may be a view with negative strides."""
    called: set[tuple[bool, str]] = set()

    class Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Name):
                called.add((False, func.value))
            elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
                called.add((True, func.attr.value))

    expr.visit(Calls())
    if not called:
        return False
    own_class = flow.scope.class_node if flow.scope is not None else None
    for scope in flow.file.scopes:
        if scope.kind not in ("function", "method") or not isinstance(scope.node, cst.FunctionDef):
            continue
        through_self = scope.kind == "method" and scope.class_node is own_class
        if ((through_self, scope.name) in called or (scope.kind == "function" and (False, scope.name) in called)) and _reverses(scope.node):
            return True
    return False


def _reverses(expr: cst.CSTNode) -> bool:
    found = False

    class Find(cst.CSTVisitor):
        def visit_Slice(self, node: cst.Slice) -> None:
            nonlocal found
            step = node.step
            if step is not None and not (isinstance(step, cst.Integer) and int(step.value, 0) > 0):
                found = True

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            name = code_of(node.func).rpartition(".")[2]
            found = found or name in _FLIPS

    expr.visit(Find())
    return found
