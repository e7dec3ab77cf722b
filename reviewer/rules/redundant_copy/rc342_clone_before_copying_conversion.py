"""RC342 clone-before-copying-conversion."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.guesses import INTEGER_NAME
from review_copies.analysis.rewrite import clean_args, kwarg, method
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import call_method_name, code_of, dotted, names_in, receiver_of, short_code
from review_copies.analysis.values import Device, Kind
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

    ## Known problems
    Where the dtype is not known, a dtype method is taken to change it; a tensor named for
    ids or indices (`text_ids.clone().long()`) is taken to be integer already and left, as
    are `torch.arange` of ints (int64) and the weights of a torch.nn module the same function
    built without a dtype (float32). A dtype known only to the callers is not followed.
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
            from torch import nn
            class Deployed(nn.Module):
                def __init__(self, conv: nn.Conv2d):
                    super().__init__()
                    self.register_buffer("cin_perm", conv.cin_perm.detach().clone().long())
            """,
            "a permutation is an integer tensor (an argsort's result): `.long()` returns it as it is, and the clone is the one copy",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.clone().cpu()
            """,
            "x may already be on the CPU, where .cpu() returns it: the clone is the copy",
        ),
        Valid(
            """
            import torch
            def prompt(text_ids: torch.Tensor) -> torch.Tensor:
                ids = text_ids.clone().long()
                ids[:, 0] = 0
                return ids
            """,
            "token ids are int64 already: `.long()` returns the clone, which is the one copy",
        ),
        Valid(
            """
            import torch
            def timepoints(batch: int, steps: int) -> torch.Tensor:
                return torch.arange(steps).expand(batch, steps).clone().long()
            """,
            "`torch.arange` of an int is int64 already: the clone is the one copy of the expanded view",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Quantizer(nn.Module):
                def __init__(self, size: int, dim: int):
                    super().__init__()
                    self.codebook = nn.Embedding(size, dim)
                    self.register_buffer("ema_weight", self.codebook.weight.data.clone().float())
            """,
            "an `nn.Embedding` just built has float32 weights: `.float()` returns the clone, the one copy (malaya-speech's VQ codebook)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def track_ids(targets: torch.Tensor) -> torch.Tensor:
                return targets[:, 1].clone().long()
            """,
            line=3,
            fix="""
            import torch
            def track_ids(targets: torch.Tensor) -> torch.Tensor:
                return targets[:, 1].to(torch.int64, copy=True)
            """,
        ),
        Invalid(
            """
            import torch
            def collect(pred: torch.Tensor, pressure: torch.Tensor, nodes: torch.Tensor):
                pressure[nodes] = pred[:, :1].clone().float()
                return pressure
            """,
            line=3,
            fix="""
            import torch
            def collect(pred: torch.Tensor, pressure: torch.Tensor, nodes: torch.Tensor):
                pressure[nodes] = pred[:, :1].float()
                return pressure
            """,
        ),
        Invalid(
            """
            import torch
            def deltas(local: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
                update = {}
                for key in local:
                    update[key] = local[key].cpu().clone().float()
                return update
            """,
            line=5,
            fix="""
            import torch
            def deltas(local: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
                update = {}
                for key in local:
                    update[key] = local[key].cpu().to(torch.float32, copy=True)
                return update
            """,
        ),
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
                if event.receiver.dtype is None and name in ("long", "int") and _named_integer(base):
                    continue  # `text_ids.clone().long()`: ids are integer already, and the clone is the one copy
                if event.receiver.dtype is None and name == "float" and _float32_parameter(flow, base, event.line):
                    continue  # `self.codebook.weight.data.clone().float()` of an `nn.Embedding` just built: float32 already
                dtype = next(k for k, v in api.DTYPE_CONSTANTS.items() if v == api.DTYPE_METHODS[name] and k.endswith(api.DTYPE_METHODS[name]))
                args = clean_args([cst.Arg(cst.Attribute(value=cst.Name(torch_name), attr=cst.Name(dtype.split(".")[1]))), kwarg("copy", cst.Name("True"))])
            if args is None:
                continue
            anyway = _copied_anyway(flow, event.stmt, event.node)
            if anyway is not None:
                message = (
                    f"`{short_code(event.node)}` is {anyway}: the clone is a full copy thrown away at once. `.{name}()` alone "
                    "converts, copying only when it must."
                )
                yield Hit(event.node, message, (event.node, event.call.with_changes(func=event.call.func.with_changes(value=base))))
                continue
            message = (
                f"`{short_code(event.node)}` copies twice when `.{name}()` changes device or dtype: the clone is a full copy that is "
                "thrown away at once. `.to(..., copy=True)` makes exactly one copy in every case."
            )
            yield Hit(event.node, message, (event.node, method(base, "to", args)), claims=frozenset({"gpu"}) if device_move else frozenset())


_COPYING_CONVERSIONS = {"cpu": '"cpu"', "cuda": '"cuda"'}
# What `out[idx] = value` copies into: a tensor or an array (or what may be one); a dict's or a
# list's slot holds the value itself.
_SLICEABLE = frozenset((Kind.TENSOR, Kind.NDARRAY, Kind.UNKNOWN))


def _named_integer(base: cst.BaseExpression) -> bool:
    """A name or attribute (not a slice of one: `t[:, 1]` of a float table) named for ids or a
    permutation (`conv._cin_perm.detach()`, an argsort's result), detached or not."""
    while isinstance(base, cst.Call) and call_method_name(base) == "detach" and not base.args:
        base = receiver_of(base)
    return isinstance(base, (cst.Name, cst.Attribute)) and bool(INTEGER_NAME.search(dotted(base).split(".")[-1]))


_MODULE_CONVERSIONS = frozenset(("half", "bfloat16", "double", "float", "to", "type", "to_empty"))


def _float32_parameter(flow: FunctionFlow, base: cst.BaseExpression, line: int) -> bool:
    """`self.codebook.weight.data` where this function built `self.codebook = nn.Embedding(n, d)`
    before, with no dtype, and converts it nowhere: torch.nn makes float32 parameters (unless
    the file changes the default dtype)."""
    while isinstance(base, cst.Attribute) and base.attr.value == "data":
        base = base.value
    if not (isinstance(base, cst.Attribute) and base.attr.value in ("weight", "bias")) or flow.scope is None:
        return False
    owner = dotted(base.value)
    if not owner or "set_default_dtype" in flow.file.text or "set_default_tensor_type" in flow.file.text:
        return False
    built: list[tuple[int, cst.BaseExpression]] = []
    converted = False

    class Find(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal converted
            targets = [dotted(t.target) for t in node.targets]
            if owner in targets:
                built.append((flow.file.line_of(node), node.value))
            # `self.codebook.weight.data = table.double()`: another tensor, of any dtype
            converted = converted or any(t.startswith(f"{owner}.") and t.rpartition(".")[2] in ("weight", "bias", "data") for t in targets)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal converted
            func = node.func
            converted = converted or (isinstance(func, cst.Attribute) and dotted(func.value) == owner and func.attr.value in _MODULE_CONVERSIONS)

    flow.scope.node.visit(Find())
    if converted or len(built) != 1 or built[0][0] >= line or not isinstance(call := built[0][1], cst.Call):
        return False
    quals = flow.file.imports.resolve(dotted(call.func))
    return bool(quals) and all(q.startswith("torch.nn.") and q.rpartition(".")[2][:1].isupper() for q in quals) and not any(
        a.keyword is not None and a.keyword.value == "dtype" for a in call.args
    )


def _copied_anyway(flow: FunctionFlow, stmt: cst.CSTNode | None, node: cst.CSTNode) -> str | None:
    """Why no copy is needed where the conversion's result goes, if none is: an operand of an
    out-of-place op (`a.clone().double() + b` makes a new tensor whatever its operands are),
    or the value assigned into part of another tensor (`out[idx] = a.clone().float()` copies
    into `out`; not when `a` is read from `out` itself, where the clone keeps the source
    apart from what is written, nor when `out` is a dict or a list, whose slot keeps the
    tensor itself)."""
    if stmt is None:
        return None
    found: list[str] = []

    class _Where(cst.CSTVisitor):
        def visit_BinaryOperation(self, op: cst.BinaryOperation) -> None:
            if op.left is node or op.right is node:
                found.append(f"an operand of `{code_of(op.operator).strip()}`, which makes a new tensor anyway")

    stmt.visit(_Where())
    if found:
        return found[0]
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1:
        stmt = stmt.body[0]
    if isinstance(stmt, cst.Assign) and stmt.value is node and len(stmt.targets) == 1:
        target = stmt.targets[0].target
        if isinstance(target, cst.Subscript) and flow.value(target.value).kind in _SLICEABLE:
            owner = dotted(target.value).split(".")[0]
            if owner and owner not in names_in(node):
                return f"assigned into `{short_code(target)}`, which copies it into that tensor anyway"
    return None


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
