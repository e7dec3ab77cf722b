"""alias-mutation: an in-place write through one name changes a tensor other code still
reads through another name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import libcst as cst

from reviewer import torchapi as api
from reviewer.cstutil import atom, call_method_name, kwarg, method, out_of_place
from reviewer.findings import Category, Severity
from reviewer.flow import Bind, FunctionFlow, Write, code_of, short_code
from reviewer.flowquery import (
    OUTPUT_PARAMETER_NAMES,
    AliasPair,
    alias_pairs,
    deliberate_write,
    is_mutating_function,
    name_of,
    returns_something,
)
from reviewer.rules.base import Hit, Invalid, Rule, Valid
from reviewer.values import Kind, Value

_BUFFER_FACTORIES = ("torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like")


def attribute_source(expr: cst.BaseExpression) -> bool:
    """`bn.running_mean`, `self.weight`: a module's state, not a local tensor."""
    return isinstance(expr, cst.Attribute) and expr.attr.value not in ("data", "T", "mT", "H", "mH", "real", "imag")


def copy_at_binding(bind: Bind | None, ndarray: bool = False) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """Make the binding a copy: `b = a` -> `b = a.clone()`; `y = x.to(d)` -> `x.to(d, copy=True)`."""
    if bind is None or bind.expr is None:
        return None
    expr = bind.expr
    if call_method_name(expr) == "to" and isinstance(expr, cst.Call) and not any(a.keyword is not None and a.keyword.value == "copy" for a in expr.args):
        args = [*expr.args[:-1], expr.args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))] if expr.args else []
        return expr, expr.with_changes(args=[*args, kwarg("copy", cst.Name("True"))])
    return expr, method(atom(expr), "copy" if ndarray else "clone")


def write_fix(write: Write, bind: Bind | None, ndarray: bool = False) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    return copy_at_binding(bind, ndarray) or out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor")


def _lines(reads: tuple) -> str:
    lines = sorted({u.line for u in reads})
    return f"line {lines[0]}" if len(lines) == 1 else f"lines {', '.join(map(str, lines[:3]))}"


class _WriteThroughAlias(Rule):
    """Shared logic: a write through a name made from another, which is read afterwards."""

    VIAS: ClassVar[frozenset[str]] = frozenset()
    category = Category.ALIAS_MUTATION
    severity = Severity.WARNING
    probe = "alias, input-mutation"

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for write in flow.of(Write):
            if deliberate_write(write):
                continue
            for pair in alias_pairs(flow, write):
                if pair.holder in flow.params:
                    continue  # the caller's tensor: RC102
                if pair.writer_is_alias:
                    if write.target.via not in self.VIAS or not self.accepts(flow, pair, write.target):
                        continue
                    fix = write_fix(write, pair.writer_bind, write.target.kind is Kind.NDARRAY)
                    yield Hit(write.node, self.message(pair), fix, anchors=self.anchors(pair))
                    break
                bind = pair.holder_bind
                if bind is None or bind.expr is None or attribute_source(bind.expr) or pair.holder_value.via not in self.VIAS:
                    continue  # module state kept by reference is a stale snapshot (RC155)
                if not self.accepts(flow, pair, pair.holder_value):
                    continue
                yield Hit(write.node, self.reverse_message(pair), copy_at_binding(bind, pair.holder_value.kind is Kind.NDARRAY), anchors=(bind.node,))
                break

    def accepts(self, flow: FunctionFlow, pair: AliasPair, alias: Value) -> bool:
        return alias.certain

    def reverse_message(self, pair: AliasPair) -> str:
        bind = pair.holder_bind
        made = f"`{pair.holder} = {short_code(bind.expr)}` (line {bind.line})" if bind is not None and bind.expr is not None else f"`{pair.holder}`"
        return (
            f"{made} does not copy: `{self.write_text(pair)}` writes in place into that same memory through `{pair.writer}`, so "
            f"`{pair.holder}` read at {_lines(pair.reads)} sees the new values, not the ones it was meant to keep. Copy with `.clone()`."
        )

    def anchors(self, pair: AliasPair) -> tuple[cst.CSTNode, ...]:
        return (pair.writer_bind.node,) if pair.writer_bind is not None else ()

    def message(self, pair: AliasPair) -> str:
        raise NotImplementedError

    @staticmethod
    def write_text(pair: AliasPair) -> str:
        return short_code(pair.write.stmt or pair.write.node)

    @staticmethod
    def bind_text(pair: AliasPair) -> str:
        bind = pair.writer_bind
        return f"`{pair.writer} = {short_code(bind.expr)}` (line {bind.line})" if bind is not None and bind.expr is not None else f"`{pair.writer}`"


class WriteThroughPlainAlias(_WriteThroughAlias):
    """
    ## What it does
    Finds `b = a` followed by an in-place write through `b` (`b += 1`, `b.add_(...)`,
    `b[i] = v`) while `a` is read again afterwards.

    ## Why is this bad?
    Assignment never copies a tensor: `b` and `a` are two names for one tensor, so the
    write through `b` also changes what `a` holds. Code that reads `a` later silently sees
    the modified values.

    ## Example
    ```python
    def step(x):
        y = x * 2
        z = y
        z += 1
        return y, z        # y was changed too
    ```

    ## Use instead
    ```python
    def step(x):
        y = x * 2
        z = y.clone()
        z += 1
        return y, z
    ```

    ## Fix safety
    The fix copies at the assignment (`.clone()`), so `a` keeps its values; the sandbox
    checks that the written name computes the same values as before.
    """

    code = "RC101"
    name = "write-through-plain-alias"
    prefilter = ("=",)
    VIAS = frozenset(("",))

    VALID = (
        Valid(
            """
            import torch
            def f():
                a = torch.zeros(3)
                b = a.clone()
                b += 1
                return a, b
            """,
            "b is a copy",
        ),
        Valid(
            """
            import torch
            def f():
                a = torch.zeros(3)
                b = a
                b += 1
                return b
            """,
            "a is never read again",
        ),
        Valid(
            """
            import torch
            def f():
                a = torch.zeros(3)
                a = a + 1
                b = a
                return a, b
            """,
            "no in-place write",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                a = torch.zeros(3)
                b = a
                b += 1
                return a, b
            """,
            line=5,
            fix="""
            import torch
            def f():
                a = torch.zeros(3)
                b = a.clone()
                b += 1
                return a, b
            """,
        ),
        Invalid(
            """
            import torch
            def f(n: int):
                total = torch.ones(n)
                running = total
                for i in range(n):
                    running.mul_(0.5)
                return total.sum(), running
            """,
            line=6,
            fix="""
            import torch
            def f(n: int):
                total = torch.ones(n)
                running = total.clone()
                for i in range(n):
                    running.mul_(0.5)
                return total.sum(), running
            """,
        ),
    )

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{self.write_text(pair)}` writes in place through `{pair.writer}`, which is the same tensor as `{pair.holder}` "
            f"({self.bind_text(pair)} copies nothing), so `{pair.holder}` changes too and is read again at {_lines(pair.reads)}. "
            f"Copy with `.clone()` if `{pair.holder}` must keep its values."
        )


class WriteThroughDetachOrData(_WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through the result of `.detach()` or `.data` while the
    original tensor is read again afterwards.

    ## Why is this bad?
    `detach()` and `.data` cut the autograd graph, they do not copy: the result shares
    memory with the original (and, for `detach()`, its version counter). Writing into it
    changes the original under every other name that reads it.

    ## Example
    ```python
    def clipped(w: torch.Tensor):
        v = w.detach()
        v.clamp_(max=1.0)
        return w.sum() + v.sum()     # w was clamped too
    ```

    ## Use instead
    ```python
    def clipped(w: torch.Tensor):
        v = w.detach().clone()
        v.clamp_(max=1.0)
        return w.sum() + v.sum()
    ```

    ## Fix safety
    The fix copies at the assignment; the original then keeps its values.
    """

    code = "RC103"
    name = "write-through-detach-or-data"
    prefilter = ("detach", ".data")
    VIAS = frozenset(("detach", "data"))

    VALID = (
        Valid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach().clone()
                v.zero_()
                return w, v
            """
        ),
        Valid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach()
                v.zero_()
                return v
            """,
            "the original is not read again",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach()
                v.clamp_(max=1.0)
                return w.sum() + v.sum()
            """,
            line=5,
            fix="""
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                v = w.detach().clone()
                v.clamp_(max=1.0)
                return w.sum() + v.sum()
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                h = torch.ones(4) * 3
                raw = h.data
                raw[0] = 0
                return h.mean(), raw
            """,
            line=5,
            fix="""
            import torch
            def f():
                h = torch.ones(4) * 3
                raw = h.data.clone()
                raw[0] = 0
                return h.mean(), raw
            """,
        ),
    )

    def message(self, pair: AliasPair) -> str:
        how = "`.detach()`" if pair.write.target.via == "detach" else "`.data`"
        return (
            f"`{self.write_text(pair)}` writes in place into {self.bind_text(pair)}, and {how} does not copy: it shares memory "
            f"with `{pair.holder}`, which therefore changes too and is read again at {_lines(pair.reads)}. "
            f"Use `.detach().clone()` for an independent copy."
        )


class WriteThroughNumpyShare(_WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through a tensor or array that shares memory across the NumPy
    boundary (`torch.from_numpy(a)`, `torch.as_tensor(a)`, `t.numpy()`) while the other
    side is read again afterwards.

    ## Why is this bad?
    These conversions do not copy: the tensor and the array are one buffer. A write on
    one side shows on the other, so data the rest of the code still reads (a dataset
    array, a cached feature) is silently changed.

    ## Example
    ```python
    def standardise(features: np.ndarray):
        t = torch.from_numpy(features)
        t -= t.mean()
        return t, features.std()      # features was changed too
    ```

    ## Use instead
    ```python
    def standardise(features: np.ndarray):
        t = torch.from_numpy(features).clone()
        t -= t.mean()
        return t, features.std()
    ```

    ## Fix safety
    The fix copies at the conversion (`.clone()` / `.copy()`); the other side keeps its values.
    """

    code = "RC105"
    name = "write-through-numpy-share"
    prefilter = ("numpy", "as_tensor")
    VIAS = frozenset(("from_numpy", "as_tensor", "numpy"))

    VALID = (
        Valid(
            """
            import numpy as np
            import torch
            def f():
                a = np.zeros(3, dtype=np.float32)
                t = torch.tensor(a)
                t += 1
                return a, t
            """,
            "torch.tensor copies the array",
        ),
    )
    INVALID = (
        Invalid(
            """
            import numpy as np
            import torch
            def f():
                a = np.zeros(3, dtype=np.float32)
                t = torch.from_numpy(a)
                t += 1
                return a.sum(), t
            """,
            line=6,
            fix="""
            import numpy as np
            import torch
            def f():
                a = np.zeros(3, dtype=np.float32)
                t = torch.from_numpy(a).clone()
                t += 1
                return a.sum(), t
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                t = torch.arange(4.0)
                arr = t.numpy()
                arr[0] = -1
                return t, arr
            """,
            line=5,
            fix="""
            import torch
            def f():
                t = torch.arange(4.0)
                arr = t.numpy().copy()
                arr[0] = -1
                return t, arr
            """,
        ),
    )

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{self.write_text(pair)}` writes in place into {self.bind_text(pair)}, which shares its buffer with `{pair.holder}` "
            f"(the NumPy conversion does not copy), so `{pair.holder}` changes too and is read again at {_lines(pair.reads)}. "
            "Copy at the conversion (`.clone()` for a tensor, `.copy()` for an array, or `torch.tensor(array)`)."
        )


class WriteThroughConversionSelf(_WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through the result of `.to(...)`, `.cpu()`, `.cuda()`,
    `.float()`, `.contiguous()`, `.reshape()`... while the original is read again.

    ## Why is this bad?
    These calls return the tensor itself when nothing needs to change (`x.float()` of a
    float32 tensor, `x.cpu()` of a CPU tensor, `x.contiguous()` of a contiguous one,
    `x.reshape(-1)` when the strides allow a view). The write then changes the original,
    on some inputs and devices but not others, which makes the bug hard to see.

    ## Example
    ```python
    def scaled(x: torch.Tensor):
        y = x.float()
        y.mul_(2)                # changes x when x is already float32
        return x, y
    ```

    ## Use instead
    ```python
    def scaled(x: torch.Tensor):
        y = x.to(torch.float32, copy=True)
        y.mul_(2)
        return x, y
    ```

    ## Fix safety
    The fix always copies (`copy=True`, or `.clone()`), so the original keeps its values
    whatever its dtype, device or layout.
    """

    code = "RC106"
    name = "write-through-conversion-self"
    prefilter = (".to(", "cpu(", "cuda(", "float(", "double(", "half(", "contiguous(", "reshape(", "flatten(", "type(")
    VIAS = frozenset(("to", "reshape"))
    probe = "alias, input-mutation"

    VALID = (
        Valid(
            """
            import torch
            def f():
                x = torch.zeros(3, dtype=torch.int64)
                y = x.float()
                y.mul_(2)
                return x, y
            """,
            "an int64 tensor: .float() copies",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                y = x.to(torch.float32, copy=True)
                y.mul_(2)
                return x, y
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                x = torch.zeros(3)
                y = x.float()
                y.mul_(2)
                return x, y
            """,
            line=5,
            fix="""
            import torch
            def f():
                x = torch.zeros(3)
                y = x.float().clone()
                y.mul_(2)
                return x, y
            """,
        ),
        Invalid(
            """
            import torch
            def f(device):
                x = torch.ones(3)
                y = x.to(device)
                y += 1
                return x.sum(), y
            """,
            line=5,
            fix="""
            import torch
            def f(device):
                x = torch.ones(3)
                y = x.to(device, copy=True)
                y += 1
                return x.sum(), y
            """,
        ),
    )

    def accepts(self, flow: FunctionFlow, pair: AliasPair, alias: Value) -> bool:
        return True  # aliasing is possible, not certain: the message says when

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{self.write_text(pair)}` writes in place into {self.bind_text(pair)}, which returns `{pair.holder}` itself "
            "whenever dtype, device and layout already match (no copy is made), so the write can change "
            f"`{pair.holder}`, which is read again at {_lines(pair.reads)}. Copy explicitly (`copy=True` or `.clone()`)."
        )


class WriteThroughNamedView(_WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through a view (`a[1:]`, `a.view(...)`, `a.t()`, `a.expand()`,
    `a.narrow()`...) held in its own name while the base tensor is read again afterwards
    and both are used as separate values.

    ## Why is this bad?
    Basic indexing and view methods never copy: the view and its base share memory, so
    writing through the view rewrites the base. When the code goes on to use both names,
    it almost always expects the base to be unchanged.

    ## Example
    ```python
    def halves(x):
        t = x * 1.0
        head = t[:2]
        head *= 10
        return head.sum(), t.sum()   # t's first two elements were scaled too
    ```

    ## Use instead
    ```python
    def halves(x):
        t = x * 1.0
        head = t[:2].clone()
        head *= 10
        return head.sum(), t.sum()
    ```

    ## Fix safety
    The fix copies the view; the base keeps its values. Writes into a freshly allocated
    buffer through its views (filling it by parts) are not reported.
    """

    code = "RC104"
    name = "write-through-named-view"
    prefilter = ("[", "view", "narrow", "select", "expand", "transpose", "permute", "squeeze", "unbind", "split", "chunk", ".t(", ".T")
    VIAS = frozenset(("view",))

    VALID = (
        Valid(
            """
            import torch
            def f(parts: list[torch.Tensor]):
                out = torch.empty(4)
                head = out[:2]
                head.copy_(parts[0])
                return out
            """,
            "filling a new buffer through its views",
        ),
        Valid(
            """
            import torch
            def f():
                t = torch.ones(4)
                head = t[:2]
                head *= 10
                return t
            """,
            "the write-through is the point: only the base is used afterwards",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                t = x * 1.0
                head = t[:2]
                head *= 10
                return head.sum(), t.sum()
            """,
            line=5,
            fix="""
            import torch
            def f(x: torch.Tensor):
                t = x * 1.0
                head = t[:2].clone()
                head *= 10
                return head.sum(), t.sum()
            """,
        ),
    )

    def accepts(self, flow: FunctionFlow, pair: AliasPair, alias: Value) -> bool:
        if not alias.certain or pair.holder_bind is None:
            return False
        if _is_buffer(pair.holder_bind):
            return False
        # Both names are used as values after the write: the view is not just a window.
        return any(u.name == pair.writer for u in flow.later(pair.write) if hasattr(u, "name") and type(u).__name__ == "Use")

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{self.write_text(pair)}` writes in place through {self.bind_text(pair)}, a view that shares memory with "
            f"`{pair.holder}`, so `{pair.holder}` changes too and is read again at {_lines(pair.reads)}. "
            "Clone the view if the base must keep its values."
        )


def _is_buffer(bind: Bind) -> bool:
    """A tensor made only to be filled (torch.empty/zeros/..., new_*)."""
    expr = bind.expr
    if not isinstance(expr, cst.Call):
        return False
    name = code_of(expr.func)
    return any(name.endswith(f.split(".", 1)[1]) for f in _BUFFER_FACTORIES) or (call_method_name(expr) or "").startswith("new_")


class InplaceOnArgument(Rule):
    """
    ## What it does
    Finds an in-place write into a tensor argument (or a view, `detach()` or `.data` of
    it) in a function that returns a result, so the caller's tensor is changed as a side
    effect.

    ## Why is this bad?
    The caller still owns the tensor it passed and usually reads it again: a normalised
    batch, a model's input reused for a residual, a target used for a metric. Writing into
    it changes the caller's data behind its back, and if autograd saved that tensor the
    caller's `backward()` fails. Functions meant to mutate (named with a trailing `_`,
    `init_*`, `reset_*`, `update_*`, writing into `out=`-style parameters, or doing it
    under `torch.no_grad()`) are not reported.

    ## Example
    ```python
    def normalize(x: torch.Tensor) -> torch.Tensor:
        x -= x.mean()
        return x / x.std()
    ```

    ## Use instead
    ```python
    def normalize(x: torch.Tensor) -> torch.Tensor:
        x = x - x.mean()
        return x / x.std()
    ```

    ## Fix safety
    The fix rebinds the local name to a new tensor (or copies where the alias is made),
    so the function returns the same values and the caller's tensor is left alone.
    """

    code = "RC102"
    name = "inplace-on-argument"
    category = Category.ALIAS_MUTATION
    severity = Severity.WARNING
    prefilter = ("def ",)
    probe = "input-mutation"

    VALID = (
        Valid(
            """
            import torch
            def normalize_(x: torch.Tensor) -> torch.Tensor:
                x -= x.mean()
                return x
            """,
            "the trailing underscore says it mutates",
        ),
        Valid(
            """
            import torch
            def normalize(x: torch.Tensor) -> torch.Tensor:
                x = x - x.mean()
                return x / x.std()
            """
        ),
        Valid(
            """
            import torch
            def sgd(params, lr: float) -> None:
                with torch.no_grad():
                    for p in params:
                        p.sub_(lr * p.grad)
            """,
            "an update under no_grad that returns nothing",
        ),
        Valid(
            """
            import torch
            def scatter(src: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
                out.copy_(src)
                return out
            """,
            "an out= parameter",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def normalize(x: torch.Tensor) -> torch.Tensor:
                x -= x.mean()
                return x / x.std()
            """,
            line=3,
            fix="""
            import torch
            def normalize(x: torch.Tensor) -> torch.Tensor:
                x = x - x.mean()
                return x / x.std()
            """,
        ),
        Invalid(
            """
            import torch
            def centered(x: torch.Tensor) -> torch.Tensor:
                flat = x.view(-1)
                flat -= flat.mean()
                return flat
            """,
            line=4,
            fix="""
            import torch
            def centered(x: torch.Tensor) -> torch.Tensor:
                flat = x.view(-1).clone()
                flat -= flat.mean()
                return flat
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.bias = nn.Parameter(torch.zeros(4))
                def forward(self, x):
                    x += self.bias
                    return x.relu()
            """,
            line=8,
            fix="""
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.bias = nn.Parameter(torch.zeros(4))
                def forward(self, x):
                    x = x + self.bias
                    return x.relu()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if is_mutating_function(flow) or not (returns_something(flow) or flow.is_forward):
            return
        reported: set[str] = set()
        for write in flow.of(Write):
            if deliberate_write(write) or write.no_grad or write.target.kind not in (Kind.TENSOR, Kind.NDARRAY):
                continue
            owned = sorted(p for p in flow.params if f"arg:{p}" in write.target.roots and p not in OUTPUT_PARAMETER_NAMES and not p.startswith(("out", "buf")))
            if not owned or owned[0] in reported:
                continue
            arg = owned[0]
            reported.add(arg)
            writer = name_of(write.target_node)
            bind = None if writer == arg else _bind_of(flow, writer, write)
            how = "" if writer == arg else f" (`{writer}` shares its memory: {short_code(bind.expr) if bind and bind.expr else writer})"
            maybe = "" if write.target.certain else " when the conversion returns the same tensor (matching dtype, device and layout)"
            where = f"`{flow.scope.name}`" if flow.scope else "this function"
            message = (
                f"`{short_code(write.stmt or write.node)}` writes in place into the argument `{arg}`{how}{maybe}: the caller's tensor "
                f"is changed behind its back while {where} also returns a result. Work on a copy or use the out-of-place op."
            )
            fix = out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor") if writer == arg else copy_at_binding(bind)
            yield Hit(write.node, message, fix, anchors=(bind.node,) if bind is not None else ())


def _bind_of(flow: FunctionFlow, name: str, write: Write) -> Bind | None:
    from reviewer.flowquery import last_bind

    return last_bind(flow, name, write.index)
