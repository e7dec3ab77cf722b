"""alias-mutation: an in-place write through one name changes a tensor other code still
reads through another name."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import ClassVar

import libcst as cst
from review_copies.analysis.flow import Bind, FunctionFlow, Write, code_of, short_code
from review_copies.analysis.flowquery import (
    OUTPUT_PARAMETER_NAMES,
    AliasPair,
    alias_pairs,
    deliberate_write,
    is_mutating_function,
    name_of,
    returns_something,
)
from review_copies.analysis.rewrite import atom, call_method_name, kwarg, method, out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.values import Kind, Value
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid

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
        from review_copies.rules.inplace_autograd import saved_before

        for write in flow.of(Write):
            if deliberate_write(write) or write.op == "out=" or saved_before(flow, write) is not None:
                continue  # (out= writes into a chosen buffer on purpose; a saved tensor is RC201's)
            for pair in alias_pairs(flow, write):
                if pair.holder in flow.params:
                    continue  # the caller's tensor: RC102
                if pair.writer_bind is not None and pair.holder_bind is not None and pair.writer_bind.stmt is pair.holder_bind.stmt:
                    continue  # `d = r = torch.zeros(n)`: one buffer under two names, on purpose
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

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        yield from super().check(flow)
        yield from self.into_object_state(flow)

    def into_object_state(self, flow: FunctionFlow) -> Iterator[Hit]:
        """`t = torch.from_numpy(self.cache[i]); t -= m`: the object's stored array changes for every later caller."""
        for write in flow.of(Write):
            writer = name_of(write.target_node)
            state = sorted(r for r in write.target.roots if r.startswith("self."))
            if write.target.via not in self.VIAS or not state or writer.startswith("self.") or deliberate_write(write) or write.no_grad:
                continue
            bind = _bind_of(flow, writer, write)
            message = (
                f"`{self.write_text(pair_text(write))}` writes in place into `{writer}`, which shares its buffer with `{state[0]}` (the NumPy "
                f"conversion does not copy), so the object's stored data changes and every later use of `{state[0]}` sees it. "
                "Copy at the conversion (`.clone()`, or `torch.tensor(array)`)."
            )
            yield Hit(write.node, message, copy_at_binding(bind), anchors=(bind.node,) if bind is not None else ())

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
    def boosted(self):
        t = self.table
        head = t[:2]
        head *= 10
        return head.sum(), t.sum()   # self.table's first two entries were scaled too
    ```

    ## Use instead
    ```python
    def boosted(self):
        t = self.table
        head = t[:2].clone()
        head *= 10
        return head.sum(), t.sum()
    ```

    ## Fix safety
    The fix copies the view; the base keeps its values. Writes into a freshly allocated
    buffer through its views (filling it by parts), or into any tensor the function made
    itself, are not reported: only views of state held elsewhere.
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
            class Bank:
                def __init__(self):
                    self.table = torch.ones(4)
                def boosted(self):
                    t = self.table
                    head = t[:2]
                    head *= 10
                    return head.sum(), t.sum()
            """,
            line=8,
            fix="""
            import torch
            class Bank:
                def __init__(self):
                    self.table = torch.ones(4)
                def boosted(self):
                    t = self.table
                    head = t[:2].clone()
                    head *= 10
                    return head.sum(), t.sum()
            """,
        ),
    )

    def accepts(self, flow: FunctionFlow, pair: AliasPair, alias: Value) -> bool:
        if not alias.certain or pair.holder_bind is None or pair.holder_bind.expr is None:
            return False
        # Writing through views of a tensor the function made itself (a buffer filled by parts,
        # rows of a score matrix) is how such tensors are built: only views of state held
        # elsewhere (`t = self.table`) are reported.
        if not attribute_source(pair.holder_bind.expr) or _is_buffer(pair.holder_bind):
            return False
        # Both names are used as values after the write: the view is not just a window.
        return any(u.name == pair.writer for u in flow.later(pair.write) if hasattr(u, "name") and type(u).__name__ == "Use")

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{self.write_text(pair)}` writes in place through {self.bind_text(pair)}, a view that shares memory with "
            f"`{pair.holder}`, so `{pair.holder}` changes too and is read again at {_lines(pair.reads)}. "
            "Clone the view if the base must keep its values."
        )


class _WriteText:
    def __init__(self, write: Write) -> None:
        self.write = write


def pair_text(write: Write) -> _WriteText:
    return _WriteText(write)


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
    under `torch.no_grad()`), functions that return the argument they changed, and
    arguments every call in the file passes fresh are not reported. A module's `forward`
    input is RC204's.

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
        Valid(
            """
            import torch
            def load_into(companion: torch.Tensor, saved: dict) -> bool:
                companion.copy_(saved["weight"])
                return True
            """,
            "copy_ into the argument itself: the caller hands over a destination to fill",
        ),
        Valid(
            """
            import torch
            def refine(coords: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
                coords -= heat.mean()
                return coords
            def predict(heat: torch.Tensor):
                coords = heat.argmax(-1).float()
                preds = refine(coords, heat)
                return preds * 2
            """,
            "mutate-and-return, and the caller never reads what it passed again",
        ),
        Valid(
            """
            import torch
            from torch import nn
            def export(model: nn.Module):
                w = model.weight.data
                w.mul_(127).round_()
                return w.to(torch.int8)
            def save(model: nn.Module, path: str):
                q = export(model)
                torch.save(q, path)
            """,
            "the model is not used after the export that consumed its weights",
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
            def refine(coords: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
                coords -= heat.mean()
                return coords
            def predict(heat: torch.Tensor):
                coords = heat.argmax(-1).float()
                preds = refine(coords, heat)
                return preds - coords
            """,
            line=3,
            fix="""
            import torch
            def refine(coords: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
                coords = coords - heat.mean()
                return coords
            def predict(heat: torch.Tensor):
                coords = heat.argmax(-1).float()
                preds = refine(coords, heat)
                return preds - coords
            """,
            note="the caller reads `coords` again after `refine` changed it",
        ),
        Invalid(
            """
            import torch
            from torch import nn
            def export(model: nn.Module):
                w = model.weight.data
                w.mul_(127).round_()
                return w.to(torch.int8)
            def check(model: nn.Module, x: torch.Tensor):
                q = export(model)
                return q, model(x)
            """,
            line=5,
            fix="""
            import torch
            from torch import nn
            def export(model: nn.Module):
                w = model.weight.data.clone()
                w.mul_(127).round_()
                return w.to(torch.int8)
            def check(model: nn.Module, x: torch.Tensor):
                q = export(model)
                return q, model(x)
            """,
            note="`.data` is the live weight: `check` runs the model after `export` scaled it",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if is_mutating_function(flow) or flow.is_forward or not returns_something(flow) or _registered_op(flow) or _declares_mutation(flow):
            return
        reported: set[str] = set()
        for write in flow.of(Write):
            if deliberate_write(write) or write.no_grad or write.target.kind not in (Kind.TENSOR, Kind.NDARRAY):
                continue
            if not write.target.certain and write.target.via not in ("to", "reshape", "as_tensor"):
                continue  # indexing that may copy (x[idx] with a tensor index)
            owned = sorted(p for p in flow.params if any(r == f"arg:{p}" or r.startswith(f"arg:{p}[") for r in write.target.roots) and not _state_like(p))
            if not owned:
                yield from self._into_module(flow, write, reported)
                continue
            if owned[0] in reported:
                continue
            if _returns_argument(flow, owned[0]) and not caller_keeps_argument(flow, owned[0]):
                continue  # mutate-and-return: callers rebind what they get back
            if _restored(flow, write) or fresh_at_every_call_site(flow, owned[0]) or callers_rebind(flow, owned[0]):
                continue
            arg = owned[0]
            writer = name_of(write.target_node)
            if write.op == ".copy_()" and write.target.certain and write.target.via in ("", "view") and writer == arg:
                continue  # `dst.copy_(src)`, `dst[:, :n].copy_(src)`: filling the caller's tensor is the point
            reported.add(arg)
            bind = None if writer == arg else _bind_of(flow, writer, write)
            how = "" if writer == arg else f" (`{writer}` shares its memory: {short_code(bind.expr) if bind and bind.expr else writer})"
            maybe = "" if write.target.certain else " when the conversion returns the same tensor (matching dtype, device and layout)"
            where = f"`{flow.scope.name}`" if flow.scope else "this function"
            message = (
                f"`{short_code(write.stmt or write.node)}` writes in place into the argument `{arg}`{how}{maybe}: the caller's tensor "
                f"is changed behind its back while {where} also returns a result. Work on a copy or use the out-of-place op."
            )
            fix = out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor") if writer == arg else copy_at_binding(bind, write.target.kind is Kind.NDARRAY)
            yield Hit(write.node, message, fix, anchors=(bind.node,) if bind is not None else ())

    def _into_module(self, flow: FunctionFlow, write: Write, reported: set[str]) -> Iterator[Hit]:
        """A name bound to a parameter of a module argument (`w = model.fc.weight.data`) and
        written in place, while a caller in this file goes on using that module after taking
        the result: the function reads as if it worked on a copy, and the model is changed."""
        if write.target.via not in ("data", "detach", "") or not write.target.certain:
            return
        owners = sorted(
            p for p in flow.params if flow.params[p].kind is Kind.MODULE and any(r.startswith(f"params:{p}.") for r in write.target.roots)
        )
        if not owners or owners[0] in reported or not caller_keeps_argument(flow, owners[0]):
            return
        writer = name_of(write.target_node)
        bind = _bind_of(flow, writer, write) if writer else None
        if bind is None or bind.expr is None:
            return  # `model.fc.weight.data.mul_(2)` says what it does; only an alias reads like a copy
        module = owners[0]
        reported.add(module)
        where = f"`{flow.scope.name}`" if flow.scope else "this function"
        message = (
            f"`{short_code(write.stmt or write.node)}` writes in place into a parameter of the argument `{module}` "
            f"(`{writer}` shares its memory: {short_code(bind.expr)}): the caller's model is changed while {where} "
            f"returns a result, and this file goes on using `{module}` after the call. Work on a copy."
        )
        yield Hit(write.node, message, copy_at_binding(bind, False), anchors=(bind.node,))


_STATE_WORDS = ("out", "buf", "cache", "state", "mem", "past", "acc", "dst", "dest", "result", "target_", "scratch", "workspace", "storage", "running", "copy_to", "into")
# Functions whose name says they write into an argument: `foo_out`, `_out_impl`, `set_to_one`, `fill_x`.
_WRITER_NAME = re.compile(r"(^|_)(out|set|fill|write|store|assign|copy|inplace|mutate|put)(_|$)", re.I)


def _state_like(name: str) -> bool:
    """Parameters meant to be written: outputs, buffers, caches, running state."""
    return name in OUTPUT_PARAMETER_NAMES or any(word in name.lower() for word in _STATE_WORDS)


def _returns_argument(flow: FunctionFlow, arg: str) -> bool:
    """`x.add_(1); return x` or `return x.copy_(y)`: mutate-and-return, the caller rebinds what it gets back."""
    from review_copies.analysis.flow import Return

    root = f"arg:{arg}"
    for e in flow.of(Return):
        values = e.value.items if e.value.items is not None else (e.value,)
        # What is returned still holds the argument's memory (x, x.mul_(w), a view of x).
        # `return x.long()` after writing into x: the caller gets the changed tensor back either way.
        if any(root in v.roots and (v.via == "to" or (v.certain and not v.via)) for v in values):
            return True
    return False


def callers_rebind(flow: FunctionFlow, arg: str) -> bool:
    """Every call in the file passes a name for `arg` and rebinds that name to the result
    (`ll, obj = _mask_pads(ll, obj)`): the original is dropped, its mutation unseen."""
    sites = _passed(flow, arg)
    assigned = _assigned_names(flow.file)
    return bool(sites) and all(isinstance(passed, cst.Name) and passed.value in assigned.get(call, set()) for call, passed in sites)


def _declares_mutation(flow: FunctionFlow) -> bool:
    """The signature says the function writes: an `inplace` flag, an autograd `ctx`, a writer's name."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    names = [p.name.value for p in (*scope.node.params.params, *scope.node.params.kwonly_params)]
    return any("inplace" in n for n in names) or (bool(names) and names[0] == "ctx") or bool(_WRITER_NAME.search(scope.name))


def _restored(flow: FunctionFlow, write: Write) -> bool:
    """Perturb and restore: the argument is written, then put back with `x.copy_(saved)`."""
    writes = [w for w in flow.of(Write) if w.target.roots & write.target.roots]
    return len(writes) > 1 and any(w.op == ".copy_()" for w in writes)


def _registered_op(flow: FunctionFlow) -> bool:
    """Implementations registered for an op (custom ops, library impls) mutate as their schema says."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    words = ("custom_op", "impl", "register", "library", "override", "implements")
    return any(any(w in code_of(d.decorator) for w in words) for d in scope.node.decorators)


def _passed(flow: FunctionFlow, arg: str) -> list[tuple[cst.Call, cst.BaseExpression | None]]:
    """Each call of this function in the file, with what it passes for `arg`."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return []
    params = [p.name.value for p in scope.node.params.params]
    if scope.kind == "method" and params:
        params = params[1:]
    position = params.index(arg) if arg in params else None
    out = []
    for call in _own_call_sites(flow):
        passed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == arg), None)
        if passed is None and position is not None:
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            passed = positional[position] if position < len(positional) else None
        out.append((call, passed))
    return out


def fresh_at_every_call_site(flow: FunctionFlow, arg: str) -> bool:
    """Every call of this function in the file passes a new tensor for `arg` (`f(x * 2)`, `f(proj(x))`)."""
    sites = _passed(flow, arg)
    return bool(sites) and all(
        isinstance(passed, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) and not _aliasing_call(passed) for _, passed in sites
    )


def _aliasing_call(expr: cst.BaseExpression) -> bool:
    """`x.detach()`, `x.view(...)`, `x.to(d)`: a call that may hand over the same memory."""
    name = call_method_name(expr) if isinstance(expr, cst.Call) else None
    return bool(name) and (api.is_view_op(name) or name in api.MAYBE_SELF_METHODS or name in api.VIEW_METHODS or name in api.MAYBE_VIEW_METHODS)


def caller_keeps_argument(flow: FunctionFlow, arg: str) -> bool:
    """A call in this file passes a name for `arg` and keeps the result under another name
    (`x = normalize(images)`, and `images` is used again): the caller treats the function as pure."""
    assigned = _assigned_names(flow.file)
    later = _read_later(flow.file)
    return any(
        isinstance(passed, cst.Name) and call in assigned and passed.value not in assigned[call] and passed.value in later.get(call, ())
        for call, passed in _passed(flow, arg)
    )


def _read_later(file: object) -> dict[cst.Call, frozenset[str]]:
    """For calls that are the value of an assignment: the names that the code after that
    statement reads, in its own block, the blocks around it and (in a loop) the next
    iteration, up to the enclosing function."""
    cache = getattr(file, "_read_later", None)
    if cache is None:
        cache = {}
        _walk_block(file.module.body, frozenset(), cache)  # type: ignore[attr-defined]
        file._read_later = cache  # type: ignore[attr-defined]
    return cache


def _walk_block(body: Sequence[cst.CSTNode], after: frozenset[str], out: dict[cst.Call, frozenset[str]]) -> None:
    suffix: list[frozenset[str]] = [after] * (len(body) + 1)
    for i in range(len(body) - 1, -1, -1):
        suffix[i] = suffix[i + 1] | _names_in(body[i])
    for i, stmt in enumerate(body):
        later = suffix[i + 1]
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and isinstance(small.value, cst.Call):
                    out[small.value] = later
            continue
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            later = frozenset()
        elif isinstance(stmt, (cst.For, cst.While)):
            later = later | _names_in(stmt)
        for suite in _suites(stmt):
            _walk_block(suite, later, out)


def _suites(node: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    """The statement lists directly inside a compound statement (body, else, handlers...)."""
    for child in node.children:
        if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            yield child.body
        elif not isinstance(child, cst.BaseStatement):
            yield from _suites(child)


def _names_in(node: cst.CSTNode) -> frozenset[str]:
    names: set[str] = set()

    class _Names(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

    node.visit(_Names())
    return frozenset(names)


def _assigned_names(file: object) -> dict[cst.Call, set[str]]:
    """For calls that are the value of an assignment: the names they are assigned to."""
    cache = getattr(file, "_assigned", None)
    if cache is None:
        found: dict[cst.Call, set[str]] = {}

        class _Assigns(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                if isinstance(node.value, cst.Call):
                    names: set[str] = set()
                    for target in node.targets:
                        t = target.target
                        elements = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
                        names |= {e.value for e in elements if isinstance(e, cst.Name)}
                    found[node.value] = names

        file.module.visit(_Assigns())  # type: ignore[attr-defined]
        file._assigned = cache = found  # type: ignore[attr-defined]
    return cache


def _own_call_sites(flow: FunctionFlow) -> list[cst.Call]:
    """Calls of this very function: `f(...)` for a function, `self.f(...)` for a method."""
    scope = flow.scope
    if scope is None:
        return []
    method = scope.kind == "method"
    out = []
    root = scope.class_node if method and scope.class_node is not None else flow.file.module
    for call in _call_sites(flow.file, scope.name, root):
        func = call.func
        if (method and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls")) or (not method and isinstance(func, cst.Name)):
            out.append(call)
    return out


def _call_sites(file: object, name: str, root: cst.CSTNode) -> list[cst.Call]:
    """Calls named `name` under `root` (the module, or a class for its methods), cached."""
    caches = getattr(file, "_call_sites", None)
    if caches is None:
        caches = {}
        file._call_sites = caches  # type: ignore[attr-defined]
    found = caches.get(id(root))
    if found is None:
        found = {}

        class _Calls(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                key = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
                if key:
                    found.setdefault(key, []).append(node)

        root.visit(_Calls())
        caches[id(root)] = found
    return found.get(name, [])


def _bind_of(flow: FunctionFlow, name: str, write: Write) -> Bind | None:
    from review_copies.analysis.flowquery import last_bind

    return last_bind(flow, name, write.index)
