"""stale-snapshot: a "copy" that is really a reference and changes later under it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst
from review_copies.analysis.flow import Bind, Event, FunctionFlow, Store, Use, Write, short_code
from review_copies.analysis.flowquery import alias_pairs, calls_with, deliberate_write, loop_of, name_of, overlaps
from review_copies.analysis.rewrite import atom, call_method_name, chain, dotted_expr, method, receiver_of
from review_copies.analysis.values import Kind, Value
from review_copies.model.findings import Category, Severity
from review_copies.rules.alias_mutation import attribute_source, copy_at_binding
from review_copies.rules.base import Hit, Invalid, Rule, Valid

# Names people give to values meant to keep the past.
SNAPSHOT_NAME = re.compile(r"(best|init|initial|orig|original|prev|previous|old|before|saved|snapshot|snap|backup|start|ref|reference|last|frozen|copy|ckpt|checkpoint|pre)", re.I)


def _changes_after(flow: FunctionFlow, bind: Bind, roots: frozenset[str], owner: str) -> Event | None:
    """The first later event that changes those storages through another name."""
    for event in flow.after(bind):
        # Writes through the snapshot itself (or a name taken from it) are deliberate write-through.
        if isinstance(event, Write) and overlaps(event.target.roots, roots) and not event.op.startswith("nn.init.") and not _through(flow, event, bind.name):
            return event
    if owner:
        for call in calls_with(flow, owner):
            if call.index > bind.index or (set(call.loops) & set(bind.loops)):
                return call
    return None


def _through(flow: FunctionFlow, write: Write, name: str) -> bool:
    writer = name_of(write.target_node)
    if writer == name or writer.startswith(name + ".") or writer.startswith(name + "["):
        return True
    from review_copies.analysis.flow import code_of
    from review_copies.analysis.flowquery import last_bind

    bind = last_bind(flow, writer, write.index)
    return bind is not None and bind.expr is not None and re.search(rf"\b{re.escape(name)}\b", code_of(bind.expr)) is not None


def _read_after(flow: FunctionFlow, name: str, change: Event, roots: frozenset[str]) -> Use | None:
    for event in flow.after(change):
        if isinstance(event, Use) and event.name == name and (event.index > change.index or set(event.loops) & set(change.loops)):
            return event
    return None


def _copy_module(flow: FunctionFlow) -> str | None:
    """How to spell copy.deepcopy here: 'copy.deepcopy', 'deepcopy', or None (needs an import)."""
    imports = flow.file.imports
    if imports.module_alias("copy"):
        return f"{imports.module_alias('copy')}.deepcopy"
    for name, quals in imports.module_level.items():
        if "copy.deepcopy" in quals:
            return name
    return None


def _clone_items(source: cst.BaseExpression) -> cst.DictComp:
    """`{k: v.detach().clone() for k, v in source.items()}`: a copy that needs no import."""
    k, v = cst.Name("k"), cst.Name("v")
    return cst.DictComp(
        key=k,
        value=chain(v, "detach", "clone"),
        for_in=cst.CompFor(target=cst.Tuple([cst.Element(k), cst.Element(v)], lpar=[], rpar=[]), iter=method(atom(source), "items")),
    )


def _deepcopy_fix(flow: FunctionFlow, expr: cst.BaseExpression) -> tuple[cst.CSTNode, cst.CSTNode]:
    inner = expr
    # d.copy() and dict(d) are shallow: deep-copy the original instead.
    if call_method_name(expr) == "copy" and isinstance(expr, cst.Call) and not expr.args:
        inner = receiver_of(expr)
    elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict" and len(expr.args) == 1:
        inner = expr.args[0].value
    spelled = _copy_module(flow)
    if spelled is None:
        # Without `import copy` a deepcopy suggestion would not run: copy the tensors instead.
        return expr, _clone_items(inner)
    return expr, cst.Call(func=dotted_expr(spelled), args=[cst.Arg(inner)])


def _remedy(flow: FunctionFlow) -> str:
    if _copy_module(flow):
        return "Use `copy.deepcopy(...)`"
    return "Copy the tensors (`{k: v.detach().clone() for k, v in ....items()}`, or `copy.deepcopy(...)` after `import copy`)"


class StateDictSnapshot(Rule):
    """
    ## What it does
    Finds `best = model.state_dict()` (or `optimizer.state_dict()`, or a shallow
    `.copy()` / `dict(...)` of one) kept as a snapshot while training goes on changing the
    model.

    ## Why is this bad?
    `state_dict()` returns references to the live parameter and buffer tensors, not
    copies. Every later optimizer step changes the "snapshot" too, so the best model you
    restore or save at the end is just the last one (torch 2.13: after 3 SGD steps the
    snapshot equals the current weights). A shallow `.copy()` copies the dict, not the
    tensors.

    ## Example
    ```python
    for epoch in range(epochs):
        train_one_epoch(model, optimizer)
        if val_loss(model) < best_loss:
            best_state = model.state_dict()
    model.load_state_dict(best_state)
    ```

    ## Use instead
    ```python
            best_state = copy.deepcopy(model.state_dict())
    ```
    or `{k: v.detach().clone() for k, v in model.state_dict().items()}`.

    ## Fix safety
    Safe: the deep copy holds the values at that moment; the message says when
    `import copy` must be added.
    """

    code = "RC151"
    name = "state-dict-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("state_dict",)
    probe = "snapshot"

    VALID = (
        Valid(
            """
            import copy
            import torch
            def fit(model, loader, optimizer, epochs: int):
                best, best_state = float("inf"), None
                for _ in range(epochs):
                    for x, y in loader:
                        loss = (model(x) - y).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    if loss.item() < best:
                        best, best_state = loss.item(), copy.deepcopy(model.state_dict())
                return best_state
            """
        ),
        Valid(
            """
            import torch
            def save(model, path: str):
                torch.save(model.state_dict(), path)
            """,
            "used at once",
        ),
        Valid(
            """
            import torch
            def load_pretrained(model, other):
                sd = model.state_dict()
                with torch.no_grad():
                    for k, v in other.items():
                        sd[k].copy_(v)
                return model
            """,
            "writing into the live weights through the state_dict is the point",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def fit(model, loader, optimizer, epochs: int):
                best, best_state = float("inf"), None
                for _ in range(epochs):
                    for x, y in loader:
                        loss = (model(x) - y).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    if loss.item() < best:
                        best = loss.item()
                        best_state = model.state_dict()
                return best_state
            """,
            line=12,
            fix="""
            import torch
            def fit(model, loader, optimizer, epochs: int):
                best, best_state = float("inf"), None
                for _ in range(epochs):
                    for x, y in loader:
                        loss = (model(x) - y).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    if loss.item() < best:
                        best = loss.item()
                        best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                return best_state
            """,
            note="no `import copy` in the file: the fix copies the tensors itself",
        ),
        Invalid(
            """
            import copy
            import torch
            from torch import nn
            def finetune(model: nn.Module, batches):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                initial = model.state_dict().copy()
                for x, y in batches:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return initial
            """,
            line=6,
            fix="""
            import copy
            import torch
            from torch import nn
            def finetune(model: nn.Module, batches):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                initial = copy.deepcopy(model.state_dict())
                for x, y in batches:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return initial
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            value = bind.value
            if bind.expr is None or not _state_dict_refs(value):
                continue
            how = (
                "a shallow copy of a state_dict, whose tensors are still the live ones"
                if value.via == "shallow-copy" or value.kind is Kind.DICT
                else "`state_dict()` returns references to the live tensors, not copies"
            )
            if bind.name.startswith("self."):
                # Kept on the object: training between calls changes it under the snapshot.
                message = (
                    f"`{bind.name} = {short_code(bind.expr)}` is not a snapshot: {how}. It is kept on the object while the model "
                    f"(or optimizer) goes on changing, so whatever later reads `{bind.name}` gets the current values. {_remedy(flow)}."
                )
                yield Hit(bind.node, message, _deepcopy_fix(flow, bind.expr) if value.kind is not Kind.DICT else None)
                continue
            owner = _owner(bind.expr)
            roots = value.element.roots if value.element is not None and value.element.roots else value.roots
            change = _changes_after(flow, bind, roots, owner)
            if change is None:
                continue
            read = _read_after(flow, bind.name, change, roots)
            if read is None or not (bind.loops or SNAPSHOT_NAME.search(bind.name) or isinstance(change, Write)):
                continue
            message = (
                f"`{bind.name} = {short_code(bind.expr)}` is not a snapshot: {how}. `{short_code(change.node)}` at line {change.line} "
                f"changes them, so `{bind.name}` read at line {read.line} holds the new values. {_remedy(flow)}."
            )
            fix = _deepcopy_fix(flow, bind.expr) if value.kind is not Kind.DICT else None
            yield Hit(bind.node, message, fix, anchors=(read.node,))


def _state_dict_refs(value: Value) -> bool:
    """A state_dict, a shallow copy of one, or a dict of its tensors that may be the same tensors."""
    if value.kind is Kind.STATE_DICT:
        return value.via in ("state_dict", "shallow-copy")
    element = value.element
    return value.kind is Kind.DICT and element is not None and element.kind is Kind.TENSOR and element.via == "state_dict" and element.certain


def _owner(expr: cst.BaseExpression) -> str:
    """`model` in `model.state_dict()` / `model.state_dict().copy()`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in ("state_dict", "parameters", "named_parameters", "buffers"):
            return name_of(expr.func.value)
        expr = expr.func.value
    if isinstance(expr, cst.Call) and expr.args:
        return _owner(expr.args[0].value)
    return ""


class ParametersSnapshot(Rule):
    """
    ## What it does
    Finds parameters kept as a "before" snapshot by reference — `init = list(model.parameters())`,
    `w0 = model.fc.weight`, `[p for p in model.parameters()]` — while training goes on
    changing them, and the snapshot is read afterwards (to compare, to measure drift, to
    restore).

    ## Why is this bad?
    These are the live `Parameter` objects. Optimizer steps update them in place, so the
    snapshot changes with them and every comparison against it sees no difference.

    ## Example
    ```python
    initial = [p for p in model.parameters()]
    train(model, optimizer)
    drift = sum((p - q).norm() for p, q in zip(model.parameters(), initial))   # always 0
    ```

    ## Use instead
    ```python
    initial = [p.detach().clone() for p in model.parameters()]
    ```

    ## Fix safety
    Safe: the copies hold the values at that moment and are out of the graph.
    """

    code = "RC152"
    name = "parameters-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("parameters", "weight", "bias")
    probe = "snapshot"

    VALID = (
        Valid(
            """
            import torch
            def fit(model, loader):
                params = list(model.parameters())
                opt = torch.optim.SGD(params, lr=0.1)
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    torch.nn.utils.clip_grad_norm_(params, 1.0)
                    opt.step()
            """,
            "a handle on the parameters, not a snapshot",
        ),
        Valid(
            """
            import torch
            def drift(model, loader, opt):
                initial = [p.detach().clone() for p in model.parameters()]
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return sum((p - q).norm() for p, q in zip(model.parameters(), initial))
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def drift(model, loader, opt):
                initial = list(model.parameters())
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return sum((p - q).norm() for p, q in zip(model.parameters(), initial))
            """,
            line=3,
            fix="""
            import torch
            def drift(model, loader, opt):
                initial = [p.detach().clone() for p in model.parameters()]
                for x, y in loader:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return sum((p - q).norm() for p, q in zip(model.parameters(), initial))
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            value = bind.value
            element = value.element
            is_list = (
                value.kind in (Kind.PARAMETER_LIST, Kind.LIST)
                and element is not None
                and element.kind is Kind.TENSOR
                and (element.leaf or any(r.startswith("grad:") for r in element.roots))
            )
            is_param = value.kind is Kind.TENSOR and value.leaf and isinstance(bind.expr, cst.Attribute)
            if not (is_list or is_param) or bind.expr is None or not SNAPSHOT_NAME.search(bind.name):
                continue
            roots = element.roots if is_list and element is not None else value.roots
            change = _changes_after(flow, bind, roots, _owner(bind.expr))
            if change is None:
                continue
            read = _read_after(flow, bind.name, change, roots)
            if read is None:
                continue
            message = (
                f"`{bind.name} = {short_code(bind.expr)}` keeps the live parameters, not their values: `{short_code(change.node)}` at "
                f"line {change.line} updates them in place, so `{bind.name}` read at line {read.line} shows the new values. "
                "Copy with `.detach().clone()`."
            )
            yield Hit(bind.node, message, _param_fix(bind.expr, is_list), anchors=(read.node,))


def _param_fix(expr: cst.BaseExpression, is_list: bool) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    if not is_list:
        return expr, chain(atom(expr), "detach", "clone")
    source = expr
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1:
        source = expr.args[0].value
    elif isinstance(expr, cst.ListComp) and isinstance(expr.elt, cst.Name) and isinstance(expr.for_in.target, cst.Name) and expr.elt.value == expr.for_in.target.value and not expr.for_in.ifs:
        source = expr.for_in.iter
    else:
        return None
    p = cst.Name("p")
    return expr, cst.ListComp(elt=chain(p, "detach", "clone"), for_in=cst.CompFor(target=p, iter=source))


class ReusedBufferAppended(Rule):
    """
    ## What it does
    Finds a tensor allocated once before a loop, written in place inside the loop, and
    appended to a list (or stored in a dict) on each iteration.

    ## Why is this bad?
    The list holds the same tensor N times, not N snapshots: at the end every entry
    shows the last iteration's values.

    ## Example
    ```python
    buf = torch.zeros(4)
    frames = []
    for step in range(n):
        buf.copy_(read_frame(step))
        frames.append(buf)
    ```

    ## Use instead
    ```python
        frames.append(buf.clone())
    ```

    ## Fix safety
    Safe: each entry becomes its own copy of the values at that iteration.
    """

    code = "RC153"
    name = "reused-buffer-appended"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("append", "[", "insert")
    probe = "snapshot"

    VALID = (
        Valid(
            """
            import torch
            def frames(n: int):
                out = []
                for step in range(n):
                    buf = torch.full((4,), float(step))
                    out.append(buf)
                return out
            """,
            "a new tensor each iteration",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def frames(n: int):
                buf = torch.zeros(4)
                out = []
                for step in range(n):
                    buf.fill_(step)
                    out.append(buf)
                return out
            """,
            line=7,
            fix="""
            import torch
            def frames(n: int):
                buf = torch.zeros(4)
                out = []
                for step in range(n):
                    buf.fill_(step)
                    out.append(buf.clone())
                return out
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for store in flow.of(Store):
            loop = loop_of(flow, store)
            value = store.value
            if loop is None or store.how not in ("append", "insert", "setitem", "add") or value.kind is not Kind.TENSOR or store.value_node is None:
                continue
            stored = name_of(store.value_node)
            if not stored or not _made_before(flow, stored, loop.start):
                continue
            writes = [w for w in flow.of(Write) if set(w.loops) & set(store.loops) and overlaps(w.target.roots, value.roots) and not deliberate_write(w)]
            if not writes:
                continue
            message = (
                f"`{stored}` is one tensor made before the loop at line {loop.start} and rewritten in place every iteration "
                f"(`{short_code(writes[0].stmt or writes[0].node)}`, line {writes[0].line}); `{short_code(store.node)}` stores that same "
                f"tensor each time, so every entry of `{store.container}` ends up with the last iteration's values. Store `{stored}.clone()`."
            )
            yield Hit(store.node, message, (store.value_node, chain(atom(store.value_node), "clone")))


def _made_before(flow: FunctionFlow, name: str, line: int) -> bool:
    binds = [b for b in flow.of(Bind) if b.name == name]
    return bool(binds) and all(b.line < line for b in binds)


class ShallowCopySnapshot(Rule):
    """
    ## What it does
    Finds a shallow copy of tensors — `list(tensors)`, `tensors.copy()`, `dict(d)`,
    `copy.copy(t)` — kept as a snapshot while the tensors it holds are changed in place
    and the copy is read afterwards.

    ## Why is this bad?
    A shallow copy copies the container, not the tensors (and `copy.copy(t)` of a tensor
    shares its storage): an in-place update of the originals shows up in the "copy".

    ## Example
    ```python
    before = list(states)
    for s in states:
        s.mul_(decay)
    delta = [a - b for a, b in zip(states, before)]   # all zeros
    ```

    ## Use instead
    ```python
    before = [s.detach().clone() for s in states]
    ```

    ## Fix safety
    Safe: the snapshot holds independent copies of the values at that moment.
    """

    code = "RC154"
    name = "shallow-copy-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("copy", "list(", "dict(")
    probe = "snapshot"

    VALID = (
        Valid(
            """
            import torch
            def f(states: list):
                before = [s.detach().clone() for s in states]
                for s in states:
                    s.mul_(0.9)
                return before
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                states = [torch.ones(2), torch.ones(2)]
                before = list(states)
                for s in states:
                    s.mul_(0.9)
                return [a - b for a, b in zip(states, before)]
            """,
            line=4,
            fix="""
            import torch
            def f():
                states = [torch.ones(2), torch.ones(2)]
                before = [s.detach().clone() for s in states]
                for s in states:
                    s.mul_(0.9)
                return [a - b for a, b in zip(states, before)]
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for bind in flow.of(Bind):
            value = bind.value
            if value.via != "shallow-copy" or value.kind is Kind.STATE_DICT or bind.expr is None:
                continue
            element = value.element
            if value.kind is Kind.TENSOR:
                roots = value.roots
            elif element is not None and element.kind is Kind.TENSOR and not element.leaf:
                roots = element.roots  # (parameter lists are RC152's)
            else:
                continue
            change = next((w for w in flow.after(bind) if isinstance(w, Write) and overlaps(w.target.roots, roots) and name_of(w.target_node) != bind.name), None)
            if change is None:
                continue
            read = _read_after(flow, bind.name, change, roots)
            if read is None:
                continue
            message = (
                f"`{bind.name} = {short_code(bind.expr)}` copies the container, not the tensors in it: `{short_code(change.stmt or change.node)}` "
                f"at line {change.line} changes them in place, so `{bind.name}` read at line {read.line} sees the new values. "
                "Copy the tensors (`.detach().clone()`)."
            )
            yield Hit(bind.node, message, _shallow_fix(bind.expr, value.kind), anchors=(read.node,))


def _shallow_fix(expr: cst.BaseExpression, kind: Kind) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    if not isinstance(expr, cst.Call):
        return None
    if isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1 and kind is not Kind.DICT:
        source = expr.args[0].value
    elif call_method_name(expr) == "copy" and not expr.args and kind is Kind.LIST:
        source = receiver_of(expr)
    else:
        return None
    s = cst.Name("s")
    return expr, cst.ListComp(elt=chain(s, "detach", "clone"), for_in=cst.CompFor(target=s, iter=source))


class AliasKeptAsSnapshot(Rule):
    """
    ## What it does
    Finds `prev = x` (or `prev = x.detach()`, `prev = self.running_mean`, ...) kept to
    remember a value, followed by an in-place update of `x` and a read of `prev`.

    ## Why is this bad?
    `prev` is the same tensor as `x`, not a copy of its values: the in-place update
    changes `prev` too, and the comparison or restore that reads it sees the new values.

    ## Example
    ```python
    prev = self.running_mean
    self.running_mean.mul_(1 - m).add_(m * batch_mean)
    shift = (self.running_mean - prev).abs().max()     # always 0
    ```

    ## Use instead
    ```python
    prev = self.running_mean.clone()
    ```

    ## Fix safety
    Safe: the copy holds the values at that moment.
    """

    code = "RC155"
    name = "alias-kept-as-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("=",)
    probe = "snapshot"

    VALID = (
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                prev = x.clone()
                x.mul_(2)
                return (x - prev).abs().max()
            """
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            def shift(bn: nn.BatchNorm1d, batch: torch.Tensor):
                prev = bn.running_mean
                bn.running_mean.mul_(0.9).add_(0.1 * batch.mean(0))
                return (bn.running_mean - prev).abs().max()
            """,
            line=4,
            fix="""
            import torch
            from torch import nn
            def shift(bn: nn.BatchNorm1d, batch: torch.Tensor):
                prev = bn.running_mean.clone()
                bn.running_mean.mul_(0.9).add_(0.1 * batch.mean(0))
                return (bn.running_mean - prev).abs().max()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        reported: set[str] = set()
        for write in flow.of(Write):
            if deliberate_write(write) and write.op != "optimizer.step()":
                continue
            for pair in alias_pairs(flow, write):
                if pair.writer_is_alias or pair.holder_bind is None or pair.holder_bind.expr is None or pair.holder in reported:
                    continue
                if not pair.holder_value.certain or not attribute_source(pair.holder_bind.expr):
                    continue  # local tensors kept by reference are alias-mutation (RC101...)
                reported.add(pair.holder)
                bind = pair.holder_bind
                message = (
                    f"`{pair.holder} = {short_code(bind.expr)}` keeps a reference, not the values: `{short_code(write.stmt or write.node)}` at line "
                    f"{write.line} updates that same tensor in place, so `{pair.holder}` read at line {pair.reads[0].line} shows the new "
                    "values. Copy with `.clone()`."
                )
                yield Hit(bind.node, message, copy_at_binding(bind), anchors=(write.node,))




MODULE_COPY_NAME = re.compile(r"(target|ema|teacher|frozen|best|snapshot|shadow|backup|momentum_|average|averaged|swa)", re.I)


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
    probe = "snapshot"

    VALID = (
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
            class Wrapper:
                def __init__(self, model: nn.Module):
                    self.model = model
            """,
            "keeping a handle, not a copy",
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
            spelled = _copy_module(flow)
            message = (
                f"`{bind.name} = {short_code(expr)}` does not copy the module: both names are one object with one set of parameters, "
                f"so training `{short_code(expr)}` moves `{bind.name}` too and it never holds older weights. "
                + ("Use `copy.deepcopy(...)`." if spelled else "Use `copy.deepcopy(...)` (add `import copy`).")
            )
            fix = (expr, cst.Call(func=dotted_expr(spelled), args=[cst.Arg(expr)])) if spelled else None
            yield Hit(bind.node, message, fix)
