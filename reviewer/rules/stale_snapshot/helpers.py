"""What the stale-snapshot rules share."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import libcst as cst

from review_copies.analysis.events import Bind, Call, Event, FunctionFlow, Store, Use, Write
from review_copies.analysis.queries.aliasing import calls_with, last_bind, name_of, on_every_path
from review_copies.analysis.rewrite import atom, chain, dotted_expr, method
from review_copies.analysis.roots import overlaps
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import call_method_name, code_of, dotted, names_in, receiver_of
from review_copies.analysis.values import Kind, Value
from review_copies.index.attributes import never_read


def changes_after(flow: FunctionFlow, bind: Bind, roots: frozenset[str], owner: str) -> Event | None:
    """The first later event that changes those storages through another name. A snapshot
    taken again at the top level of every iteration of its loop is changed by what runs
    before it in the body only where the next iteration reads it before taking it again."""
    retaken = taken_every_iteration(flow, bind)

    def reaches(event: Event) -> bool:
        if event.index > bind.index:
            return True
        if not set(event.loops) & set(bind.loops):
            return False
        return not retaken or any(isinstance(u, Use) and u.name == bind.name and event.index < u.index < bind.index for u in flow.events)

    for event in flow.after(bind):
        # Writes through the snapshot itself (or a name taken from it) are deliberate write-through.
        if isinstance(event, Write) and overlaps(event.target.roots, roots) and not event.op.startswith("nn.init.") and not through(flow, event, bind.name) and reaches(event):
            if event.op == "load_state_dict" and _loads_itself(event, bind.name):
                continue  # `m.load_state_dict(sd)` copies each live tensor of `sd` onto itself: the values stay
            return event
    if owner:
        for call in calls_with(flow, owner):
            if reaches(call) and not _only_reads(flow, call, owner) and not _owner_rebound(flow, owner, bind, call) and not _a_conversion(flow, call):
                return call
    return None


# A callable whose name says it converts its argument into something else (`hf_to_te_fn`,
# `convert_model`, `export`): it builds the other form and hands it back.
_CONVERTER_NAME = re.compile(r"(^|_)(to|convert|converter|export|exporter)_|^(convert|export)", re.I)


def _a_conversion(flow: FunctionFlow, call: Call) -> bool:
    """`model_te = hf_to_te_fn(model)`: an unknown callable named for a conversion whose
    result is kept under a new name. A converter builds the converted model and returns it;
    a roundtrip test compares the original's state dict with what comes back, and nothing
    changes the original under it."""
    func = call.call.func
    callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if not _CONVERTER_NAME.search(callee):
        return False
    return any(isinstance(e, Bind) and e.expr is call.call and not any(name_of(a.value) == e.name for a in call.call.args) for e in flow.events)


def _owner_rebound(flow: FunctionFlow, owner: str, bind: Bind, call: Call) -> bool:
    """`adapt_opt = Adam(...)` between the snapshot and the call, on every path: the call is
    handed another object, not the one the snapshot was taken from."""
    return any(isinstance(e, Bind) and e.name == owner and bind.index < e.index < call.index and on_every_path(e, bind, call) for e in flow.events)


def _only_reads(flow: FunctionFlow, call: Call, name: str) -> bool:
    """The repository's definition of the called function only looks into what `name` is
    passed as, or changes no tensor at all itself (its index says so)."""
    if flow.index is None or not isinstance(call.call.func, cst.Name):
        return False
    if flow.index.changes_nothing(call.call.func.value):
        return True
    for position, arg in enumerate(call.call.args):
        if name_of(arg.value) != name or arg.star:
            continue
        keyword = arg.keyword.value if arg.keyword is not None else None
        if not flow.index.only_reads(call.call.func.value, None if keyword else position, keyword):
            return False
    return True


def _loads_itself(write: Write, name: str) -> bool:
    call = write.node
    return isinstance(call, cst.Call) and bool(call.args) and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == name


def taken_every_iteration(flow: FunctionFlow, bind: Bind) -> bool:
    """The binding runs on every iteration of its innermost loop before anything after it in
    the body reads it: a statement of the loop's own body, or of a `with` or `try` block
    there (under no `if`)."""
    if not bind.loops or bind.stmt is None:
        return False

    def holds(stmts: Sequence[cst.BaseStatement]) -> bool:
        for stmt in stmts:
            if stmt is bind.stmt or (isinstance(stmt, cst.SimpleStatementLine) and any(small is bind.stmt for small in stmt.body)):
                return True
            if isinstance(stmt, (cst.With, cst.Try)) and isinstance(stmt.body, cst.IndentedBlock) and holds(stmt.body.body):
                return True
        return False

    return holds(flow.loops[bind.loops[-1]].node.body.body)


def through(flow: FunctionFlow, write: Write, name: str) -> bool:
    writer = name_of(write.target_node)
    if writer == name or writer.startswith(name + ".") or writer.startswith(name + "["):
        return True
    bind = last_bind(flow, writer, write.index)
    return bind is not None and bind.expr is not None and re.search(rf"\b{re.escape(name)}\b", code_of(bind.expr)) is not None


def read_after(flow: FunctionFlow, name: str, change: Event, roots: frozenset[str], taken: Bind | None = None) -> Use | None:
    """The first read of `name` that sees the change. With `taken` (the snapshot's binding), a
    read earlier in the loop body than the change is reached only on the next iteration, and
    when the snapshot is taken again at the top of every iteration before it, or in the arm
    of the read just before it, that read sees the new snapshot (ai-toolkit's `module_dict =
    lora_module.state_dict()` per LoRA module)."""
    rebound: list[Bind] = []
    retaken = taken is not None and taken_every_iteration(flow, taken)
    for event in flow.after(change):
        if taken is not None and isinstance(event, Use) and event.name == name and taken.index < event.index < change.index and (retaken or _leads_to(taken, event, change)):
            continue
        if isinstance(event, Bind) and event.name == name and event.index > change.index and not event.exclusive_with(change):
            rebound.append(event)
        if isinstance(event, Use) and event.name == name and any(on_every_path(b, change, event) for b in rebound):
            continue  # `sd = other` on every path from the change to the read: it reads the new binding
        if isinstance(event, Use) and event.name == name and (event.index > change.index or set(event.loops) & set(change.loops)) and not event.exclusive_with(change):
            return event  # (a read in the other arm of an `if` around the change never sees it)
    return None


def _leads_to(taken: Bind, read: Use, change: Event) -> bool:
    """The snapshot is taken before the read in the same loop body and in the arm the read is in
    (`else: model_dict = model.state_dict(); model_dict.update(...)`), the read perhaps in a loop
    of its own there that the change is not in (`for k, v in ckpt.items(): if k in model_dict`):
    a read reached again on the next iteration passes the new snapshot first."""
    depth = len(taken.loops)
    inner = set(read.loops[depth:])
    return read.loops[:depth] == taken.loops and not inner & set(change.loops) and set(taken.arms) <= set(read.arms)


def written_through_entries(flow: FunctionFlow, name: str, change: Event) -> bool:
    """`for k, v in target_dict.items(): v.mul_(1 - tau)` or `v = target_dict[k]; v.mul_(...)`:
    the tensor written was taken from the dict's own entries, so the dict is the handle the
    update goes through (a soft copy of parameters, a running average), not a snapshot meant
    to keep the old values."""
    if not isinstance(change, Write):
        return False
    target = change.target_node
    while isinstance(target, cst.Call) and isinstance(target.func, cst.Attribute) and api.is_inplace_method(target.func.attr.value):
        target = target.func.value  # `v.mul_(a).add_(b)`: the chain writes into `v`
    writer = name_of(target).split(".")[0]
    if not writer:
        return False
    # `target = merged["model"][key]; target.mul_(...)`: an entry taken out of the dict itself.
    bind = last_bind(flow, writer, change.index)
    entry = bind.expr if bind is not None else None
    while isinstance(entry, cst.Subscript):
        entry = entry.value
    if entry is not None and bind is not None and isinstance(bind.expr, cst.Subscript) and name_of(entry) == name:
        return True
    for loop_id in change.loops:
        loop = flow.loops.get(loop_id)
        if loop is None or not isinstance(loop.node, cst.For) or writer not in names_in(loop.node.target):
            continue
        if any(_entries_of(name, iterable) for iterable in _iterated_with(loop.node.target, loop.node.iter, writer)):
            return True
    return False


def _entries_of(name: str, iterable: cst.BaseExpression) -> bool:
    return re.fullmatch(rf"{re.escape(name)}\.(items|values)\(\)", code_of(iterable)) is not None


def _iterated_with(target: cst.BaseExpression, iterable: cst.BaseExpression, writer: str) -> list[cst.BaseExpression]:
    """What the loop name `writer` is taken from: the iterable itself, or the part of a `zip`
    (`for param, gradient in zip(sd.values(), grads)`) or `enumerate` that binds it."""
    if isinstance(iterable, cst.Call) and isinstance(target, (cst.Tuple, cst.List)) and not any(a.star for a in iterable.args):
        func = code_of(iterable.func)
        parts = [e.value for e in target.elements]
        if func == "zip" and len(parts) == len(iterable.args):
            return [found for part, arg in zip(parts, iterable.args) if writer in names_in(part) for found in _iterated_with(part, arg.value, writer)]
        if func == "enumerate" and len(parts) == 2 and iterable.args and writer in names_in(parts[1]):
            return _iterated_with(parts[1], iterable.args[0].value, writer)
    return [iterable]


def entry_replaced(flow: FunctionFlow, name: str, change: Event, read: Use) -> bool:
    """`weight = sd["weight"].to(torch.float); weight += delta; sd["weight"] = weight.to(dtype)`:
    the entry the change went through is set anew before the read, which then sees the new
    tensor, as meant (a merge written back), not a stale snapshot."""
    key = _entry_key(flow, name, change)
    return key is not None and any(
        isinstance(e, Store) and e.how == "setitem" and e.container == name and e.index > change.index and e.line <= read.line and _string_key(e.node) == key
        for e in flow.events
    )


def _entry_key(flow: FunctionFlow, name: str, change: Event) -> str | None:
    """The key of `name`'s entry that the changed tensor was taken from, following the
    writer back through names and conversions that may return their receiver."""
    if not isinstance(change, Write):
        return None
    expr: cst.BaseExpression | None = change.target_node
    index = change.index
    for _ in range(6):
        while isinstance(expr, cst.Subscript) and name_of(expr.value) != name:
            expr = expr.value  # `weight[start:end]`: the tensor is `weight`'s
        if isinstance(expr, cst.Subscript):
            return _string_key(expr)
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in api.MAYBE_SELF_METHODS | api.MAYBE_VIEW_METHODS:
            expr = expr.func.value
            continue
        if not isinstance(expr, cst.Name):
            return None
        bind = last_bind(flow, expr.value, index, reaching=change)
        if bind is None or bind.expr is None:
            return None
        expr, index = bind.expr, bind.index
    return None


def _string_key(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        key = node.slice[0].slice.value
        if isinstance(key, cst.SimpleString):
            value = key.evaluated_value
            return value if isinstance(value, str) else None
    return None


def copy_module(flow: FunctionFlow) -> str | None:
    """How to spell copy.deepcopy here: 'copy.deepcopy', 'deepcopy', or None (needs an import)."""
    imports = flow.file.imports
    if imports.module_alias("copy"):
        return f"{imports.module_alias('copy')}.deepcopy"
    for name, quals in imports.module_level.items():
        if "copy.deepcopy" in quals:
            return name
    return None


def owner_of(expr: cst.BaseExpression) -> str:
    """`model` in `model.state_dict()` / `model.state_dict().copy()`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in ("state_dict", "parameters", "named_parameters", "buffers"):
            return name_of(expr.func.value)
        expr = expr.func.value
    if isinstance(expr, cst.Call) and expr.args:
        return owner_of(expr.args[0].value)
    return ""


# Methods of a dict that change what it holds.
_DICT_EDITS = ("pop", "update", "setdefault", "popitem")


def written_through_elsewhere(flow: FunctionFlow, attr: str) -> bool:
    """A method of the class writes in place into the tensors kept in `attr`
    (`for k, p in self.avg.items(): p.data.copy_(...)`, `self.avg[k].mul_(...)`), or edits
    the dict itself (`self.attr[k] = q`, `self.attr.pop(k)`): a working dict the object
    builds on, not a snapshot."""
    scope = flow.scope
    if scope is None or scope.class_node is None:
        return False
    found = False

    def written(receiver: cst.BaseExpression, names: set[str]) -> bool:
        while isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
            receiver = receiver.value
        if isinstance(receiver, cst.Name):
            return receiver.value in names
        return isinstance(receiver, cst.Subscript) and dotted(receiver.value) == attr

    class Find(cst.CSTVisitor):
        def __init__(self) -> None:
            self.names: list[set[str]] = [set()]

        def visit_For(self, node: cst.For) -> None:
            source = node.iter.func.value if isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Attribute) else node.iter
            kept = dotted(source) == attr
            self.names.append(self.names[-1] | (names_in(node.target) if kept else set()))

        def leave_For(self, original_node: cst.For) -> None:
            self.names.pop()

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and api.is_inplace_method(func.attr.value) and written(func.value, self.names[-1]):
                found = True
            if isinstance(func, cst.Attribute) and func.attr.value in _DICT_EDITS and dotted(func.value) == attr:
                found = True

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal found
            target = node.target
            if isinstance(target, cst.Subscript) and dotted(target.value) == attr:
                found = True

    scope.class_node.visit(Find())
    return found


def handed_to_a_fresh_owner(flow: FunctionFlow, bind: Bind) -> bool:
    """Every read of the attribute in the class loads it into the object it was taken from,
    after that method has built the object anew (`self.opt = Adam(...)`, then
    `self.opt.load_state_dict(self.opt_state)`), or tests it against None: the object whose
    tensors it references is dropped before anything reads them, so nothing changes them
    under it (Fish's inner optimizer carried from one `update` to the next)."""
    scope = flow.scope
    owner = owner_of(bind.expr) if bind.expr is not None else ""
    if scope is None or scope.class_node is None or not owner.startswith("self."):
        return False
    attr, line_of = bind.name, flow.file.line_of
    loads = 0

    class Method(cst.CSTVisitor):
        def __init__(self) -> None:
            self.built: list[int] = []
            self.loads: list[int] = []
            self.reads = 0
            self.allowed = 0

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if dotted(node.target) == owner:
                self.built.append(line_of(node))
            if dotted(node.target) == attr:
                self.allowed += 1  # a store, not a read

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if dotted(node) == attr:
                self.reads += 1

        def visit_Comparison(self, node: cst.Comparison) -> None:
            if dotted(node.left) == attr and all(isinstance(c.comparator, cst.Name) and c.comparator.value == "None" for c in node.comparisons):
                self.allowed += 1

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict" and dotted(func.value) == owner and len(node.args) == 1 and dotted(node.args[0].value) == attr:
                self.loads.append(line_of(node))

    for stmt in scope.class_node.body.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        method = Method()
        stmt.visit(method)
        if method.reads != method.allowed + len(method.loads) or any(not any(b < line for b in method.built) for line in method.loads):
            return False
        loads += len(method.loads)
    return loads > 0


def state_dict_refs(value: Value) -> bool:
    """A state_dict, a shallow copy of one, or a dict of its tensors that may be the same tensors."""
    if value.kind is Kind.STATE_DICT:
        return value.via in ("state_dict", "shallow-copy")
    element = value.element
    return value.kind is Kind.DICT and element is not None and element.kind is Kind.TENSOR and element.via == "state_dict" and element.certain


def beside_a_written_handle(flow: FunctionFlow, bind: Bind) -> bool:
    """The same method keeps another `state_dict()` on the object, and a method writes
    through that one (`self.target_dict[k].data.copy_(...)`): the class keeps state_dicts as
    live handles, and this one is read for its current values (BigGAN's `ema`, whose
    `update` mixes `source_dict` into `target_dict`)."""
    others = sorted({b.name for b in flow.of(Bind) if b.name.startswith("self.") and b.name != bind.name and state_dict_refs(b.value)})
    return any(written_through_elsewhere(flow, name) for name in others)


def replaced_on_first_pass(flow: FunctionFlow, name: str, read: Use) -> bool:
    """MOON's FedAvg: `for i, net in enumerate(nets): if i == 0: for k in sd: w[k] = sd[k] * f`
    `else: for k in sd: w[k] += sd[k] * f`. The first pass sets every entry of `w` anew, so the
    read in the other arm sees the running sums, never the tensors the snapshot referenced."""
    for number in read.loops:
        node = flow.loops[number].node
        if not (isinstance(node, cst.For) and isinstance(node.iter, cst.Call) and dotted(node.iter.func) == "enumerate"):
            continue
        if not (isinstance(node.target, cst.Tuple) and isinstance(node.target.elements[0].value, cst.Name)):
            continue
        counter = node.target.elements[0].value.value
        for stmt in node.body.body:
            if isinstance(stmt, cst.If) and stmt.orelse is not None and _is_first(stmt.test, counter) and _sets_every_entry(stmt.body, name):
                start, end = flow.file.span(stmt.orelse)
                first, last = flow.file.span(stmt.body)
                setting = any(isinstance(e, Store) and e.how == "setitem" and e.container == name and e.line == read.line for e in flow.events)
                if start <= read.line <= end or (first <= read.line <= last and setting):
                    return True
    return False


def _is_first(test: cst.BaseExpression, counter: str) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
        and name_of(test.left) == counter
        and isinstance(test.comparisons[0].comparator, cst.Integer)
        and test.comparisons[0].comparator.value == "0"
    )


def _sets_every_entry(body: cst.BaseSuite, name: str) -> bool:
    """`for k in keys: name[k] = ...` directly in the block."""
    for stmt in getattr(body, "body", ()):
        if not (isinstance(stmt, cst.For) and isinstance(stmt.target, cst.Name)):
            continue
        key = stmt.target.value
        for inner in getattr(stmt.body, "body", ()):
            for small in getattr(inner, "body", ()) if isinstance(inner, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Subscript) and name_of(t.target.value) == name and len(t.target.slice) == 1 and code_of(t.target.slice[0].slice) == key
                    for t in small.targets
                ):
                    return True
    return False


def _clone_items(source: cst.BaseExpression) -> cst.DictComp:
    """`{k: v.detach().clone() for k, v in source.items()}`: a copy that needs no import."""
    k, v = cst.Name("k"), cst.Name("v")
    return cst.DictComp(
        key=k,
        value=chain(v, "detach", "clone"),
        for_in=cst.CompFor(target=cst.Tuple([cst.Element(k), cst.Element(v)], lpar=[], rpar=[]), iter=method(atom(source), "items")),
    )


def deepcopy_fix(flow: FunctionFlow, expr: cst.BaseExpression) -> tuple[cst.CSTNode, cst.CSTNode]:
    inner = expr
    # d.copy() and dict(d) are shallow: deep-copy the original instead.
    if call_method_name(expr) == "copy" and isinstance(expr, cst.Call) and not expr.args:
        inner = receiver_of(expr)
    elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict" and len(expr.args) == 1:
        inner = expr.args[0].value
    spelled = copy_module(flow)
    if spelled is None:
        # Without `import copy` a deepcopy suggestion would not run: copy the tensors instead.
        return expr, _clone_items(inner)
    return expr, cst.Call(func=dotted_expr(spelled), args=[cst.Arg(inner)])


def remedy(flow: FunctionFlow) -> str:
    if copy_module(flow):
        return "Use `copy.deepcopy(...)`"
    return "Copy the tensors (`{k: v.detach().clone() for k, v in ....items()}`, or `copy.deepcopy(...)` after `import copy`)"


def never_read_again(flow: FunctionFlow, attr: str) -> bool:
    """`self.source_dict = source.state_dict()` in an EMA whose `update` walks the modules'
    parameters instead: no code in the repository reads the attribute, so no one can see
    its values change (StudioGAN's `Ema`)."""
    name = attr.removeprefix("self.")
    return flow.index is not None and name.isidentifier() and never_read(flow.index, name)


def written_name(node: cst.BaseExpression) -> str:
    """The name a write goes through under its items, `.data` and the in-place calls chained
    before it: `states` of `states[k].data`, of `av[k].mul_(g)` (receiver of `.add_(...)`)."""
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and api.is_inplace_method(node.func.attr.value):
            node = node.func.value
        elif isinstance(node, (cst.Subscript, cst.Attribute)) and not (isinstance(node, cst.Attribute) and node.attr.value != "data"):
            node = node.value
        else:
            return dotted(node)


def an_iterator(flow: FunctionFlow, owner: str) -> bool:
    """`next(owner)` somewhere in the function: the owner is an iterator (a data pipeline
    whose state is its position), which no module or optimizer is."""
    return any(
        isinstance(e.call.func, cst.Name) and e.call.func.value == "next" and bool(e.call.args) and name_of(e.call.args[0].value) == owner
        for e in flow.of(Call)
    )


def _later_copies(flow: FunctionFlow, bind: Bind) -> Iterator[Bind]:
    """Later bindings of the snapshot's name to something that holds no live references
    (its items cloned)."""
    return (e for e in flow.of(Bind) if e.name == bind.name and e.index > bind.index and e.expr is not None and not state_dict_refs(e.value))


def rebound_to_copies(flow: FunctionFlow, bind: Bind, read: Use) -> bool:
    """On every path from the snapshot to the read, the name is bound again to such a copy
    (VGen's `ema = type(ema)([(k, ema[k].data.clone()) ...])` on the next line): what is read
    is the copy, whatever training does in between."""
    return any(e.index < read.index and on_every_path(e, bind, read) for e in _later_copies(flow, bind))


def replaced_in_this_call(flow: FunctionFlow, bind: Bind) -> bool:
    """Later in the same call, on every path on from the bind, the attribute is set again to
    such a copy: the references never outlive the call."""
    return any(bind.arms[: len(e.arms)] == e.arms for e in _later_copies(flow, bind))
