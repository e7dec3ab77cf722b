"""redundant-copy: a copy that buys nothing and costs memory or time."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst
from review_copies.analysis.flow import Bind, Call, FunctionFlow, Store, Use, Write, code_of, short_code
from review_copies.analysis.flowquery import name_of
from review_copies.analysis.rewrite import atom, call_method_name, chain, clean_args, kwarg, method, receiver_of
from review_copies.analysis.values import Device, Kind, Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid

# Arguments named like a model's output, which require grad when training.
_OUTPUT_NAME = re.compile(r"(^|_)(out|output|outputs|logits|pred|preds|prediction|student|emb|embedding|features|hidden|activations?)(_|$)", re.I)
_BACKUP = re.compile(r"(backup|snapshot|saved|orig|original|copy|init|initial|before|prev)", re.I)
_COPYING_CONVERSIONS = {"cpu": '"cpu"', "cuda": '"cuda"'}
_QUANTIZERS = frozenset(
    ("torch.quantize_per_tensor", "torch.quantize_per_channel", "torch.quantize_per_tensor_dynamic", "torch.fake_quantize_per_tensor_affine", "torch.fake_quantize_per_channel_affine")
)


def _clone_receiver(call: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `x.clone()` (with no arguments), else None."""
    if isinstance(call, cst.Call) and call_method_name(call) == "clone" and not call.args:
        return receiver_of(call)
    return None


class CloneOfTemporary(Rule):
    """
    ## What it does
    Finds `.clone()` applied to a tensor that was just created and that nothing else
    refers to: `(a + b).clone()`, `torch.cat(xs).clone()`, `x.to_dense().clone()`.

    ## Why is this bad?
    The temporary is already a new tensor with its own memory; cloning it allocates and
    copies a second time and frees the first. It costs time and peak memory and changes
    nothing.

    ## Example
    ```python
    merged = torch.cat(chunks).clone()
    ```

    ## Use instead
    ```python
    merged = torch.cat(chunks)
    ```

    ## Fix safety
    Safe: the values, dtype, device, layout and gradient flow are the same.
    """

    code = "RC341"
    name = "clone-of-temporary"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone(",)
    probe = "copy-bytes"

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.clone()
            """,
            "x belongs to the caller",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.float().clone()
            """,
            ".float() may return x itself",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x[:2].clone()
            """,
            "a view: the clone is what makes it independent",
        ),
        Valid(
            """
            import torch
            def f(group: dict):
                return torch.as_tensor(scalar_of(group["lr"]), dtype=torch.float32).clone()
            """,
            "as_tensor hands back its argument when that is already a tensor of that dtype",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(chunks: list):
                merged = torch.cat(chunks).clone()
                return merged
            """,
            line=3,
            fix="""
            import torch
            def f(chunks: list):
                merged = torch.cat(chunks)
                return merged
            """,
        ),
        Invalid(
            """
            import torch
            def f(a: torch.Tensor, b: torch.Tensor):
                return (a + b).clone()
            """,
            line=3,
            fix="""
            import torch
            def f(a: torch.Tensor, b: torch.Tensor):
                return a + b
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if event.method != "clone" or event.call.args or event.receiver is None or event.receiver_node is None:
                continue
            recv = event.receiver
            if recv.kind is not Kind.TENSOR or not recv.fresh or not recv.certain or recv.via:
                continue
            node = event.receiver_node
            message = (
                f"`{short_code(node)}` is already a new tensor that nothing else refers to; `.clone()` copies it a second time "
                "(more time and peak memory, same result). Drop the `.clone()`."
            )
            replacement = node.with_changes(lpar=[], rpar=[]) if isinstance(node, cst.BinaryOperation) and _is_whole_value(event) else node
            yield Hit(event.node, message, (event.node, replacement))


def _is_whole_value(event: Call) -> bool:
    """Parentheses can go only when the call was the whole right-hand side or return value."""
    stmt = event.stmt
    return isinstance(stmt, (cst.Return, cst.Assign)) and getattr(stmt, "value", None) is event.node


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
    `copy=True` makes exactly one copy whether or not the device or dtype changes.

    ## Fix safety
    Safe: one copy instead of two, with the same values, memory format and gradient.
    """

    code = "RC342"
    name = "clone-before-copying-conversion"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone()",)
    probe = "copy-bytes"

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
        from review_copies.analysis.semantics import api as api

        torch_name = flow.file.imports.module_alias("torch")
        for event in flow.of(Call):
            name = event.method
            base = _clone_receiver(event.receiver_node) if event.receiver_node is not None else None
            if name is None or base is None or event.receiver is None or not event.receiver.is_tensor:
                continue
            args: list[cst.Arg] | None = None
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
            message = (
                f"`{short_code(event.node)}` copies twice when `.{name}()` changes device or dtype: the clone is a full copy that is "
                "thrown away at once. `.to(..., copy=True)` makes exactly one copy in every case."
            )
            yield Hit(event.node, message, (event.node, method(base, "to", args)))


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


class CloneThenDetach(Rule):
    """
    ## What it does
    Finds `x.clone().detach()` on a tensor that requires grad.

    ## Why is this bad?
    The clone is recorded in the autograd graph (a `CloneBackward0` node referencing
    `x`) and then immediately cut off: wasted work, and the copy briefly keeps the graph
    alive. `x.detach().clone()` copies outside the graph. PyTorch's own warning text
    recommends this order.

    ## Example
    ```python
    target = logits.clone().detach()
    ```

    ## Use instead
    ```python
    target = logits.detach().clone()
    ```

    ## Fix safety
    Safe: both give an equal, independent tensor that does not require grad.
    """

    code = "RC343"
    name = "clone-then-detach"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone().detach()",)
    probe = "copy-bytes"

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.detach().clone()
            """
        ),
        Valid(
            """
            import torch
            def f():
                x = torch.zeros(3)
                return x.clone().detach()
            """,
            "x needs no grad: the order does not matter",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                w = torch.randn(3, requires_grad=True)
                return (w * x).clone().detach()
            """,
            line=4,
            fix="""
            import torch
            def f(x: torch.Tensor):
                w = torch.randn(3, requires_grad=True)
                return (w * x).detach().clone()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if event.method != "detach" or event.call.args or event.receiver_node is None:
                continue
            base = _clone_receiver(event.receiver_node)
            recv = flow.value(base) if base is not None else None
            if base is None or recv is None:
                continue
            output_arg = recv.grad is Tri.MAYBE and any(r.startswith("arg:") and _OUTPUT_NAME.search(r[4:]) for r in recv.roots)
            if not (recv.grad is Tri.YES or output_arg):
                continue  # only tensors that require grad (or a model's output passed in): otherwise the order does not matter
            message = (
                f"`{short_code(event.node)}` records the copy in the autograd graph and then cuts it off; "
                f"`{short_code(base)}.detach().clone()` copies outside the graph, which is what PyTorch recommends."
            )
            yield Hit(event.node, message, (event.node, chain(atom(base), "detach", "clone")))


class PerIterationCloneIntoNewTensor(Rule):
    """
    ## What it does
    Finds a loop that clones the same loop-invariant tensor into a new tensor on every
    iteration, only to modify the copy in place and drop it.

    ## Why is this bad?
    Each iteration allocates and frees a full-size tensor. A buffer allocated once before
    the loop and refilled with `buf.copy_(src)` does the same work without the
    allocations (and without allocator churn on the GPU).

    ## Example
    ```python
    for step in range(steps):
        work = template.clone()
        work.add_(noise[step])
        results.append(work.sum())
    ```

    ## Use instead
    ```python
    work = torch.empty_like(template)
    for step in range(steps):
        work.copy_(template)
        work.add_(noise[step])
        results.append(work.sum())
    ```

    ## Fix safety
    No automatic fix (it moves code out of the loop); the message says what to change.
    Clones that are kept (appended, yielded, returned) are not reported.
    """

    code = "RC344"
    name = "per-iteration-clone"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone(",)
    probe = "copy-bytes"

    VALID = (
        Valid(
            """
            import torch
            def f(template: torch.Tensor, steps: int):
                out = []
                for step in range(steps):
                    work = template.clone()
                    work.add_(step)
                    out.append(work)
                return out
            """,
            "each copy is kept",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(template: torch.Tensor, noise: torch.Tensor, steps: int):
                sums = []
                for step in range(steps):
                    work = template.clone()
                    work.add_(noise[step])
                    sums.append(work.sum().item())
                return sums
            """,
            line=5,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            if not bind.loops or bind.expr is None:
                continue
            source = _clone_receiver(bind.expr)
            if source is None or not isinstance(source, (cst.Name, cst.Attribute)):
                continue
            loop = flow.loops[bind.loops[-1]]
            src_name = name_of(source)
            if any(isinstance(e, Bind) and e.name == src_name and set(e.loops) & {bind.loops[-1]} for e in flow.events):
                continue  # the source changes every iteration
            roots = bind.value.roots
            kept = any(isinstance(e, Store) and e.value.roots & roots for e in flow.events) or any(
                type(e).__name__ == "Return" and e.value.roots & roots for e in flow.events
            )
            used_after = any(isinstance(e, Use) and e.name == bind.name and e.line > loop.end for e in flow.events)
            if kept or used_after or bind.value.kind is not Kind.TENSOR:
                continue
            message = (
                f"`{bind.name} = {short_code(bind.expr)}` allocates a new full-size copy on every iteration of the loop at line {loop.start}, "
                f"used only within the iteration. Allocate once before the loop (`{bind.name} = torch.empty_like({src_name})`) "
                f"and refill it with `{bind.name}.copy_({src_name})` inside."
            )
            yield Hit(bind.node, message)


class GatherListThenCat(Rule):
    """
    ## What it does
    Finds `torch.distributed.all_gather(tensor_list, t)` followed by
    `torch.cat(tensor_list)` (or `torch.stack`).

    ## Why is this bad?
    The gather writes world-size separate tensors and `cat` then copies them all again
    into one. `dist.all_gather_into_tensor(out, t)` writes straight into one
    preallocated output: one allocation, no second copy (torch 2.13 names it
    `all_gather_single` and keeps the old name with a FutureWarning).

    ## Example
    ```python
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t)
    full = torch.cat(parts)
    ```

    ## Use instead
    ```python
    full = torch.empty(world * t.shape[0], *t.shape[1:], dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(full, t)
    ```

    ## Fix safety
    No automatic fix (the output must be allocated first); the message says how.
    """

    code = "RC345"
    name = "gather-list-then-cat"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("all_gather",)
    probe = "copy-bytes"

    VALID = (
        Valid(
            """
            import torch
            import torch.distributed as dist
            def f(t: torch.Tensor, world: int):
                out = torch.empty(world * t.shape[0], dtype=t.dtype)
                dist.all_gather_into_tensor(out, t)
                return out
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            import torch.distributed as dist
            def f(t: torch.Tensor, world: int):
                parts = [torch.empty_like(t) for _ in range(world)]
                dist.all_gather(parts, t)
                return torch.cat(parts)
            """,
            line=6,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        gathers = [e for e in flow.of(Call) if e.is_any(("torch.distributed.all_gather", "torch.distributed.distributed_c10d.all_gather")) and e.call.args]
        if any(e.is_any(("torch.distributed.all_gather_into_tensor", "torch.distributed.all_gather_single")) for e in flow.of(Call)):
            return  # the list form is the fallback of a function that already uses the single collective
        for gather in gathers:
            parts = name_of(gather.call.args[0].value)
            if not parts:
                continue
            for event in flow.later(gather):
                if isinstance(event, Call) and event.is_any(("torch.cat", "torch.stack", "torch.concat")) and event.call.args and name_of(event.call.args[0].value) == parts:
                    func = code_of(gather.call.func).rsplit(".", 1)[0]
                    message = (
                        f"`{short_code(gather.node)}` gathers into separate tensors and `{short_code(event.node)}` at line {event.line} copies them "
                        f"all again into one. `{func}.all_gather_into_tensor(out, ...)` writes straight into one preallocated output."
                    )
                    yield Hit(event.node, message, anchors=(gather.node,))
                    break


class CopyThenQuantize(Rule):
    """
    ## What it does
    Finds a `.clone()` passed straight to a quantization function
    (`torch.quantize_per_tensor(x.clone(), ...)`, `torch.quantize_per_channel(...)`,
    the fake-quantize functions).

    ## Why is this bad?
    Quantization always writes a new tensor; it never modifies its input. The clone is a
    full-precision copy made only to be read once and freed.

    ## Example
    ```python
    q = torch.quantize_per_tensor(w.clone(), scale, zero_point, torch.qint8)
    ```

    ## Use instead
    ```python
    q = torch.quantize_per_tensor(w, scale, zero_point, torch.qint8)
    ```

    ## Fix safety
    Safe: the quantized result is the same.
    """

    code = "RC346"
    name = "copy-then-quantize"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("quantize",)
    probe = "copy-bytes"

    VALID = (
        Valid(
            """
            import torch
            def f(w: torch.Tensor):
                return torch.quantize_per_tensor(w, 0.1, 0, torch.qint8)
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(w: torch.Tensor):
                return torch.quantize_per_tensor(w.clone(), 0.1, 0, torch.qint8)
            """,
            line=3,
            fix="""
            import torch
            def f(w: torch.Tensor):
                return torch.quantize_per_tensor(w, 0.1, 0, torch.qint8)
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if not event.is_any(_QUANTIZERS) or not event.call.args:
                continue
            first = event.call.args[0].value
            base = _clone_receiver(first)
            if base is None:
                continue
            message = (
                f"`{short_code(first)}` copies `{short_code(base)}` only for the quantizer to read it once: quantization writes a new "
                "tensor and never changes its input. Pass the tensor itself."
            )
            yield Hit(event.node, message, (first, base))


class DensifyToCopy(Rule):
    """
    ## What it does
    Finds a sparse tensor copied by densifying it and converting back
    (`s.to_dense().to_sparse()`), or densified only to be cloned.

    ## Why is this bad?
    `to_dense()` materialises every zero: memory grows from the number of non-zeros to the
    full size (often by orders of magnitude) just to make a copy that `s.clone()` makes at
    sparse size.

    ## Example
    ```python
    backup = adjacency.to_dense().to_sparse()
    ```

    ## Use instead
    ```python
    backup = adjacency.clone().coalesce()
    ```

    ## Fix safety
    Safe: the same values, still sparse and coalesced, without the dense intermediate.
    """

    code = "RC347"
    name = "densify-to-copy"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("to_dense",)
    probe = "copy-bytes"

    VALID = (
        Valid(
            """
            import torch
            def f(s: torch.Tensor):
                return s.to_dense()
            """,
            "dense is what is wanted",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(s: torch.Tensor):
                return s.to_dense().to_sparse()
            """,
            line=3,
            fix="""
            import torch
            def f(s: torch.Tensor):
                return s.clone().coalesce()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            if isinstance(bind.expr, cst.Call) and call_method_name(bind.expr) == "to_dense" and not bind.expr.args and _BACKUP.search(bind.name):
                base = receiver_of(bind.expr)
                if name_of(base) == bind.name:
                    continue  # `x = x.to_dense()`: converting, not keeping a backup
                message = (
                    f"`{bind.name} = {short_code(bind.expr)}` keeps a copy of a sparse tensor by densifying it: every zero is "
                    f"materialised (full-size memory) for a backup that `{short_code(base)}.clone()` makes at sparse size "
                    "(restore it without `.to_sparse()` then)."
                )
                yield Hit(bind.node, message)
        for event in flow.of(Call):
            if event.method != "to_sparse" or event.call.args or event.receiver_node is None:
                continue
            inner = event.receiver_node
            if not (isinstance(inner, cst.Call) and call_method_name(inner) == "to_dense" and not inner.args):
                continue
            base = receiver_of(inner)
            message = (
                f"`{short_code(event.node)}` copies a sparse tensor through a dense one: every zero is materialised (full-size memory) "
                f"for a copy that `{short_code(base)}.clone().coalesce()` makes at sparse size."
            )
            yield Hit(event.node, message, (event.node, chain(atom(base), "clone", "coalesce")), probe=_sparse_probe(flow, base))




def _sparse_probe(flow: FunctionFlow, base: cst.BaseExpression) -> str:
    """A call of the function with a sparse tensor for the densified argument."""
    scope = flow.scope
    if scope is None or scope.kind != "function" or not isinstance(base, cst.Name) or list(flow.params) != [base.value]:
        return ""
    return f"import torch\n{scope.name}(torch.eye(4).to_sparse())\n"


class CloneIntoSlot(Rule):
    """
    ## What it does
    Finds `buf[i] = x.clone()` (or `buf[...] = x.clone()`) where `buf` is a tensor.

    ## Why is this bad?
    Assigning into a slice of a tensor already copies the values into the buffer's own
    memory (`copy_`). The clone is a second full copy that is freed right away.

    ## Example
    ```python
    self.obs[t] = obs.clone()
    ```

    ## Use instead
    ```python
    self.obs[t] = obs
    ```

    ## Fix safety
    Safe: the buffer holds the same values; later writes to `obs` do not reach it either way.
    """

    code = "RC348"
    name = "clone-into-slot"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone()",)
    probe = "copy-bytes"

    VALID = (
        Valid(
            """
            import torch
            def f(obs: torch.Tensor):
                history = []
                history.append(obs.clone())
                return history
            """,
            "a list stores the object itself: the clone is needed",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(obs: torch.Tensor, steps: int):
                buf = torch.zeros(steps, 4)
                buf[0] = obs.clone()
                return buf
            """,
            line=4,
            fix="""
            import torch
            def f(obs: torch.Tensor, steps: int):
                buf = torch.zeros(steps, 4)
                buf[0] = obs
                return buf
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for write in flow.of(Write):
            stmt = write.stmt
            if write.op != "[...] =" or write.target.kind is not Kind.TENSOR or not isinstance(stmt, cst.Assign):
                continue
            base = _clone_receiver(stmt.value)
            if base is None or flow.value(base).roots & write.target.roots:
                continue  # `x[:, 1:] = x[:, :-1].clone()`: source and target overlap, the clone is needed
            message = (
                f"`{short_code(stmt)}` copies twice: assigning into a slice of the tensor `{short_code(write.target_node)}` already copies "
                f"the values into its memory, so `.clone()` makes a full copy that is freed at once. Assign `{short_code(base)}` itself."
            )
            yield Hit(write.node, message, (stmt.value, base))


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
    Safe: `torch.tensor` copies anyway (negative strides included), so the result owns its
    memory in both versions.
    """

    code = "RC349"
    name = "copy-before-torch-tensor"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("copy(",)
    probe = "unobservable"  # the first copy is NumPy's

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
            if inner is None:
                continue
            message = (
                f"`{short_code(arg)}` copies the array only for `torch.tensor` to copy it again: `torch.tensor` always copies its "
                f"input. Pass `{short_code(inner)}` directly."
            )
            yield Hit(event.node, message, (arg, inner))
