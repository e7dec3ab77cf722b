"""What the graph-retention rules share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

import libcst as cst

from review_copies.analysis.events import Accumulate, Backward, Bind, Call, FunctionFlow, Loop, Store, Use
from review_copies.analysis.queries.aliasing import last_bind, name_of
from review_copies.analysis.queries.loops import trains_inside
from review_copies.analysis.rewrite import atom, chain
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of, dotted, keyword_is, names_in, variables_in
from review_copies.analysis.values import Kind, Tri


def detached(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x.detach()`; `list(x.detach())` for `list(x)` and `[x.detach()]` for `[x]` (a list has
    no `detach`)."""
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements and not any(isinstance(e, cst.StarredElement) for e in expr.elements):
        return expr.with_changes(elements=[e.with_changes(value=chain(atom(e.value), "detach")) for e in expr.elements])
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") and len(expr.args) == 1 and not expr.args[0].star:
        return expr.with_changes(args=[expr.args[0].with_changes(value=chain(atom(expr.args[0].value), "detach"))])
    return chain(atom(expr), "detach")


def backward_on(flow: FunctionFlow, name: str) -> Iterator[Backward]:
    """The backward passes through `name` in the function: `name.backward()`,
    `(name / n).backward()`, `torch.autograd.grad(name, params)`."""
    for event in flow.of(Backward):
        if event.outputs is not None and (name_of(event.outputs) == name or name in names_in(event.outputs, attributes=True)):
            yield event


def backward_on_built(
    flow: FunctionFlow, name: str, binds: Iterable[Bind], reads: Callable[[cst.CSTNode], frozenset[str]] = variables_in
) -> list[Backward]:
    """The backward passes, in order, through `name` or a name one of `binds` builds from it
    (`loss = criterion(output, y); loss.backward()`); `reads` says which names a binding's
    expression reads."""
    derived = [name]
    for bind in binds:
        if bind.expr is not None and bind.name not in derived and reads(bind.expr) & set(derived):
            derived.append(bind.name)
    return sorted((b for n in derived for b in backward_on(flow, n)), key=lambda b: b.index)


def combined_after(flow: FunctionFlow, name: str, loop: Loop) -> bool:
    """`for k in range(self.n_steps): pieces.append(step(k))` (or `states = torch.cat([states,
    s])`), then the name read after the loop: a loop taken for training steps by its bound's
    name alone (nothing in it backpropagates or steps an optimizer), whose list or sum is
    this call's material (an RNN cell's states, its result), not a log."""
    node = loop.node
    if not isinstance(node, cst.For):
        return False
    counted = isinstance(node.iter, cst.Call) and isinstance(node.iter.func, cst.Name) and node.iter.func.value == "range"
    if not (counted or _chunks(flow, node.iter, loop)) or trains_inside(flow, loop):
        return False
    return any(isinstance(e, Use) and e.name == name and e.line > loop.end for e in flow.events)


_SPLITTING = frozenset(("split", "chunk", "tensor_split", "unbind"))


def _chunks(flow: FunctionFlow, expr: cst.BaseExpression, loop: Loop) -> bool:
    """`for batch in batches:` over pieces of a tensor this call holds (`batches = [embedded]`,
    `get_minibatches(embedded, chunk)`, `embedded.split(chunk)`): one forward, chunked to fit
    in memory, whose outputs the call puts back together; not a loader's batches, which the
    loop takes for steps. Each binding of the name before the loop must be such."""
    if isinstance(expr, cst.Name):
        binds = [e for e in flow.of(Bind) if e.name == expr.value and e.line < loop.start]
        return bool(binds) and all(b.expr is not None and _chunks(flow, b.expr, loop) for b in binds)

    def tensor(node: cst.BaseExpression) -> bool:
        return flow.value(node).kind is Kind.TENSOR

    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(tensor(e.value) for e in expr.elements)
    if not isinstance(expr, cst.Call) or re.search(r"(?i)loader|dataset|sampler", dotted(expr.func) or ""):
        return False
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SPLITTING:
        return tensor(expr.func.value) or dotted(expr.func.value) == "torch"
    return any(tensor(arg.value) for arg in expr.args if arg.keyword is None)


def cut_each_pass(flow: FunctionFlow, acc: Accumulate) -> bool:
    """In the same pass of its loop, on every path through the update, the name is also set to
    a value that holds no graph: later (`images = images.detach().requires_grad_(True)` in an
    attack's step, a leaf) or at the top of the pass, before the update (`n = n.data.requires_grad_()`
    in a universal perturbation's step): either way the sum's graph does not reach the next pass."""
    if not acc.loops:
        return False
    end = flow.loops[acc.loops[-1]].end if acc.loops[-1] in flow.loops else acc.line
    return any(
        isinstance(e, Bind)
        and e.name == acc.name
        and e.index != acc.index
        and e.line <= end
        and e.loops == acc.loops
        and acc.arms[: len(e.arms)] == e.arms
        and (e.value.grad is Tri.NO or e.value.leaf)
        for e in flow.events
    )


def differentiated(flow: FunctionFlow, acc: Accumulate) -> bool:
    """A backward pass runs through the sum (`total.backward()`, `torch.autograd.grad(total /
    n, params)`): an in-graph sum built to be differentiated. One after the name was started
    afresh (`total = 0.0`) differentiates another sum, not this one."""
    # `potential = nll + prior; potential.backward()`: what is differentiated may be built
    # from the sum after it is done.
    for backward in backward_on_built(flow, acc.name, (b for b in flow.of(Bind) if b.index > acc.index)):
        if backward.index < acc.index:
            return True  # in a loop: last pass's backward, or the sum's own
        restarted = any(
            isinstance(e, Bind) and e.name == acc.name and acc.index < e.index < backward.index and (e.expr is None or acc.name not in names_in(e.expr, attributes=True))
            for e in flow.events
        )
        if not restarted:
            return True
    return False


def trimmed(flow: FunctionFlow, container: str) -> bool:
    """RoboFlamingo's action head appends each step's feature to `self.history_memory` and
    pops the oldest once it holds more than `history_len`: `container.pop(...)`, `del
    container[...]` or `container = container[-n:]` in the same method keeps a bounded
    window, not a list that grows with every call."""
    scope = flow.scope
    if scope is None:
        return False
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("pop", "popleft") and dotted(func.value) == container:
                found = True

        def visit_Del(self, node: cst.Del) -> None:
            nonlocal found
            targets = [e.target for e in node.target.elements] if isinstance(node.target, cst.Tuple) else [node.target]
            found = found or any(isinstance(t, cst.Subscript) and dotted(t.value) == container for t in targets)

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            value = node.value
            if isinstance(value, cst.Subscript) and dotted(value.value) == container and any(dotted(t.target) == container for t in node.targets):
                found = True

    scope.node.visit(_Find())
    return found


def same_key_each_pass(flow: FunctionFlow, store: Store, loop: Loop) -> bool:
    """`inputs["radius"] = r.clone()` in every pass: the entry is replaced, not added, so the
    dict holds the last step's tensor only (a key made from what the loop binds, `log[step]`,
    adds one entry per step)."""
    node = store.node
    if store.how != "setitem" or not isinstance(node, cst.Subscript) or len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return False
    key = node.slice[0].slice.value
    if not isinstance(key, (cst.SimpleString, cst.Integer, cst.Name, cst.Attribute)):
        return False  # `log[len(log)]`, `log[f"{step}"]`: it may name a new entry each time
    used = names_in(key)
    bound_in_loop = {e.name for e in flow.of(Bind) if loop.start <= e.line <= loop.end}
    if isinstance(loop.node, cst.For):
        bound_in_loop |= names_in(loop.node.target)
    return not used & bound_in_loop


# numpy functions that turn a list of tensors into one array, each element through `.numpy()`.
_ARRAY_OF_LIST = ("numpy.array", "numpy.asarray", "numpy.stack", "numpy.concatenate", "numpy.vstack", "numpy.hstack")


def made_into_array(flow: FunctionFlow, container: str, store: Store) -> bool:
    """Is the list handed whole to `np.array(...)` (or a stacking kin) after the store? A
    tensor that requires grad in it would make that call raise, so, the code running as
    written, the stored values hold no graph (the callable that made them returns arrays)."""
    for event in flow.of(Call):
        if event.index <= store.index or not event.is_any(_ARRAY_OF_LIST) or not isinstance(event.node, cst.Call) or not event.node.args:
            continue
        first = event.node.args[0].value
        if isinstance(first, cst.Name) and first.value == container:
            return True
    return False


def emptied_by_another_method(flow: FunctionFlow, container: str) -> bool:
    """learn-with-noisy-labels' pruned VGG: `forward` appends each layer's input and output to
    `self.fores` and `self.feats`, and the class's `reset()` sets both to `[]` again. A class
    that offers a method to empty the list (other than `__init__`: `self.x = []`,
    `self.x.clear()`, `del self.x[:]`) leaves it to its caller how long the stored tensors
    live: the list grows only if that method is never called."""
    scope = flow.scope
    if scope is None or scope.class_node is None or not container.startswith("self."):
        return False
    found = False

    class _Find(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            value = node.value
            empty = isinstance(value, (cst.List, cst.Dict)) and not value.elements
            found = found or (empty and any(dotted(t.target) == container for t in node.targets))

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            found = found or (isinstance(func, cst.Attribute) and func.attr.value == "clear" and not node.args and dotted(func.value) == container)

        def visit_Del(self, node: cst.Del) -> None:
            nonlocal found
            target = node.target
            found = found or (isinstance(target, cst.Subscript) and dotted(target.value) == container)

    for statement in scope.class_node.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value not in ("__init__", scope.name) and statement is not scope.node:
            statement.visit(_Find())
    return found


# Conversions that return their receiver when nothing changes (`contiguous` too): applied to a
# name's own value again and again, they convert it once.
_IDEMPOTENT_CONVERSIONS = api.MAYBE_SELF_METHODS | {"contiguous"}


def converted_in_place_of_itself(acc: Accumulate) -> bool:
    """vlmaps' LSeg: `self.logit_scale = self.logit_scale.to(x.device)` on every call. After the
    first call the conversion returns the tensor itself: no node is added, nothing piles up."""
    node = acc.value_node
    seen = False
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _IDEMPOTENT_CONVERSIONS:
        node, seen = node.func.value, True
    return seen and dotted(node) == acc.name


def carries_only_detached(acc: Accumulate) -> bool:
    """HAWQ's folded batch norm: `self.bn.running_mean = self.bn.running_mean.detach() * m + (1
    - m) * batch_mean`. The value before enters only through `.detach()` (or `.data`,
    `.item()`): no graph is carried from one call to the next, each call's replaces the last."""
    found = _OldValue(acc.name)
    acc.value_node.visit(found)
    return found.cut > 0 and found.raw == 0


class _OldValue(cst.CSTVisitor):
    """Counts where an expression reads `name`: cut off from its graph, or as it is."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cut = 0
        self.raw = 0

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("detach", "item") and dotted(func.value) == self.name:
            self.cut += 1
            return False
        return True

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value == "data" and dotted(node.value) == self.name:
            self.cut += 1
            return False
        return self._read(node)

    def visit_Name(self, node: cst.Name) -> bool:
        return self._read(node)

    def _read(self, node: cst.BaseExpression) -> bool:
        if dotted(node) == self.name:
            self.raw += 1
            return False
        return True


def restarted_on_request(flow: FunctionFlow, acc: Accumulate) -> bool:
    """Before the sum, the method starts it afresh when its caller asks, under a test of a
    parameter (`if t == 0: self.init_attention(keys)`, whose body sets `self.cumulative =
    torch.zeros(...)`, or `if reset: self.total = 0`): the sum spans the calls of one
    sequence the caller drives, as a recurrent state does, and the graph it holds is that
    sequence's. A start guarded by the sum itself (`if self.h is None:`) runs once and does
    not count."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    params = {p.name.value for p in scope.node.params.params} - {"self"}
    starters = _starting_methods(scope.class_node, acc.name)
    found = False

    class _Find(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> bool:
            nonlocal found
            test = names_in(node.test, attributes=True)
            line = flow.file.line_of(node)
            if line < acc.line and acc.name not in test and test & params and any(_starts(stmt, acc.name, starters) for stmt in node.body.body):
                found = True
            return True

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope.node

    scope.node.visit(_Find())
    return found


def _starts(stmt: cst.CSTNode, name: str, starters: frozenset[str]) -> bool:
    """`self.total = <something without self.total>` or `self.<starter>(...)`, as a line of
    its own (or a one-line arm's)."""
    if isinstance(stmt, cst.SimpleStatementLine):
        return any(_starts(small, name, starters) for small in stmt.body)
    if isinstance(stmt, cst.Assign):
        return any(dotted(t.target) == name for t in stmt.targets) and name not in names_in(stmt.value, attributes=True)
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call) and isinstance(stmt.value.func, cst.Attribute):
        func = stmt.value.func
        return isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value in starters
    return False


def _starting_methods(cls: cst.ClassDef | None, name: str) -> frozenset[str]:
    """Methods of the class whose own body sets the attribute afresh (`self.cumulative =
    torch.zeros(...)`), at its top level: calling one starts the sum again."""
    if cls is None or not name.startswith("self."):
        return frozenset()
    found = set()
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and any(_starts(s, name, frozenset()) for s in stmt.body.body):
            found.add(stmt.name.value)
    return frozenset(found)


def managed_by_the_caller(flow: FunctionFlow, acc: Accumulate) -> bool:
    """The class hands the attribute's lifetime to its caller, as recurrent models do with
    their hidden state: another method cuts it (`def detach_hidden(self): self.state =
    self.state.detach()`) or sets it to what the caller passes (`def set_state(self, state):
    self.state = state`). The graph the state holds is then the window the caller runs
    between those calls (truncated backpropagation through time), not one that grows. A
    method that only zeroes it (`def reset(self): self.total = 0`) does not count: a running
    total has one too, and nothing says the caller cuts the graph."""
    scope = flow.scope
    if scope is None or scope.class_node is None or not acc.name.startswith("self."):
        return False
    for stmt in scope.class_node.body.body:
        if not isinstance(stmt, cst.FunctionDef) or stmt is scope.node or stmt.name.value == "__init__":
            continue
        params = {p.name.value for p in stmt.params.params} - {"self"}
        for line in stmt.body.body:
            if isinstance(line, cst.SimpleStatementLine) and any(_hands_over(small, acc.name, params) for small in line.body):
                return True
    return False


def _hands_over(stmt: cst.BaseSmallStatement, name: str, params: set[str]) -> bool:
    """`self.state = state` (a parameter), `self.state = self.state.detach()` or
    `self.state.detach_()`."""
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
        func = stmt.value.func
        return isinstance(func, cst.Attribute) and func.attr.value == "detach_" and dotted(func.value) == name
    if not isinstance(stmt, cst.Assign) or not any(dotted(t.target) == name for t in stmt.targets):
        return False
    value = stmt.value
    if isinstance(value, cst.Name):
        return value.value in params
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "detach"
        and dotted(value.func.value) == name
    )


def backward_after(flow: FunctionFlow, loop: Loop, container: str) -> bool:
    """A backward after the loop, which may run through what the list kept (`sum(losses)`
    went into `total`, and `total.backward()`); `torch.autograd.grad(...)` of outputs that do
    not name the list differentiates something else (a query loss after a support loop)."""
    derived = {container}
    for bind in flow.of(Bind):
        if bind.line > loop.end and bind.expr is not None and names_in(bind.expr, attributes=True) & derived:
            derived.add(bind.name)  # `lls = torch.cat(lls).unbind()`: the same graphs, under the name differentiated
    for event in flow.of(Backward):
        if event.line <= loop.end:
            continue
        if not event.function or (event.outputs is not None and names_in(event.outputs, attributes=True) & derived):
            return True
        if event.outputs is not None and _over(event, derived):
            return True
    return False


def _over(event: Backward, derived: set[str]) -> bool:
    """`[autograd.grad(l, ...) for l in lls]` (or a `for` loop): what is differentiated is
    each item of the kept list in turn."""
    targets: set[str] = set()

    class Comprehensions(cst.CSTVisitor):
        def visit_CompFor(self, node: cst.CompFor) -> None:
            if names_in(node.iter, attributes=True) & derived:
                targets.update(names_in(node.target))

    if event.stmt is not None:
        event.stmt.visit(Comprehensions())
    return bool(names_in(event.outputs) & targets) if event.outputs is not None else False


def under_tensor_methods(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """`log_p.to(w.dtype).cpu()` gives `log_p`: the expression under the tensor-method calls
    a graph passes through (`.cpu()`, `.float()`, `.to(...)`)."""
    methods = api.tensor_methods()
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in methods:
        expr = expr.func.value
    return expr


def stored_expression(flow: FunctionFlow, store: Store) -> cst.BaseExpression | None:
    """What is stored, seen through a name to the expression last bound to it."""
    node = store.value_node
    if isinstance(node, cst.Name):
        bind = last_bind(flow, node.value, store.index, reaching=store)
        return bind.expr if bind is not None else None
    return node


def carried_into_next_pass(flow: FunctionFlow, store: Store, loop: Loop) -> bool:
    """`pred = model(x); preds.append(pred); x = torch.cat([x[:, 1:], pred], 1)`: the stored
    name also feeds a name the loop carries into its next pass (bound before the loop, read
    in it before the store, bound again from the stored name), so every later output's graph
    holds this one already; keeping it in the list adds nothing. (A running `total = total +
    loss` is read only where it is rebound: it feeds no step, and stays RC251's.)"""
    if not isinstance(store.value_node, cst.Name):
        return False
    stored = store.value_node.value
    before = {e.name for e in flow.of(Bind) if e.line < loop.start}
    feeding = {e.name for e in flow.of(Use) if e.name in before and loop.start <= e.line < store.line}
    if any(
        isinstance(e, Bind) and e.name in feeding and e.name != stored and store.line < e.line <= loop.end and e.expr is not None and stored in names_in(e.expr)
        for e in flow.events
    ):
        return True
    # Meta-learning's inner loop: `grads = torch.autograd.grad(loss, w, create_graph=True)`,
    # then `w = [p - lr * g ...]` feeds the next pass: the fast weights hold the loss's graph.
    made = max((e.line for e in flow.of(Bind) if e.name == stored and loop.start <= e.line <= store.line), default=loop.start)
    derived = {stored}
    for e in flow.of(Bind):
        if made < e.line <= loop.end and e.expr is not None and names_in(e.expr) & derived and keeps_graph(e.expr):
            derived.add(e.name)
    return bool((derived - {stored}) & feeding)


def keeps_graph(expr: cst.BaseExpression) -> bool:
    """A value computed this way holds its inputs' graph: not `.detach()`/`.item()`, and a
    `torch.autograd.grad` only with `create_graph=True`."""
    if isinstance(expr, cst.Call) and dotted(expr.func).endswith("autograd.grad"):
        return keyword_is(expr, "create_graph", "True")
    text = code_of(expr)
    return ".detach()" not in text and ".item()" not in text


def rebound_this_call(flow: FunctionFlow, acc: Accumulate) -> bool:
    """The name is set afresh earlier in this same call (or, in a loop, this same pass), on
    every path to the update (in the update's own arm or one around it: `self.model =
    build(); if cuda: self.model = self.model.cuda()`), so what the update reads is this
    call's value, not the last call's. Updates of its own between the two, on every path
    too, change this pass's value (`delta = x - x0; delta = delta + step; delta = delta /
    norm`, a PGD step's projection)."""
    before = acc.index
    while (bind := last_bind(flow, acc.name, before)) is not None and bind.expr is not None:
        if acc.arms[: len(bind.arms)] != bind.arms or bind.loops != acc.loops:
            return False
        # `grad1 = param.grad1 ** 2` reads the attribute `grad1` of `param`, not the name.
        read = variables_in(bind.expr) | {n for n in names_in(bind.expr, attributes=True) if "." in n}
        if acc.name not in read or bind.value.grad is Tri.NO:
            return not any(isinstance(e, Accumulate) and e.name == acc.name and e.index < bind.index and e.line == bind.line for e in flow.events)
        before = bind.index  # `self.h = self.h.unsqueeze(0)`: it carries on whatever came before it
    return False
