"""RC202 inplace-on-leaf-requiring-grad."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow, Write
from review_copies.analysis.queries.callers import (
    called_grad_off_in_repository,
    called_only_under_no_grad,
    own_call_sites,
    reached_only_by_reference,
    used_only_under_no_grad,
)
from review_copies.analysis.queries.intent import deliberate_write, in_place_by_name
from review_copies.analysis.rewrite import no_grad_block
from review_copies.analysis.syntax import dotted, short_code
from review_copies.analysis.values import Tri
from review_copies.index.repo import grad_flag_setters
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


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

    ## Known problems
    A method or function named with a trailing underscore (`light.clamp_(min=0.0)`) is
    in place by the convention of `Tensor.clamp_`: like torch's own, it leaves turning
    autograd off to its caller, so its writes are reported only when a call in its own file
    runs it with autograd on; such a call in another file is not seen.
    """

    code = "RC202"
    name = "inplace-on-leaf-requiring-grad"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = ("_(", "=")
    recipes = ("leaf-inplace",)

    VALID = (
        Valid(
            """
            import torch
            class DQN:
                def __init__(self, network, init_weight_std=None):
                    self.network = network()
                    if init_weight_std is not None:
                        def init_weights(m):
                            if type(m) == torch.nn.Linear:
                                m.weight.normal_(0, init_weight_std)

                        with torch.no_grad():
                            self.network.apply(init_weights)
                    self.optimizer = torch.optim.Adam(self.network.parameters())
            """,
            "the closure's only use is handed to `apply` under `torch.no_grad()`, where it runs (ElegantRL)",
        ),
        Valid(
            """
            import torch
            def box_filter(n):
                conv = torch.nn.Conv1d(1, 1, kernel_size=2 * n + 1, bias=False)
                conv.weight.requires_grad_(False)
                conv.weight *= 0
                conv.weight += 1 / (2 * n + 1)
                return conv
            """,
            "`requires_grad_(False)` on the weight first: it is no longer a leaf that requires grad (KPConv-PyTorch's plot_convergence.py)",
        ),
        Valid(
            """
            import torch
            class EnvironmentLight(torch.nn.Module):
                def __init__(self, base):
                    super().__init__()
                    self.base = torch.nn.Parameter(base.detach().clone(), requires_grad=True)
                def clamp_(self, min=None, max=None):
                    self.base.clamp_(min, max)
            """,
            "`clamp_` is in place by name, as `Tensor.clamp_` is: its caller turns autograd off (nvdiffrec clamps the light under `torch.no_grad()`)",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Initializer:
                def __init__(self, std: float):
                    self.std = std
                    self.by_type = {nn.Linear: self._init_linear}
                def _init_linear(self, module: nn.Linear):
                    nn.init.normal_(module.weight, std=self.std)
                    module.bias.zero_()
                def init(self, module: nn.Module):
                    self.by_type[type(module)](module)
            @torch.no_grad()
            def init_weights(model: nn.Module, initializer: Initializer):
                for m in model.modules():
                    initializer.init(m)
            """,
            "a method reached only through a table: no call of it says whether autograd is on where it runs",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Ema:
                def __init__(self, model: nn.Module):
                    self.module = model
                def blend_(self, model: nn.Module, decay: float):
                    for ema_p, p in zip(self.module.parameters(), model.parameters()):
                        ema_p.lerp_(p, 1.0 - decay)
                @torch.no_grad()
                def update(self, model: nn.Module):
                    self.blend_(model, 0.99)
            """,
            "every caller in the file runs the helper under no_grad",
        ),
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
        Valid(
            """
            import torch
            from torch import nn
            def fuse(conv: nn.Conv2d, scale: torch.Tensor) -> nn.Conv2d:
                fused = nn.Conv2d(conv.in_channels, conv.out_channels, 3, bias=True).requires_grad_(False)
                fused.weight.copy_(conv.weight * scale.view(-1, 1, 1, 1))
                return fused
            """,
            "the new module's parameters were made not to require grad before they are filled",
        ),
        Valid(
            """
            import copy
            import torch
            from torch import nn
            class Rebasin(nn.Module):
                def __init__(self, model: nn.Module):
                    super().__init__()
                    self.source = copy.deepcopy(model)
                    self.output = copy.deepcopy(model)
                    for p1, p2 in zip(self.source.parameters(), self.output.parameters()):
                        p1.requires_grad = False
                        p2.requires_grad = False
                def permute(self, perm: torch.Tensor):
                    for p1, p2 in zip(self.output.parameters(), self.source.parameters()):
                        p1.copy_(p2[perm])
            """,
            "the constructor froze every parameter of both copies (cycle-consistent-model-merging's ReparamNet)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            class Ema:
                def __init__(self, model: nn.Module):
                    self.module = model
                def blend_(self, model: nn.Module, decay: float):
                    for ema_p, p in zip(self.module.parameters(), model.parameters()):
                        ema_p.lerp_(p, 1.0 - decay)
                @torch.no_grad()
                def update(self, model: nn.Module):
                    self.blend_(model, 0.99)
                def warm_start(self, model: nn.Module):
                    self.blend_(model, 0.0)
            """,
            line=8,
            fix="""
            import torch
            from torch import nn
            class Ema:
                def __init__(self, model: nn.Module):
                    self.module = model
                def blend_(self, model: nn.Module, decay: float):
                    for ema_p, p in zip(self.module.parameters(), model.parameters()):
                        with torch.no_grad():
                            ema_p.lerp_(p, 1.0 - decay)
                @torch.no_grad()
                def update(self, model: nn.Module):
                    self.blend_(model, 0.99)
                def warm_start(self, model: nn.Module):
                    self.blend_(model, 0.0)
            """,
            note="`warm_start` calls the helper with autograd on",
        ),
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
            if _callers_turn_grad_off(flow) or called_grad_off_in_repository(flow) or reached_only_by_reference(flow):
                break  # every caller turns autograd off, or no call says whether it does
            if _frozen_by_a_call(flow, write):
                continue
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


def _callers_turn_grad_off(flow: FunctionFlow) -> bool:
    """A function in place by name (`clamp_`), as torch's own are, leaves autograd to its
    caller: unless a call in its own file runs it with autograd on, its callers are taken
    to turn it off (nvdiffrec clamps its light under `torch.no_grad()` in another file)."""
    scope = flow.scope
    if scope is not None and used_only_under_no_grad(flow.file, scope):
        return True  # `with torch.no_grad(): self.network.apply(init_weights)`, the closure's only use
    return in_place_by_name(flow) and scope is not None and (not own_call_sites(flow.file, scope) or called_only_under_no_grad(flow.file, scope))


def _frozen_by_a_call(flow: FunctionFlow, write: Write) -> bool:
    """`nethook.set_requires_grad(False, layer)` before `layer.bias[...] = mean` (ROME's
    causal tracing): a function of the repository that sets the grad flag of every parameter
    of the modules handed to it (the index's `grad_flags`) turned it off, earlier in this
    function, for the module whose parameter is written."""
    index = flow.index
    target = dotted(write.target_node)
    if index is None or not target:
        return False
    parts = target.split(".")
    owners = {".".join(parts[:i]) for i in range(1, len(parts))}
    for event in flow.of(Call):
        call = event.call
        if event.line >= write.line:
            continue
        name = dotted(call.func).rpartition(".")[2]
        if not name or not any(dotted(v) in owners for v in _handed(call)):
            continue  # the index is asked only about calls handed the module (it greps the repository)
        setters = grad_flag_setters(index, name)  # type: ignore[arg-type]
        if setters and all(_turns_off(call, setter, owners) for setter in setters):
            return True
    return False


def _turns_off(call: cst.Call, setter: dict, owners: set[str]) -> bool:
    """Whether this call of a grad-flag setter passes `False` for the flag and one of
    `owners` (or a list holding one) for the modules."""
    positional: list[str] = list(setter["positional"])
    if positional and positional[0] == "self" and isinstance(call.func, cst.Attribute):
        positional = positional[1:]  # `self.set_requires_grad(...)`: `self` is not passed
    bound: dict[str, list[cst.BaseExpression]] = {}
    place = 0
    for arg in call.args:
        if arg.star:
            return False
        if arg.keyword is not None:
            bound.setdefault(arg.keyword.value, []).append(arg.value)
            continue
        param = positional[place] if place < len(positional) else setter["vararg"]
        place += 1
        if param is None:
            return False
        bound.setdefault(param, []).append(arg.value)
    flag = setter["flag"]
    if isinstance(flag, str):
        given = bound.get(flag)
        if given is None:
            flag = setter["defaults"].get(flag)
        else:
            flag = given[0].value == "True" if isinstance(given[0], cst.Name) and given[0].value in ("True", "False") else None
    if flag is not False:
        return False
    handed = [e for m in setter["modules"] for v in bound.get(m, []) for e in _items(v)]
    return any(dotted(v) in owners for v in handed)


def _handed(call: cst.Call) -> list[cst.BaseExpression]:
    """What the call is handed, the items of a list or tuple argument included."""
    return [e for arg in call.args for e in _items(arg.value)]


def _items(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    return [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
