"""RC342 clone-before-copying-conversion."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.rewrite import clean_args, kwarg, method
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Device
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.redundant_copy.helpers import clone_receiver


class CloneBeforeCopyingConversion(Rule):
    """
    ## What it does
    Finds `x.clone().to(...)`, `x.clone().cpu()`, `x.clone().cuda()`,
    `x.clone().double()`... where the conversion makes its own copy.

    ## Why is this bad?
    When the conversion changes device or dtype it already allocates a new tensor, so the
    clone is a second full copy (on the source device) that is thrown away at once.

    ## Example
    ```python
    host = activations.clone().cpu()     # activations on the GPU
    ```

    ## Use instead
    ```python
    host = activations.to("cpu", copy=True)
    ```
    `copy=True` makes exactly one copy whether or not the device or dtype changes. Where the
    conversion is an operand of an out-of-place op (`e0.clone().double() + e`), which makes a
    new tensor anyway, no copy is needed: `e0.double() + e`.

    ## Fix safety
    Safe: one copy instead of two, with the same values, memory format and gradient.
    """

    code = "RC342"
    name = "clone-before-copying-conversion"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone()",)
    recipes = ("copy-bytes",)

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.clone().numpy()
            """,
            ".numpy() does not copy: the clone is needed",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.clone().cpu()
            """,
            "x may already be on the CPU, where .cpu() returns it: the clone is the copy",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def energies(node_e0: torch.Tensor, node_inter: torch.Tensor):
                return node_e0.clone().double() + node_inter
            """,
            line=3,
            fix="""
            import torch
            def energies(node_e0: torch.Tensor, node_inter: torch.Tensor):
                return node_e0.double() + node_inter
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                x = torch.randn(8).cuda()
                return x.clone().cpu()
            """,
            line=4,
            fix="""
            import torch
            def f():
                x = torch.randn(8).cuda()
                return x.to("cpu", copy=True)
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                x = torch.randn(8)
                return x.clone().to(torch.float16)
            """,
            line=4,
            fix="""
            import torch
            def f():
                x = torch.randn(8)
                return x.to(torch.float16, copy=True)
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                x = torch.randn(8)
                return x.clone().double()
            """,
            line=4,
            fix="""
            import torch
            def f():
                x = torch.randn(8)
                return x.to(torch.float64, copy=True)
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        torch_name = flow.file.imports.module_alias("torch")
        for event in flow.of(Call):
            name = event.method
            base = clone_receiver(event.receiver_node) if event.receiver_node is not None else None
            if name is None or base is None or event.receiver is None or not event.receiver.is_tensor:
                continue
            args: list[cst.Arg] | None = None
            # Moving between the CPU and a GPU copies only on a machine with a GPU: a claim about one.
            device_move = name in _COPYING_CONVERSIONS or (name == "to" and {event.receiver.device, event.result.device} == {Device.CPU, Device.CUDA})
            if name == "to" and event.call.args and not any(a.keyword is not None and a.keyword.value == "copy" for a in event.call.args):
                if not _surely_converts(event):
                    continue
                args = clean_args([*event.call.args, kwarg("copy", cst.Name("True"))])
            elif name in _COPYING_CONVERSIONS and not event.call.args:
                if not _changes_device(event.receiver.device, name):
                    continue
                args = [cst.Arg(cst.SimpleString(_COPYING_CONVERSIONS[name])), kwarg("copy", cst.Name("True"))]
                args = clean_args(args)
            elif name in api.DTYPE_METHODS and not event.call.args and torch_name and event.receiver.dtype != api.DTYPE_METHODS[name]:
                dtype = next(k for k, v in api.DTYPE_CONSTANTS.items() if v == api.DTYPE_METHODS[name] and k.endswith(api.DTYPE_METHODS[name]))
                args = clean_args([cst.Arg(cst.Attribute(value=cst.Name(torch_name), attr=cst.Name(dtype.split(".")[1]))), kwarg("copy", cst.Name("True"))])
            if args is None:
                continue
            op = _operand_of(event.stmt, event.node)
            if op is not None:
                message = (
                    f"`{short_code(event.node)}` is an operand of `{op}`, which makes a new tensor anyway: the clone is a full copy "
                    f"thrown away at once. `.{name}()` alone converts, copying only when it must."
                )
                yield Hit(event.node, message, (event.node, event.call.with_changes(func=event.call.func.with_changes(value=base))))
                continue
            message = (
                f"`{short_code(event.node)}` copies twice when `.{name}()` changes device or dtype: the clone is a full copy that is "
                "thrown away at once. `.to(..., copy=True)` makes exactly one copy in every case."
            )
            yield Hit(event.node, message, (event.node, method(base, "to", args)), claims=frozenset({"gpu"}) if device_move else frozenset())


_COPYING_CONVERSIONS = {"cpu": '"cpu"', "cuda": '"cuda"'}


def _operand_of(stmt: cst.CSTNode | None, node: cst.CSTNode) -> str | None:
    """The operator of the out-of-place binary operation `node` is an operand of, if any
    (`a.clone().double() + b`): its result is a new tensor whatever its operands are."""
    if stmt is None:
        return None
    found: list[str] = []

    class _Operand(cst.CSTVisitor):
        def visit_BinaryOperation(self, op: cst.BinaryOperation) -> None:
            if op.left is node or op.right is node:
                found.append(cst.Module([]).code_for_node(op.operator).strip())

    stmt.visit(_Operand())
    return found[0] if found else None


def _changes_device(device: Device, method_name: str) -> bool:
    """`.cpu()` copies only a GPU tensor, `.cuda()` only a CPU one."""
    return device is (Device.CUDA if method_name == "cpu" else Device.CPU)


def _surely_converts(event: Call) -> bool:
    """`.to(...)` whose result surely differs from its input in device or dtype (so it copies)."""
    recv, result = event.receiver, event.result
    if recv is None:
        return False
    if result.dtype is not None and recv.dtype is not None and result.dtype != recv.dtype:
        return True
    return {recv.device, result.device} == {Device.CPU, Device.CUDA}
