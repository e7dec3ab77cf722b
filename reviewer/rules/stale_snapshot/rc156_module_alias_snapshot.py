"""RC156 module-alias-snapshot."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow, Use
from review_copies.analysis.guesses import MODULE_COPY_NAME
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.queries.handed import class_built
from review_copies.analysis.rewrite import dotted_expr
from review_copies.analysis.syntax import dotted, names_in, short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.stale_snapshot.helpers import copy_module


class ModuleAliasSnapshot(Rule):
    """
    ## What it does
    Finds a module assigned to a second name meant to be a separate copy —
    `self.target = self.policy`, `ema_model = model`, `teacher = student` — instead of a
    `copy.deepcopy`.

    ## Why is this bad?
    Assignment never copies a module: both names are one object with one set of
    parameters. Every optimizer step of the online network moves the "target", the "EMA"
    or the "teacher" too, so the periodic sync is a no-op and the algorithm silently
    degrades to using the online network.

    ## Example
    ```python
    self.policy = make_net()
    self.target = self.policy
    ```

    ## Use instead
    ```python
    self.target = copy.deepcopy(self.policy)
    ```

    ## Fix safety
    Safe when `copy` is imported (the fix uses it); otherwise the message says to add it.
    """

    code = "RC156"
    name = "module-alias-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("=",)
    recipes = ("snapshot",)

    VALID = (
        Valid(
            """
            import torch
            def build_optimizer(model: torch.nn.Module, lr: float):
                target_model = model
                if isinstance(model, torch.nn.DataParallel):
                    target_model = model.module
                return torch.optim.AdamW(target_model.parameters(), lr=lr)
            """,
            "the name is rebound to `model.module` when the model is wrapped: the module to optimize, not a copy (a project template's optimizer builder)",
        ),
        Valid(
            """
            import torch
            class WanS2V:
                @staticmethod
                def _get_parameter(module: torch.nn.Module, name: str):
                    target = module
                    for part in name.split(".")[:-1]:
                        target = getattr(target, part, None)
                        if target is None:
                            return None
                    return getattr(target, name.split(".")[-1], None)
            """,
            "`target` walks from the module down to the one that owns the parameter: a cursor (SimpleTuner)",
        ),
        Valid(
            """
            from torch import nn
            def replace_linear_with_lora(module, rank):
                for name, child in module.named_children():
                    if isinstance(child, nn.Linear):
                        lora = LoRALinear(child.in_features, child.out_features, rank)
                        lora.frozen_W = child
                        setattr(module, name, lora)
                    else:
                        replace_linear_with_lora(child, rank)
            """,
            "the linear is handed to the LoRA wrapper that takes its place in the parent: one owner, on purpose",
        ),
        Valid(
            """
            import copy
            from torch import nn
            from torch.optim.swa_utils import AveragedModel
            def make_swa(module: nn.Module, sharded: bool):
                module_for_swa = module
                if sharded:
                    module_for_swa = copy.deepcopy(module)
                return AveragedModel(module_for_swa)
            """,
            "the alias is only handed to `AveragedModel`, which makes its own copy",
        ),
        Valid(
            """
            import copy
            from torch import nn
            class Agent:
                def __init__(self):
                    self.policy = nn.Linear(4, 2)
                    self.target = copy.deepcopy(self.policy)
            """
        ),
        Valid(
            """
            from torch import nn
            class Translator(nn.Module):
                def embeddings(self):
                    source_embedding = nn.Embedding(self.vocab, self.dim)
                    if self.share_embeddings:
                        target_embedding = source_embedding
                    else:
                        target_embedding = nn.Embedding(self.vocab, self.dim)
                    return source_embedding, target_embedding
            """,
            "the other arm makes a separate module: sharing (weight tying) is the choice the code makes",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Autoencoder(nn.Module):
                def __init__(self, d: int):
                    super().__init__()
                    self.encoder = nn.Linear(d, 2)
            class Plotter:
                def __init__(self, trained: nn.Module, path: str):
                    self.trained, self.path = trained, path
                def load(self, use_trained: bool):
                    if use_trained:
                        best_model = self.trained
                    else:
                        best_model = Autoencoder(4).to("cpu")
                        best_model.load_state_dict(torch.load(self.path))
                    self.best_model = best_model.eval()
            """,
            "the other arm builds the model anew from disk: taking the trained one as it is, is the choice the code makes",
        ),
        Valid(
            """
            from torch import nn
            class Wrapper:
                def __init__(self, model: nn.Module):
                    self.model = model
            """,
            "keeping a handle, not a copy",
        ),
        Valid(
            """
            from torch import nn
            class Siamese(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.branch = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
                    self.branch_backup = self.branch
                def train(self, mode=True):
                    super().train(mode)
                    self.branch = self.branch_backup
                    return self
                def eval(self):
                    super().eval()
                    self.branch_backup = self.branch
                    self.branch = nn.DataParallel(self.branch)
                    return self
            """,
            "the \"backup\" keeps the bare module to undo the `DataParallel` wrapping with: the same module on purpose (Siamese-Vocal-Imitations)",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Compressor:
                def __init__(self, model: nn.Module):
                    self.original_model = model
                def distill(self, student: nn.Module, loader, temperature: float = 4.0):
                    teacher = self.original_model
                    teacher.eval()
                    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
                    for x, y in loader:
                        with torch.no_grad():
                            soft = (teacher(x) / temperature).softmax(dim=1)
                        loss = nn.functional.kl_div((student(x) / temperature).log_softmax(dim=1), soft, reduction="batchmean")
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    return student
            """,
            "the only optimizer built here trains the student: the teacher is the model itself, on purpose (a federated MAML repository's distillation)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import copy
            from torch import nn
            class Agent:
                def __init__(self):
                    self.policy = nn.Linear(4, 2)
                    self.target = self.policy
            """,
            line=6,
            fix="""
            import copy
            from torch import nn
            class Agent:
                def __init__(self):
                    self.policy = nn.Linear(4, 2)
                    self.target = copy.deepcopy(self.policy)
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            expr = bind.expr
            if bind.value.kind is not Kind.MODULE or not isinstance(expr, (cst.Name, cst.Attribute)) or not bind.value.has_params.value:
                continue
            target = bind.name.rsplit(".", 1)[-1]
            source = name_of(expr).rsplit(".", 1)[-1]
            if not MODULE_COPY_NAME.search(target) or MODULE_COPY_NAME.search(source):
                continue
            if "." not in bind.name and _only_handed_on(flow, bind):
                continue  # `AveragedModel(swa_module, ...)`: whether it copies is the callee's to say
            if _chosen_over_a_new_one(flow, bind):
                continue  # `if share: tgt = src` / `else: tgt = nn.Embedding(...)`: sharing is the choice made
            if _wrapper_takes_its_place(flow, bind):
                continue  # `lora.frozen_W = child; setattr(parent, name, lora)`: the wrapper holds what it wraps
            if _a_cursor(flow, bind):
                continue  # `target = module`, then `target = getattr(target, part)` in a loop: a walk down the tree
            if _unwrapped(flow, bind):
                continue  # `target_model = model`, then `if parallel: target_model = model.module`: the module to work on
            if _kept_to_unwrap(flow, bind):
                continue  # `self.backup = self.net`, `self.net = nn.DataParallel(self.net)`, later `self.net = self.backup`
            if _another_module_trained(flow, bind):
                continue  # `teacher = self.original_model`; the optimizer built here takes `student.parameters()`
            spelled = copy_module(flow)
            message = (
                f"`{bind.name} = {short_code(expr)}` does not copy the module: both names are one object with one set of parameters, "
                f"so training `{short_code(expr)}` moves `{bind.name}` too and it never holds older weights. "
                + ("Use `copy.deepcopy(...)`." if spelled else "Use `copy.deepcopy(...)` (add `import copy`).")
            )
            fix = (expr, cst.Call(func=dotted_expr(spelled), args=[cst.Arg(expr)])) if spelled else None
            yield Hit(bind.node, message, fix)


def _another_module_trained(flow: FunctionFlow, bind: Bind) -> bool:
    """The optimizers this function builds (one at least) all take the parameters of other
    modules than the alias and what it names (knowledge distillation's `optimizer =
    Adam(student.parameters())` beside `teacher = self.original_model`): nothing here trains
    the module, so the alias never drifts from it."""
    names = {bind.name, name_of(bind.expr)} if bind.expr is not None else {bind.name}
    trained = []
    for call in flow.of(Call):
        if not any(q.startswith("torch.optim.") for q in call.qualnames) or not call.call.args:
            continue
        first = call.call.args[0].value
        if not (isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute) and first.func.attr.value in ("parameters", "named_parameters")):
            return False  # parameter groups, a list: which modules they hold is not read here
        trained.append(dotted(first.func.value))
    return bool(trained) and all(t and not any(t == n or t.startswith(f"{n}.") or n.startswith(f"{t}.") for n in names) for t in trained)


def _only_handed_on(flow: FunctionFlow, bind: Bind) -> bool:
    """Every later read of the local alias passes it to a call as an argument: it is never
    run, trained or compared under its own name here."""
    arguments = {id(arg.value) for call in flow.of(Call) for arg in call.call.args}
    uses = [u for u in flow.after(bind) if isinstance(u, Use) and u.name == bind.name]
    return bool(uses) and all(id(u.node) in arguments for u in uses)


def _chosen_over_a_new_one(flow: FunctionFlow, bind: Bind) -> bool:
    """Another arm of the same `if` binds the name to a module it makes (`nn.Embedding(...)`,
    `copy.deepcopy(src)`, `Autoencoder(d).to(device)` of a class of the repository): the code
    decides between sharing and a separate module (weight tying, a target network turned off,
    a trained model or one loaded from disk), so the alias is meant."""
    return any(
        other.name == bind.name
        and isinstance(other.expr, cst.Call)
        and (other.value.kind is Kind.MODULE or bool(class_built(other.expr)))
        and other.exclusive_with(bind)
        for other in flow.of(Bind)
    )




def _a_cursor(flow: FunctionFlow, bind: Bind) -> bool:
    """In a loop after it, the name is bound again to something reached from itself (`target
    = getattr(target, part)`, `m = m.module`): it walks from the module to a submodule or
    attribute, a cursor, not a copy kept beside the module."""
    return any(
        isinstance(e, Bind) and e.name == bind.name and e.index > bind.index and e.loops and e.expr is not None and bind.name in names_in(e.expr)
        for e in flow.events
    )


def _unwrapped(flow: FunctionFlow, bind: Bind) -> bool:
    """Later the name is bound to a submodule of the same source (`target_model = model.module`
    when it is wrapped for data parallelism): it names the module to work on, not a copy."""
    source = name_of(bind.expr)
    return any(
        isinstance(e, Bind) and e.name == bind.name and e.index > bind.index and isinstance(e.expr, cst.Attribute) and name_of(e.expr).startswith(source + ".")
        for e in flow.events
    )


def _wrapper_takes_its_place(flow: FunctionFlow, bind: Bind) -> bool:
    """`wrapper.base = child`, and later the wrapper is put where the module was
    (`setattr(parent, name, wrapper)`, `parent.attr = wrapper`): the module is handed to the
    object that replaces it, whose job is to hold it (a LoRA or quantization wrapper), not a
    second copy kept beside it."""
    if "." not in bind.name:
        return False
    holder = bind.name.split(".")[0]
    for event in flow.after(bind):
        call = event.call if isinstance(event, Call) else None
        if call is not None and isinstance(call.func, cst.Name) and call.func.value == "setattr" and len(call.args) == 3 and name_of(call.args[2].value) == holder:
            return True
        if isinstance(event, Bind) and "." in event.name and isinstance(event.expr, cst.Name) and event.expr.value == holder:
            return True
    return False


def _kept_to_unwrap(flow: FunctionFlow, bind: Bind) -> bool:
    """`self.left_backup = self.left_branch`, in a class that wraps the module in place of
    itself (`self.left_branch = nn.DataParallel(self.left_branch)`) and puts the alias back
    (`self.left_branch = self.left_backup`): the alias keeps the bare module to undo the
    wrapping with. It is meant to be the same module, and older weights are not asked of it."""
    source = name_of(bind.expr)
    scope = flow.scope
    if scope is None or scope.class_node is None or not source.startswith("self.") or not bind.name.startswith("self."):
        return False
    wrapped = restored = False

    class _Find(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal wrapped, restored
            if not any(dotted(t.target) == source for t in node.targets):
                return
            value = node.value
            wrapped = wrapped or (isinstance(value, cst.Call) and any(dotted(arg.value) == source for arg in value.args))
            restored = restored or dotted(value) == bind.name

    scope.class_node.visit(_Find())
    return wrapped and restored

