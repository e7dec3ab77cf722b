"""inplace-autograd: an in-place op breaks or silently corrupts autograd."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import libcst as cst
from review_copies.analysis.flow import FunctionFlow, Saved, Write, code_of, short_code
from review_copies.analysis.flowquery import backward_between, backward_later, deliberate_write, overlaps
from review_copies.analysis.rewrite import no_grad_block, out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.values import Kind, Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


def saved_before(flow: FunctionFlow, write: Write) -> Saved | None:
    """A tensor autograd saved before this write, still needed (no backward freed it)."""
    for saved in flow.saved:
        needed = saved.index < write.index and not backward_between(flow, saved.index, write.index, saved.index)
        if needed and overlaps(saved.roots, write.target.roots) and (saved.attached or saved.in_forward) and not _rebound(flow, saved, write):
            if write.op == "optimizer.step()" and not backward_later(flow, write.index, saved.index):
                continue  # stepping with a graph still alive is harmless unless it is backpropagated after
            return saved
    return None


def _rebound(flow: FunctionFlow, saved: Saved, write: Write) -> bool:
    """After the save the written name was bound to another tensor: where the save happened
    (one arm of an `if`), the write reaches that other tensor; merging the arms must not pair
    the save with the write."""
    from review_copies.analysis.flow import Bind
    from review_copies.analysis.flowquery import name_of

    name = name_of(write.target_node)
    return any(
        isinstance(e, Bind) and e.name == name and saved.index < e.index < write.index and not overlaps(e.value.roots, saved.roots) for e in flow.events
    )


class InplaceOnSavedTensor(Rule):
    """
    ## What it does
    Finds an in-place op (`+=`, `.mul_()`, `x[i] = v`, `inplace=True`) on a tensor that
    autograd saved for the backward pass: the output of `sigmoid`, `tanh`, `exp`,
    `relu`, `softmax`...; an input of `mul`, `matmul`, `pow`, `log`, a `Linear` or a
    norm layer.

    ## Why is this bad?
    Backward needs the saved values. After the in-place write their version counter has
    moved, so `loss.backward()` raises "one of the variables needed for gradient
    computation has been modified by an inplace operation" — often far from the line
    that caused it, and only in training, not in inference.

    ## Example
    ```python
    def forward(self, x):
        h = torch.sigmoid(self.body(x))
        h += 0.1
        return self.head(h)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        h = torch.sigmoid(self.body(x))
        h = h + 0.1
        return self.head(h)
    ```

    ## Fix safety
    Safe: the out-of-place op computes the same values into a new tensor and leaves the
    saved one intact; gradients come out as autograd intends.
    """

    code = "RC201"
    name = "inplace-on-saved-tensor"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = ("_(", "=", "inplace")
    probe = "backward"

    VALID = (
        Valid(
            """
            import torch
            def f():
                a = torch.randn(3, requires_grad=True)
                y = a + 1
                y.mul_(2)
                y.sum().backward()
                return a.grad
            """,
            "add saves nothing: the in-place op is fine",
        ),
        Valid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                y = torch.sigmoid(w)
                y = y + 1
                y.sum().backward()
            """
        ),
        Valid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                y = torch.sigmoid(w)
                y.sum().backward()
                y += 1
                return y
            """,
            "after backward the saved tensor is no longer needed",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                with torch.no_grad():
                    y = torch.exp(x)
                    y += 1
                return y
            """,
            "nothing is saved under no_grad",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                y = torch.sigmoid(w)
                y += 1
                y.sum().backward()
            """,
            line=5,
            fix="""
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                y = torch.sigmoid(w)
                y = y + 1
                y.sum().backward()
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                def forward(self, x):
                    h = self.body(x).exp()
                    h.clamp_(max=10.0)
                    return h
            """,
            line=9,
            fix="""
            import torch
            from torch import nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(4, 4)
                def forward(self, x):
                    h = self.body(x).exp()
                    h = h.clamp(max=10.0)
                    return h
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                x = torch.ones(3)
                y = x * w
                x.add_(1)
                y.sum().backward()
            """,
            line=6,
            fix="""
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                x = torch.ones(3)
                y = x * w
                x = x.add(1)
                y.sum().backward()
            """,
            note="x * w saves x to compute w's gradient",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for write in flow.of(Write):
            if (deliberate_write(write) and write.op != "optimizer.step()") or write.target.via == "data":
                continue
            saved = saved_before(flow, write)
            if saved is None:
                continue
            what = short_code(write.stmt or write.node)
            message = (
                f"`{what}` modifies in place a tensor that autograd saved at line {saved.line} to compute the gradient of "
                f"{saved.op}; the backward pass will raise \"one of the variables needed for gradient computation has been "
                "modified by an inplace operation\". Use the out-of-place op."
            )
            anchors = (saved.node,) if saved.node is not None else ()
            yield Hit(write.node, message, out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor"), anchors=anchors)


class InplaceOnLeafRequiringGrad(Rule):
    """
    ## What it does
    Finds an in-place op on a leaf tensor that requires grad (a parameter, or a tensor
    made with `requires_grad=True`) outside `torch.no_grad()`.

    ## Why is this bad?
    Autograd refuses it: "a leaf Variable that requires grad is being used in an
    in-place operation." The usual intent — a manual update, a clamp, a re-init of the
    weights — must run without recording.

    ## Example
    ```python
    w = torch.randn(3, requires_grad=True)
    loss = (w * x).sum()
    loss.backward()
    w.sub_(0.1 * w.grad)
    ```

    ## Use instead
    ```python
    with torch.no_grad():
        w.sub_(0.1 * w.grad)
    ```

    ## Fix safety
    Safe: the same update under `torch.no_grad()`; `w` stays a leaf that requires grad.
    """

    code = "RC202"
    name = "inplace-on-leaf-requiring-grad"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = ("_(", "=")
    probe = "leaf-inplace"

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                w = torch.randn(3, requires_grad=True)
                (w * x).sum().backward()
                with torch.no_grad():
                    w.sub_(0.1 * w.grad)
                return w
            """
        ),
        Valid(
            """
            import torch
            def f():
                w = torch.randn(3)
                w.add_(1)
                return w
            """,
            "does not require grad",
        ),
        Valid(
            """
            import torch
            from torch import nn
            def f(model: nn.Module):
                for p in model.parameters():
                    p.data.mul_(0.5)
            """,
            ".data is not tracked (and not a leaf error)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                w = torch.randn(3, requires_grad=True)
                (w * x).sum().backward()
                w.sub_(0.1 * w.grad)
                return w
            """,
            line=5,
            fix="""
            import torch
            def f(x: torch.Tensor):
                w = torch.randn(3, requires_grad=True)
                (w * x).sum().backward()
                with torch.no_grad():
                    w.sub_(0.1 * w.grad)
                return w
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            def shrink(model: nn.Module):
                for p in model.parameters():
                    p.mul_(0.9)
            """,
            line=5,
            fix="""
            import torch
            from torch import nn
            def shrink(model: nn.Module):
                for p in model.parameters():
                    with torch.no_grad():
                        p.mul_(0.9)
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        torch_name = flow.file.imports.module_alias("torch")
        reported: set[tuple[frozenset[str], tuple[int, ...]]] = set()
        for write in flow.of(Write):
            target = write.target
            if write.no_grad or deliberate_write(write) or not target.leaf or target.grad is not Tri.YES or target.via:
                continue
            key = (target.roots, write.loops)
            if key in reported:
                continue  # the first failing write is the one to fix; the next would not run
            reported.add(key)
            what = short_code(write.stmt or write.node)
            message = (
                f"`{what}` modifies in place `{short_code(write.target_node)}`, a leaf tensor that requires grad; autograd raises "
                "\"a leaf Variable that requires grad is being used in an in-place operation\". Run the update under "
                "`torch.no_grad()`."
            )
            yield Hit(write.node, message, self._fix(write, torch_name))

    @staticmethod
    def _fix(write: Write, torch_name: str | None) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        line = write.line_node
        if torch_name is None or not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        return line, no_grad_block(line, torch_name)


class DataMutationHidesFromAutograd(Rule):
    """
    ## What it does
    Finds an in-place write through `.data` into a tensor that autograd saved for the
    backward pass.

    ## Why is this bad?
    `.data` has its own version counter, so autograd does not notice the write: backward
    runs without error and uses the modified values, and the gradients are silently
    wrong (torch 2.13: `h = x.exp(); h.data.clamp_(max=1)` gives `x.grad` of
    `[1.0, 0.37, 1.0]` where `[0.0, 0.37, 0.0]` is right).

    ## Example
    ```python
    h = x.exp()
    h.data.clamp_(max=1.0)
    h.sum().backward()
    ```

    ## Use instead
    ```python
    h = x.exp().clamp(max=1.0)       # the clamp is part of the graph
    h.sum().backward()
    ```
    or, if the values must change without autograd knowing, do it on a tensor nothing
    saved (`torch.no_grad()` on a copy).

    ## Fix safety
    No automatic fix: whether the change should be differentiated depends on intent.
    """

    code = "RC203"
    name = "data-mutation-hides-from-autograd"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = (".data",)
    probe = "silent-grad"

    VALID = (
        Valid(
            """
            import torch
            from torch import nn
            def f(model: nn.Module):
                for p in model.parameters():
                    p.data.mul_(0.5)
            """,
            "nothing was saved: a (dated but harmless) weight update",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                x = torch.randn(3, requires_grad=True)
                h = x.exp()
                h.data.clamp_(max=1.0)
                h.sum().backward()
                return x.grad
            """,
            line=5,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for write in flow.of(Write):
            if write.target.via != "data" or deliberate_write(write):
                continue
            saved = saved_before(flow, write)
            if saved is None:
                continue
            message = (
                f"`{short_code(write.stmt or write.node)}` changes through `.data` a tensor autograd saved at line {saved.line} for the "
                f"gradient of {saved.op}. `.data` bypasses the version check, so backward runs on the modified values and the "
                "gradients are silently wrong. Make the change part of the graph (an out-of-place op), or apply it where nothing saved the tensor."
            )
            yield Hit(write.node, message)


class InplaceOnForwardInput(Rule):
    """
    ## What it does
    Finds an `nn.Module.forward` that returns its own input modified in place
    (`return x.mul_(s)`, `x += self.bias; return x`) outside `torch.no_grad()`.

    ## Why is this bad?
    The input is the previous layer's output, which that layer has often saved for its
    backward (`tanh`, `sigmoid`, `softmax`, `relu` keep their output; norms and linears keep
    their input). Writing into it in place makes `loss.backward()` raise "one of the
    variables needed for gradient computation has been modified by an inplace operation"
    as soon as the module is put after such a layer, and it changes the caller's tensor.

    ## Example
    ```python
    def forward(self, x):
        return x.mul_(self.scale)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return x * self.scale
    ```

    ## Fix safety
    Safe: the out-of-place op computes the same values into a new tensor.
    """

    code = "RC204"
    name = "inplace-on-forward-input"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.WARNING
    prefilter = ("forward",)
    probe = "backward, input-mutation"

    VALID = (
        Valid(
            """
            import torch
            from torch import nn
            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = nn.Parameter(torch.ones(4))
                def forward(self, x):
                    return x * self.scale
            """
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 4)
                    self.bn = nn.BatchNorm1d(4)
                def forward(self, x):
                    out = self.bn(self.fc(x))
                    out += x
                    return out.relu()
            """,
            "the residual add writes into the block's own tensor, not its input",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = nn.Parameter(torch.ones(4))
                def forward(self, x):
                    x += self.scale
                    return x
            """,
            line=8,
            fix="""
            import torch
            from torch import nn
            class Scale(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.scale = nn.Parameter(torch.ones(4))
                def forward(self, x):
                    x = x + self.scale
                    return x
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if not flow.is_forward:
            return
        inputs = {f"arg:{p}" for p, v in flow.params.items() if v.kind is Kind.TENSOR}
        for write in flow.of(Write):
            if write.no_grad or deliberate_write(write) or not write.target.roots & inputs or not write.target.certain:
                continue
            if write.op.startswith("[...]") or saved_before(flow, write) is not None:
                continue  # masking entries is common and mostly harmless; a saved tensor is RC201's
            arg = sorted(r[4:] for r in write.target.roots & inputs)[0]
            if not _returns_input(flow, arg):
                continue  # the module's output is something else: the write is a local detail
            message = (
                f"`{short_code(write.stmt or write.node)}` writes in place into `{arg}`, the input of `forward`: the layer before "
                "this module has often saved that tensor for backward (tanh, sigmoid, softmax and relu keep their output), so "
                "training raises \"modified by an inplace operation\", and the caller's tensor changes too. Use the out-of-place op."
            )
            yield Hit(write.node, message, out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor"))


def _returns_input(flow: FunctionFlow, arg: str) -> bool:
    """forward returns its (mutated) input: `return x.mul_(s)`, or `x += b ... return x`."""
    from review_copies.rules.alias_mutation import _returns_argument

    return _returns_argument(flow, arg)


_SAVES_OUTPUT_MODULES = ("Tanh", "Sigmoid", "Softmax", "LogSoftmax", "ReLU", "ReLU6", "Hardtanh")


class InplaceModuleAfterSavingModule(Rule):
    """
    ## What it does
    Finds, in an `nn.Sequential(...)`, a module run in place (`nn.ReLU(inplace=True)`,
    `nn.Dropout(p, inplace=True)`...) right after a module whose backward needs its own
    output (`nn.Tanh()`, `nn.Sigmoid()`, `nn.Softmax()`...).

    ## Why is this bad?
    The in-place module overwrites the previous module's output, which autograd saved to
    compute that module's gradient; in training, `backward()` raises "one of the variables
    needed for gradient computation has been modified by an inplace operation". After
    `Linear`, `Conv` or `BatchNorm` the same in-place module is fine, which is why this
    slips through.

    ## Example
    ```python
    nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Dropout(0.1, inplace=True), nn.Linear(h, 1))
    ```

    ## Use instead
    ```python
    nn.Sequential(nn.Linear(d, h), nn.Tanh(), nn.Dropout(0.1), nn.Linear(h, 1))
    ```

    ## Fix safety
    Safe: the module computes the same values out of place.
    """

    code = "RC205"
    name = "inplace-module-after-saving-module"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = ("inplace=True",)
    probe = "backward"

    VALID = (
        Valid(
            """
            from torch import nn
            def make(d: int):
                return nn.Sequential(nn.Linear(d, d), nn.BatchNorm1d(d), nn.ReLU(inplace=True))
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            from torch import nn
            def make(d: int):
                return nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Dropout(0.1, inplace=True), nn.Linear(d, 1))
            """,
            line=3,
            fix="""
            from torch import nn
            def make(d: int):
                return nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Dropout(0.1), nn.Linear(d, 1))
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        from review_copies.analysis.flow import Call

        for event in flow.of(Call):
            if not event.is_any(("torch.nn.Sequential", "torch.nn.modules.container.Sequential")):
                continue
            layers = [a.value for a in event.call.args if a.keyword is None and not a.star]
            for before, layer in itertools.pairwise(layers):
                if _module_name(flow, before) in _SAVES_OUTPUT_MODULES and _inplace_arg(layer) is not None:
                    message = (
                        f"`{short_code(layer)}` overwrites in place the output of `{short_code(before)}`, which autograd saved to "
                        "compute that layer's gradient; in training, backward() raises \"modified by an inplace operation\". "
                        "Drop `inplace=True` here."
                    )
                    yield Hit(layer, message, (layer, _without_inplace(layer)))


def _module_name(flow: FunctionFlow, node: cst.BaseExpression) -> str:
    if not isinstance(node, cst.Call):
        return ""
    quals = flow.file.imports.lookup(code_of(node.func).split(".", 1)[0])
    rest = code_of(node.func).partition(".")[2]
    full = [f"{q}.{rest}" if rest else q for q in quals]
    return next((q.rsplit(".", 1)[1] for q in full if q.startswith("torch.nn.")), "")


def _inplace_arg(node: cst.BaseExpression) -> cst.Arg | None:
    if not isinstance(node, cst.Call):
        return None
    return next((a for a in node.args if a.keyword is not None and a.keyword.value == "inplace" and isinstance(a.value, cst.Name) and a.value.value == "True"), None)


def _without_inplace(node: cst.BaseExpression) -> cst.BaseExpression:
    assert isinstance(node, cst.Call)
    from review_copies.analysis.rewrite import clean_args

    return node.with_changes(args=clean_args([a for a in node.args if a is not _inplace_arg(node)]))
