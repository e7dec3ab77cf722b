"""The callers of a function in its own file: what each call passes for a parameter, and
whether the caller goes on reading what it passed. Call sites and later reads are computed
once per file (`ParsedFile.once`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import FunctionFlow, Return, Write
from review_copies.analysis.parse import ParsedFile, Scope
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.queries.later import assigned_names, number_constants, read_later
from review_copies.analysis.semantics import api
from review_copies.analysis.signature import signature_of
from review_copies.analysis.syntax import built_on_optimizer, call_method_name, code_of, dotted, is_name, name_nodes, names_in


def returns_argument(flow: FunctionFlow, arg: str) -> bool:
    """`x.add_(1); return x` or `return x.copy_(y)`: mutate-and-return, the caller rebinds what it gets back."""
    own = roots.argument(arg)
    for e in flow.of(Return):
        values = e.value.items if e.value.items is not None else (e.value,)
        # What is returned still holds the argument's memory (x, x.mul_(w), a view of x).
        # `return x.long()` after writing into x: the caller gets the changed tensor back either way;
        # so does `return torch.from_numpy(pc).float()` of `pc = x.numpy()` (a NumPy round trip).
        if any(own in v.roots and (v.via in ("to", "from_numpy") or (v.certain and not v.via)) for v in values):
            return True
        # `return acc` where one arm rebinds the name and the other grows it in place (`if req
        # is None: acc = a @ b` / `else: acc.addmm_(a, b)`): the written argument is handed
        # back on the path that wrote it (not from an arm the write is not on).
        node = e.value_node
        nodes = [el.value for el in node.elements] if isinstance(node, cst.Tuple) else [node]
        # `return x.view_as(x)` / `return x.reshape(n, -1)`: all of the argument's memory, reshaped.
        handed = any(((isinstance(n, cst.Name) and n.value == arg and not v.via) or _reshaped(n, arg)) and own in v.roots for n, v in zip(nodes, values))
        if handed and any(isinstance(w, Write) and own in w.target.roots and w.index < e.index and not w.exclusive_with(e) for w in flow.events):
            return True
    return False


def _reshaped(node: cst.BaseExpression, arg: str) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and is_name(node.func.value, arg) and node.func.attr.value in ("view", "view_as", "reshape", "flatten")


def position_of(scope: Scope, arg: str) -> int | None:
    """Where a call passes `arg` positionally: its index among the parameters, after `self`
    for a method (not a `@staticmethod`); None for a keyword-only parameter."""
    if not isinstance(scope.node, cst.FunctionDef):
        return None
    params = [p.name.value for p in scope.node.params.params]
    if (scope.takes_self or autograd_function_of(scope)) and params:
        params = params[1:]  # (`Function.apply(*args)` hands `forward(ctx, *args)` its context first)
    return params.index(arg) if arg in params else None


def autograd_function_of(scope: Scope) -> str | None:
    """The class's name when this is the `forward` of a `torch.autograd.Function` subclass,
    which callers run as `Class.apply(...)`, never by its name."""
    cls = scope.class_node
    if scope.name != "forward" or cls is None or not any(dotted(b.value).rpartition(".")[2] == "Function" for b in cls.bases):
        return None
    return cls.name.value


def passed(flow: FunctionFlow, arg: str) -> list[tuple[cst.Call, cst.BaseExpression | None]]:
    """Each call of this function in the file, with what it passes for `arg`."""
    return passed_in(flow.file, flow.scope, arg)


def passed_in(file: ParsedFile, scope: Scope | None, arg: str) -> list[tuple[cst.Call, cst.BaseExpression | None]]:
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return []
    position = position_of(scope, arg)
    out = []
    for call in own_call_sites(file, scope):
        value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == arg), None)
        if value is None and position is not None:
            given = [a for a in call.args if a.keyword is None and a.star != "**"]
            spread = next((i for i, a in enumerate(given) if a.star), None)
            if spread is not None and spread <= position:
                # After a `*tuple` the places are unknown: an argument from it on may fill
                # the parameter if it comes no later (each spread gives one item at least).
                value = cst.Tuple([cst.Element(a.value) for a in given[spread : position + 1]])
            else:
                value = given[position].value if position < len(given) else None
        out.append((call, value))
    return out


def callers_pass_sequences(flow: FunctionFlow, arg: str) -> bool:
    """Every call in the file passes for `arg` a parameter of its own function annotated as a
    list, tuple or sequence (`step(..., response_masks: Optional[List[torch.LongTensor]])`
    handing `response_masks` on): whatever this function's annotation says, it gets a Python
    sequence, and a write into an item of a slice of it changes a new list, not the caller's."""
    sites = [(call, value) for call, value in passed(flow, arg) if value is not None]  # the others leave it to its default
    if not sites:
        return False
    for call, value in sites:
        if not isinstance(value, cst.Name):
            return False
        scope = flow.file.innermost_scope(flow.file.line_of(call), ("function", "method"))
        if scope is None or not isinstance(scope.node, cst.FunctionDef):
            return False
        params = scope.node.params
        param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == value.value), None)
        if param is None or param.annotation is None or not _SEQUENCE_ANNOTATION.search(code_of(param.annotation.annotation)):
            return False
    return True


# `List[...]`, `list[...]`, `Sequence[...]`, `tuple[...]`, `Optional[List[...]]`: a Python sequence.
_SEQUENCE_ANNOTATION = re.compile(r"^(typing\.)?(Optional\[)?(List|list|Sequence|Tuple|tuple)\[")


def callers_rebind(flow: FunctionFlow, arg: str) -> bool:
    """Every call in the file passes a name (or a slice of one) for `arg` and rebinds that name
    to the result (`ll, obj = _mask_pads(ll, obj)`, `scores = _rescore(ovr, scores[1:])`), or
    stores the result where it took the argument from (`s[i], p[i] = f(s[i], p[i])`): the
    original is dropped, its mutation unseen."""
    sites = passed(flow, arg)
    assigned = assigned_names(flow.file)
    return bool(sites) and all(
        _passed_root(value) in assigned.get(call, set()) or (isinstance(value, cst.Subscript) and code_of(value) in assigned.get(call, set()))
        for call, value in sites
    )


def _passed_root(value: cst.BaseExpression | None) -> str | None:
    """The caller's local whose memory a passed expression reaches: `x`, `x[1:]`,
    `x.cpu().numpy()`; None for anything else (a new tensor, an attribute)."""
    while value is not None:
        if isinstance(value, cst.Name):
            return value.value
        if isinstance(value, cst.Subscript):
            value = value.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and _aliasing_call(value):
            # `torch.narrow(x, 0, 0, n)` is `x.narrow(0, 0, n)`: the memory is its first argument's.
            torch_function = dotted(value.func.value) == "torch"
            if torch_function and not value.args:
                return None
            value = value.args[0].value if torch_function else value.func.value
        else:
            return None
    return None


def fresh_at_every_call_site(flow: FunctionFlow, arg: str) -> bool:
    """Every call of this function in the file passes a new tensor for `arg` (`f(x * 2)`, `f(proj(x))`)."""
    sites = passed(flow, arg)
    return bool(sites) and all(isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) and not _aliasing_call(value) for _, value in sites)


def _aliasing_call(expr: cst.BaseExpression) -> bool:
    """`x.detach()`, `x.view(...)`, `x.to(d)`, `x.numpy()`: a call that may hand over the same memory."""
    name = call_method_name(expr) if isinstance(expr, cst.Call) else None
    return bool(name) and (name == "numpy" or api.is_view_op(name) or name in api.MAYBE_SELF_METHODS or name in api.VIEW_METHODS or name in api.MAYBE_VIEW_METHODS)


def caller_keeps_argument(flow: FunctionFlow, arg: str) -> bool:
    """A call in this file passes a name (or a part of one, `scores[1:]`) for `arg` and keeps
    the result under another name (`x = normalize(images)`, and `images` is used again): the
    caller treats the function as pure."""
    assigned, numbers = assigned_names(flow.file), number_constants(flow.file)
    later = read_later(flow.file)
    contexts = call_contexts(flow.file)
    for call, value in passed(flow, arg):
        root = _passed_root(value)
        site = contexts.get(call)
        # (An item a loop takes from a container, `for name, p in state_dict.items():`, is
        # still held by that container after the call; `BATCH_SIZE`, a number, is no tensor.)
        kept = root in later.get(call, ()) or (site is not None and root in site.loop_targets)
        if root is not None and root not in numbers and call in assigned and root not in assigned[call] and kept:
            return True
    return False


def callers_expect_the_write(flow: FunctionFlow, arg: str) -> bool:
    """Every call of this function in the file either wants `arg` changed or cannot see the
    change: it throws the result away (the function is called for what it does to its
    arguments), passes a name it then returns itself (the caller mutates and returns in
    turn), passes a new tensor (`f(x.clone())`), or passes a local it never reads again (a
    fresh temporary, `trace.cpu().numpy()` of one), or is made by an optimizer's method
    (`muon_update(p.grad, state["momentum_buffer"])`: updating those is the step's job). A write into the
    argument is then the function's job or invisible, not a change behind a caller's back."""
    sites = passed(flow, arg)
    if not sites:
        return False
    later = read_later(flow.file)
    contexts = call_contexts(flow.file)
    for call, value in sites:
        site = contexts.get(call)
        if site is None:
            return False
        if site.discarded or site.in_optimizer_step:
            continue
        if value is not None and site.copied_into is not None and code_of(value) == site.copied_into:
            continue  # `w.copy_(f(w))`: the caller writes the result into what it passed anyway
        if isinstance(value, (cst.Subscript, cst.Attribute)) and name_of(value).split(".")[0] in site.caller_returns:
            continue  # `f(sample["input"])` and then `return sample`: the caller hands back what holds the write
        if _unseen_by_caller(value, call, site, later) or _spread_locals_dropped(value, call, site, later):
            continue
        if not isinstance(value, cst.Name) and _passed_root(value) in site.caller_returns:
            continue  # `f(torch.narrow(x, 0, 0, n))` and then `return x`: the write lands in what the caller hands back
        if not isinstance(value, cst.Name):
            return False
        if value.value in site.caller_returns or value.value in site.own_copies:
            continue  # (a copy the caller made for itself, `y = y.clone()`: the write lands in it, as the caller meant)
        if value.value not in site.caller_params and value.value not in site.loop_targets and call in later and value.value not in later[call]:
            continue
        return False
    return True


def _spread_locals_dropped(value: cst.BaseExpression | None, call: cst.Call, site: CallContext, later: dict[cst.Call, frozenset[str]]) -> bool:
    """`f(*ref_stats, *hyp_stats, flag)`: what fills the parameter comes out of one of the
    spread tuples (`value` lists every argument that may), each a local of the caller's that
    it never reads again, as `ref_stats = pad(...)` is."""
    if not isinstance(value, cst.Tuple) or call not in later:
        return False
    names = [e.value for e in value.elements if not isinstance(e.value, cst.BaseNumber | cst.BaseString) and code_of(e.value) not in ("True", "False", "None")]
    return all(
        isinstance(n, cst.Name) and n.value not in site.caller_params and n.value not in later[call] and n.value not in site.caller_returns for n in names
    )


def _unseen_by_caller(value: cst.BaseExpression | None, call: cst.Call, site: CallContext, later: dict[cst.Call, frozenset[str]]) -> bool:
    """What this call passes cannot show the write to its caller: a new tensor
    (`f(x.clone())`), or memory reached only through a local the caller never reads again
    (`return f(trace.cpu().numpy())`)."""
    if isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) and not _aliasing_call(value):
        return True
    root = _passed_root(value)
    return isinstance(value, cst.Call) and root is not None and root not in site.caller_params and call in later and root not in later[call]


def called_only_under_no_grad(file: ParsedFile, scope: Scope) -> bool:
    """Every call of this function in the file runs with autograd off (inside
    `with torch.no_grad():` or from a `@torch.no_grad()` function): its body runs so too."""
    if not any(word in file.text for word in ("no_grad", "inference_mode", "set_grad_enabled")):
        return False  # the cheap prefilter: most files never turn autograd off
    sites = own_call_sites(file, scope)
    contexts = call_contexts(file)
    return bool(sites) and all(contexts[call].no_grad for call in sites)


def used_only_under_no_grad(file: ParsedFile, scope: Scope) -> bool:
    """A function defined inside another, whose every use there is a call under `with
    torch.no_grad():` that calls it or is handed it (`self.network.apply(init_weights)`):
    nothing else can reach it, and wherever it runs autograd is off."""
    outer = scope.enclosing_function
    if outer is None or ("no_grad" not in file.text and "inference_mode" not in file.text):
        return False
    name = scope.name
    uses = [n for n in name_nodes(outer) if n.value == name and n is not getattr(scope.node, "name", None)]
    contexts = call_contexts(file)
    covered = [
        n
        for call, context in contexts.items()
        if context.no_grad
        for n in (call.func, *(a.value for a in call.args))
        if isinstance(n, cst.Name) and n.value == name
    ]
    return bool(uses) and all(any(u is c for c in covered) for u in uses)


def under_grad_off_fixture(file: ParsedFile, scope: Scope) -> bool:
    """A test that takes a pytest fixture of this file which yields inside `with
    torch.inference_mode():` (or `no_grad`) runs its whole body with autograd off."""
    node = scope.node
    if not isinstance(node, cst.FunctionDef) or "fixture" not in file.text:
        return False
    fixtures = file.once("grad-off fixtures", lambda: _grad_off_fixtures(file.module))
    return any(p.name.value in fixtures for p in node.params.params)


def _grad_off_fixtures(module: cst.Module) -> frozenset[str]:
    found: set[str] = set()
    for stmt in module.body:
        if not isinstance(stmt, cst.FunctionDef):
            continue
        name = _fixture_name(stmt)
        if name is None:
            continue

        class Yields(cst.CSTVisitor):
            def __init__(self) -> None:
                self.depth = 0
                self.found = False

            def visit_With(self, node: cst.With) -> None:
                self.depth += any(_turns_grad_off(item.item) for item in node.items)

            def leave_With(self, original_node: cst.With) -> None:
                self.depth -= any(_turns_grad_off(item.item) for item in original_node.items)

            def visit_Yield(self, node: cst.Yield) -> None:
                self.found = self.found or self.depth > 0

        yields = Yields()
        stmt.visit(yields)
        if yields.found:
            found.add(name)
    return frozenset(found)


def _fixture_name(fn: cst.FunctionDef) -> str | None:
    """The name tests ask a pytest fixture by: `name=` of `@pytest.fixture(...)`, or its own."""
    for decorator in fn.decorators:
        expr = decorator.decorator
        call = expr if isinstance(expr, cst.Call) else None
        if dotted(call.func if call is not None else expr).rpartition(".")[2] != "fixture":
            continue
        for arg in call.args if call is not None else ():
            if arg.keyword is not None and arg.keyword.value == "name" and isinstance(arg.value, cst.SimpleString):
                value = arg.value.evaluated_value
                return value if isinstance(value, str) else fn.name.value
        return fn.name.value
    return None


def called_grad_off_in_repository(flow: FunctionFlow) -> bool:
    """Every call of this function in the repository, outside the tests, runs with autograd
    off (the index follows callers a few calls up), or the file's package turns autograd off
    when imported: nothing it computes is attached to a graph when the repository runs it.
    Asked only when a rule is about to report, since it reads the files that call the
    function."""
    scope = flow.scope
    if flow.index is None:
        return False
    if flow.file.once("grad off at import", lambda: flow.index.grad_off_at_import(flow.file.path)):
        return True  # the file's package turns autograd off for the process when imported
    if scope is None or scope.kind == "class":
        return False
    key = ("called_grad_off", scope.qualname)
    accepts = signature_of(scope.node, scope.takes_self) if isinstance(scope.node, cst.FunctionDef) else None
    return bool(flow.file.once(key, lambda: flow.index.called_grad_off(scope.name, scope.kind, origin=flow.file.path, accepts=accepts)))


def reached_only_by_reference(flow: FunctionFlow) -> bool:
    """This private method is never called by name in the repository, only handed on as a
    value (a dispatch table, a callback): whether autograd is on where it runs is unknown."""
    scope = flow.scope
    if scope is None or scope.kind != "method" or flow.index is None:
        return False
    key = ("only_referenced", scope.qualname)
    return bool(flow.file.once(key, lambda: flow.index.only_referenced(scope.name)))


@dataclass(frozen=True)
class CallContext:
    """Where a call stands in its caller."""

    discarded: bool  # the call is a statement of its own: its result is thrown away
    no_grad: bool  # autograd is off where it runs
    caller_params: frozenset[str]
    # Names the calling function returns as they are (`return x`, `return x, y`): the
    # caller's own set, complete once the file's walk is done.
    caller_returns: AbstractSet[str]
    # `w.data.copy_(f(...))`: the code of what the result is copied into (`w.data`).
    copied_into: str | None = None
    # The call is made by a method of an optimizer (a class built on `...Optimizer`): what it
    # passes (grads, state buffers, parameters) is the update's to change.
    in_optimizer_step: bool = False
    # Names the caller bound, before this call, to a copy of its own (`y = y.clone().view(...)`).
    own_copies: frozenset[str] = frozenset()
    # Targets of the loops around the call (`for name, p in state_dict.items():`): items of
    # something else, never temporaries of the caller's own.
    loop_targets: frozenset[str] = frozenset()


_GRAD_OFF = ("no_grad", "inference_mode")


def _turns_grad_off(expr: cst.BaseExpression) -> bool:
    call = expr if isinstance(expr, cst.Call) else None
    name = dotted(call.func if call is not None else expr).rpartition(".")[2]
    if name in _GRAD_OFF:
        return True
    return name == "set_grad_enabled" and call is not None and bool(call.args) and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "False"


def _returned_as_is(value: cst.BaseExpression) -> Iterator[str]:
    """Names returned as they are: `return x`, `return x, y`, `return {"input": x}`."""
    if isinstance(value, cst.Name):
        yield value.value
    elif isinstance(value, (cst.Tuple, cst.List)):
        for element in value.elements:
            yield from _returned_as_is(element.value)
    elif isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement):
                yield from _returned_as_is(element.value)


def _a_copy(expr: cst.BaseExpression) -> bool:
    """`x.clone()`, `x.clone().view(...)`, `torch.clone(x)`, `copy.deepcopy(x)`: memory of its own."""
    while isinstance(expr, cst.Call):
        name = expr.func.attr.value if isinstance(expr.func, cst.Attribute) else dotted(expr.func)
        if name in ("clone", "deepcopy"):
            return True
        if not (isinstance(expr.func, cst.Attribute) and _aliasing_call(expr)):
            return False
        expr = expr.func.value
    return False


def call_contexts(file: ParsedFile) -> dict[cst.Call, CallContext]:
    """Every call in the file with its context, computed once per file."""

    def compute() -> dict[cst.Call, CallContext]:
        found: dict[cst.Call, CallContext] = {}

        class _Contexts(cst.CSTVisitor):
            def __init__(self) -> None:
                self.no_grad = [0]
                self.functions: list[tuple[frozenset[str], set[str], set[str]]] = [(frozenset(), set(), set())]
                self.classes: list[bool] = [False]  # is each enclosing class an optimizer?
                self.steps: list[bool] = [False]  # is each enclosing function a method of an optimizer?
                self.statements: set[cst.Call] = set()
                self.copies: dict[cst.Call, str] = {}
                self.loop_targets: list[frozenset[str]] = []

            def visit_For(self, node: cst.For) -> None:
                self.loop_targets.append(names_in(node.target))

            def leave_For(self, original_node: cst.For) -> None:
                self.loop_targets.pop()

            def visit_ClassDef(self, node: cst.ClassDef) -> None:
                self.classes.append(built_on_optimizer(node))

            def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
                self.classes.pop()

            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                params = frozenset(p.name.value for p in (*node.params.params, *node.params.kwonly_params, *node.params.posonly_params))
                self.functions.append((params, set(), set()))
                # `step` and the helpers it shares with other methods (`_direction`): the state they
                # pass is the optimizer's own to update.
                self.steps.append(self.steps[-1] or self.classes[-1])
                self.no_grad.append(1 if any(_turns_grad_off(d.decorator) for d in node.decorators) else 0)

            def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
                self.functions.pop()
                self.steps.pop()
                self.no_grad.pop()

            def visit_With(self, node: cst.With) -> None:
                self.no_grad[-1] += sum(_turns_grad_off(item.item) for item in node.items)

            def leave_With(self, original_node: cst.With) -> None:
                self.no_grad[-1] -= sum(_turns_grad_off(item.item) for item in original_node.items)

            def visit_Return(self, node: cst.Return) -> None:
                if node.value is not None:
                    self.functions[-1][1].update(_returned_as_is(node.value))

            def visit_Assign(self, node: cst.Assign) -> None:
                copies = self.functions[-1][2]
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        name = target.target.value
                        (copies.add if _a_copy(node.value) else copies.discard)(name)

            def visit_Expr(self, node: cst.Expr) -> None:
                if isinstance(node.value, cst.Call):
                    self.statements.add(node.value)

            def visit_Call(self, node: cst.Call) -> None:
                params, returns, copies = self.functions[-1]
                targets = frozenset().union(*self.loop_targets)
                found[node] = CallContext(node in self.statements, self.no_grad[-1] > 0, params, returns, self.copies.get(node), self.steps[-1], frozenset(copies), targets)
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value == "copy_" and node.args and isinstance(node.args[0].value, cst.Call):
                    self.copies[node.args[0].value] = code_of(func.value)

        file.module.visit(_Contexts())
        return found

    return file.once("call_contexts", compute)


def handed_over(flow: FunctionFlow) -> bool:
    """A function nested in another that never calls it but passes it on to a call
    (`self.runAtenTest((r, x), fn)`, `self.run_test(fn, init, xs)`): what it receives, and
    what becomes of it, is the receiving harness's business, not a caller's in sight."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    outer = scope.enclosing_function
    if outer is None:
        return False
    name = scope.name
    calls = call_sites(flow.file, outer)
    if outer.name.value.startswith("test") and _compared(outer, name, calls):
        return True
    if any(isinstance(call.func, cst.Name) for call in calls.get(name, [])):
        return False  # called directly: its callers are in sight
    return any(isinstance(a.value, cst.Name) and a.value.value == name for found in calls.values() for call in found for a in call.args)


def _compared(outer: cst.FunctionDef, name: str, calls: dict[str, list[cst.Call]]) -> bool:
    """A test's case run against a transformed copy of itself: listed in a table of cases
    (`for fn in [f, g]:`) or handed to a transform whose result is called (`jfn =
    executor.make_callable(f)`, `jfn(a)`). What it does to its arguments is what the test
    compares with the transformed run, even where it is also run directly."""
    found = False

    class Find(cst.CSTVisitor):
        def visit_Element(self, node: cst.Element) -> None:
            nonlocal found
            found = found or (isinstance(node.value, cst.Name) and node.value.value == name)

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            value, targets = node.value, node.targets
            if not isinstance(value, cst.Call) or len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
                return
            handed = any(isinstance(a.value, cst.Name) and a.value.value == name for a in value.args)
            made = targets[0].target.value
            found = found or (handed and any(isinstance(c.func, cst.Name) for c in calls.get(made, [])))

    outer.visit(Find())
    return found


def own_call_sites(file: ParsedFile, scope: Scope | None) -> list[cst.Call]:
    """Calls of this very function: `f(...)` for a function, `self.f(...)` for a method (in
    its class, or in a subclass in the file that inherits it)."""
    if scope is None:
        return []
    method = scope.kind == "method"
    function = autograd_function_of(scope)
    if function:
        return [c for c in call_sites(file, file.module).get("apply", []) if isinstance(c.func, cst.Attribute) and dotted(c.func.value) == function]
    out = []
    searched: list[cst.CSTNode] = [file.module]
    if method and scope.class_node is not None:
        searched = [scope.class_node, *_inheriting_subclasses(file, scope.class_node, scope.name)]
    for root in searched:
        for call in call_sites(file, root).get(scope.name, []):
            func = call.func
            if (method and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls")) or (not method and isinstance(func, cst.Name)):
                out.append(call)
    return out


def _inheriting_subclasses(file: ParsedFile, cls: cst.ClassDef, name: str) -> list[cst.ClassDef]:
    """Classes of the file that derive from `cls` (through classes of the file that do not
    override `name` either) and do not define `name` themselves: their `self.name(...)` is
    `cls`'s method. Computed once per class and name."""
    return file.once(("inheriting", id(cls), name), lambda: _search_subclasses(file, cls, name))


def _search_subclasses(file: ParsedFile, cls: cst.ClassDef, name: str) -> list[cst.ClassDef]:
    classes = [s.node for s in file.scopes if s.kind == "class" and isinstance(s.node, cst.ClassDef)]
    family = {cls.name.value}
    joined: set[int] = {id(cls)}
    found: list[cst.ClassDef] = []
    grew = True
    while grew:
        grew = False
        for c in classes:
            if id(c) in joined or not any(dotted(b.value).rpartition(".")[2] in family for b in c.bases):
                continue
            joined.add(id(c))
            grew = True
            if any(isinstance(s, cst.FunctionDef) and s.name.value == name for s in c.body.body):
                continue  # it overrides `name`: its subclasses call its own version
            family.add(c.name.value)
            found.append(c)
    return found


# ------------------------------------------------------------ per-file facts


def call_sites(file: ParsedFile, root: cst.CSTNode) -> dict[str, list[cst.Call]]:
    """Calls under `root` (the module, or a class for its methods), by the name called."""

    def compute() -> dict[str, list[cst.Call]]:
        found: dict[str, list[cst.Call]] = {}

        class _Calls(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                key = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
                if key:
                    found.setdefault(key, []).append(node)

        root.visit(_Calls())
        return found

    return file.once(("call_sites", id(root)), compute)
