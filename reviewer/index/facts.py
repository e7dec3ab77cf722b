"""Facts about one file's classes and functions, read with `ast` (libcst's concrete tree
would cost ten times as much for what the index keeps): for every method and function,
which parameters it writes in place, which it accumulates or stores on `self` (and into
which attribute), which it returns as they are, whether it runs with autograd off by its
own decorator; and every call in the file, with which of the names it passes its caller
reads again afterwards. Plain JSON, so that it can be cached."""

from __future__ import annotations

import ast
from typing import Any

from review_copies.analysis.parse import OTHER_FRAMEWORKS
from review_copies.analysis.semantics import api
from review_copies.index.arrays import NOTHING_ANNOTATED, Annotated, a_new_array, an_array, annotated_arrays, array_functions, record_binding
from review_copies.index.frozen import freezes_parameters, grad_flag_setter
from review_copies.index.gradmode import grad_off, grad_off_spans
from review_copies.index.graphless import callee_name, delegates, returns_no_graph

Facts = dict[str, Any]


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _attached_names(node: ast.AST) -> set[str]:
    """The names whose graph an expression can carry: not those seen only through a cut
    (`y_pred.detach().cpu()`, `loss.item()`, `float(loss)`, `x.numpy()`, `v.data.sum()`),
    which keeps a value and no graph."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in (*_DETACHING, *_SIZES, "numpy"):
            return set().union(*(_attached_names(a) for a in (*node.args, *(k.value for k in node.keywords))))
        if isinstance(func, ast.Name) and func.id in _TO_NUMBER:
            return set()
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute) and node.attr in ("data", *_SHAPES):
        return set()  # `v.data` is the tensor without its graph; `v.shape` its sizes
    return set().union(*(_attached_names(child) for child in ast.iter_child_nodes(node)))


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def function_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, siblings: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None) -> Facts:
    params = _params(fn)
    param_set = set(params)
    keeps: dict[str, list[Any]] = {}  # param -> [attr, line, how]
    writes: set[str] = set()
    returns: set[str] = set()
    # `value = float(value)` before `self.total += value`: what is kept is a number, not the
    # argument (nor its graph).
    dropped = _dropped(fn, param_set)

    def kept(node: ast.expr, line: int) -> set[str]:
        return {p for p in _attached_names(node) & param_set if dropped.get(p, line) >= line}

    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign):
            attr = _self_attr(node.target)
            used = kept(node.value, node.lineno)
            if attr and used:
                for p in sorted(used):
                    keeps.setdefault(p, [attr, node.lineno, "accumulates"])
            if isinstance(node.target, ast.Name) and node.target.id in param_set:
                writes.add(node.target.id)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                attr = _self_attr(target)
                if attr is None:
                    continue
                # self.x = self.x + val, or self.x = val
                used = kept(node.value, node.lineno)
                how = "accumulates" if f"self.{attr}" in ast.unparse(node.value) else "stores"
                for p in sorted(used):
                    keeps.setdefault(p, [attr, node.lineno, how])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            owner = node.func.value
            attr = _self_attr(owner)
            if attr and method in ("append", "extend", "add", "insert", "update", "__setitem__"):
                for arg in node.args:
                    for p in sorted(kept(arg, node.lineno)):
                        keeps.setdefault(p, [attr, node.lineno, "stores"])
            if isinstance(owner, ast.Name) and owner.id in param_set and api.is_inplace_method(method):
                writes.add(owner.id)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in param_set:
            returns.add(node.value.id)
    return {
        "params": params, "line": fn.lineno, "keeps": keeps, "writes": sorted(writes), "returns": sorted(returns),
        **_changes(fn, params), "grad_off": grad_off(fn), "stub": _stub(fn), "no_graph": returns_no_graph(fn, siblings),
        "delegates": delegates(fn), "grad_flags": grad_flag_setter(fn),
    }


def _with_inherited(cls: ast.ClassDef, module: list[ast.stmt]) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods `self.name(...)` can reach in a class: its own, then those of its bases
    defined in the same file (`class TrainableSAE(AbstractSAE)` and `AbstractSAE.loss`)."""
    classes = {n.name: n for n in module if isinstance(n, ast.ClassDef)}
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    pending, seen = [cls], set()
    while pending:
        current = pending.pop(0)
        if current.name in seen:
            continue
        seen.add(current.name)
        for m in current.body:
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.setdefault(m.name, m)
        pending.extend(classes[b] for b in (callee_name(b) for b in current.bases) if b in classes)
    return found


def _method_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef, siblings: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]) -> Facts:
    """A method's facts; `static`: a `@staticmethod`, whose first parameter is no `self`
    (a call `self.top_k(logits)` passes `logits` for it)."""
    static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    return {**function_facts(fn, siblings), "static": static}


# Methods and functions whose result can carry no graph: new tensors that do not require
# grad, integer or boolean results, cuts, numbers.
# Conversions whose result holds no graph and shares no memory with the tensor converted.
_TO_NUMBER = frozenset(("float", "int", "bool", "len"))
_DETACHING = frozenset(("item", "tolist", "detach"))
# What a tensor says of its shape and place: numbers, never its graph (`output.size(0)`).
_SIZES = frozenset(("size", "dim", "numel", "nelement", "element_size", "get_device", "stride"))
_SHAPES = frozenset(("shape", "ndim", "dtype", "device", "is_cuda", "requires_grad"))


def _dropped(fn: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str]) -> dict[str, int]:
    """The first line where each parameter is rebound to a number or a detached value made
    from itself alone (`val = float(val)`, `val = val.item()`, `val = val.detach()`,
    `v = v.data.sum()`)."""
    lines: dict[str, int] = {}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if name in params and isinstance(value, ast.Call) and _names(value) & params == {name} and not _attached_names(value):
            lines[name] = min(lines.get(name, node.lineno), node.lineno)
    return lines


# Methods that look into a mapping, a sequence or a module without changing it.
_LOOKUPS = frozenset(
    "keys values items get copy index count get_parameter get_submodule get_buffer parameters named_parameters "
    "buffers named_buffers modules named_modules children named_children state_dict".split()
)
# Builtins that look at their argument without changing or keeping it.
_LOOKING = frozenset("len isinstance sorted list tuple dict set iter enumerate zip any all print str repr".split())
# Methods that change a mapping, a list or a set in place.
_CONTAINER_WRITES = frozenset("update pop popitem setdefault clear append extend insert remove add discard sort reverse".split())
# Calls that change a model's tensors whatever they are handed: a training step, a load.
_CHANGING_CALLS = frozenset("step backward load_state_dict set_ fit train_step training_step".split())


def _changes(fn: ast.FunctionDef | ast.AsyncFunctionDef, params: list[str]) -> Facts:
    """`reads`: the parameters the function only looks into (`_only_read`); `mutates`:
    whether the function itself may change a tensor in place: an in-place method or a write
    into an item or attribute of anything but a container it built, an `out=`, an optimizer
    step, a backward, a `load_state_dict` (what the functions it calls do is theirs)."""
    if _writes_anything(fn):
        return {"reads": [], "mutates": True}
    mutates = any(
        isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in _CHANGING_CALLS
        for node in ast.walk(fn)
    )
    return {"reads": _only_read(fn, params), "mutates": mutates}


def _writes_anything(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    own = _own_containers(fn)
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(isinstance(t, (ast.Subscript, ast.Attribute)) and _base(t) not in own for target in targets for t in ast.walk(target)):
                return True
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and (api.is_inplace_method(func.attr) or func.attr in _CONTAINER_WRITES) and _base(func.value) not in own:
                return True
            if any(k.arg == "out" for k in node.keywords):
                return True
    return False


def _only_read(fn: ast.FunctionDef | ast.AsyncFunctionDef, params: list[str]) -> list[str]:
    """The parameters a function that writes nothing in place (nested functions included)
    only looks into: each is only indexed (`d[k]`), asked for its keys or items, or handed
    to a builtin that looks (`len(d)`). Anything else (passed to another call, bound to
    another name, a method of its own) may change it."""
    parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    uses: dict[str, list[ast.Name]] = {}
    for node in parents:
        if isinstance(node, ast.Name):
            uses.setdefault(node.id, []).append(node)
    # (one never used is not changed either)
    return [name for name in params if all(_looked_into(use, parents) for use in uses.get(name, ()))]


def _own_containers(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Local names only ever bound to a list, dict or set the function builds (`pattern = []`):
    filling them changes nothing the caller holds."""
    built = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
    bound: dict[str, bool] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    value = node.value
                    empty = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("list", "dict", "set") and not value.args
                    fresh = isinstance(value, built) or empty
                    bound[target.id] = bound.get(target.id, True) and fresh
        elif isinstance(node, (ast.For, ast.AugAssign, ast.AnnAssign, ast.With, ast.NamedExpr)):
            for name in ast.walk(getattr(node, "target", None) or node):
                if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store):
                    bound[name.id] = False
    return {name for name, fresh in bound.items() if fresh} - set(_params(fn))


def _base(node: ast.expr) -> str | None:
    """The name a chain of items and attributes starts from: `a` for `a[0].b`."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _looked_into(use: ast.expr, parents: dict[ast.AST, ast.AST]) -> bool:
    """`d[k]`, `d.items()`, `k in d`, `len(d)`; an attribute of it read the same way
    (`set(module._buffers_set)`)."""
    parent = parents.get(use)
    if isinstance(parent, ast.Subscript) and parent.value is use:
        return True
    if isinstance(parent, ast.Attribute) and parent.value is use:
        call = parents.get(parent)
        if isinstance(call, ast.Call) and call.func is parent:
            return parent.attr in _LOOKUPS
        return _looked_into(parent, parents)
    if isinstance(parent, ast.Compare):
        return True  # `k in d`, `d is None`
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in _LOOKING and use in parent.args


def _stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """An abstract or placeholder body (a docstring, `pass`, `...`, `raise NotImplementedError`):
    it says nothing about what the real implementations do."""
    for stmt in fn.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, (ast.Pass, ast.Raise)):
            continue
        return False
    return True


def _passed(arg: ast.expr, into: str | None = None, masks: frozenset[str] = frozenset()) -> str | None:
    """What a call passes: a name; "" for a new value (`x * 2`, `np.stack(xs)`, and what a
    method or an index makes of one), which no one else holds, or for the place the call's
    result is stored into (`into`, the code of `out["hm"]` in `out["hm"] = f(out["hm"])`),
    which no one reads the old value through again; None for anything that may be shared
    (an attribute, a call that may return a view of something else). A view, a conversion
    or an item of a name (`lprobs.view(b, -1)`, `x.float()`, `batch["mask"]`) is that name's
    memory: whether the caller reads the name again decides, so the name is what is passed;
    an index by a boolean mask the caller made (`tokens[keep]`, `keep = lengths < n`) is a
    copy, so a new value."""
    if into is not None and isinstance(arg, (ast.Subscript, ast.Attribute)) and ast.unparse(arg) == into:
        return ""
    if isinstance(arg, ast.Name):
        return arg.id
    if isinstance(arg, (ast.BinOp, ast.UnaryOp)) or a_new_array(arg):
        return ""
    if isinstance(arg, ast.Subscript) and isinstance(arg.slice, ast.Name) and arg.slice.id in masks:
        return ""
    # A method or an index of a new value (`(sz * scale).long()`, `(a + b)[0]`) is that value
    # or a part of it, or a copy: no one else holds it either.
    inner = arg.func.value if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) else arg.value if isinstance(arg, ast.Subscript) else None
    if isinstance(arg, ast.Call) and isinstance(inner, ast.Name) and inner.id == "torch":
        # `torch.narrow(x, 0, 0, n)` is `x.narrow(0, 0, n)`: its first argument's memory.
        inner = arg.args[0] if arg.args and not isinstance(arg.args[0], ast.Starred) else None
    if inner is None:
        return None
    if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "clone" and not arg.args:
        return ""  # `x.clone()`: a copy no one else holds (a dict's `.copy()` still shares its tensors)
    below = _passed(inner, None, masks)
    if below == "":
        return ""
    sharing = isinstance(arg, ast.Subscript) or (isinstance(arg, ast.Call) and arg.func.attr in _SHARING_METHODS)  # type: ignore[union-attr]
    return below if sharing and below is not None else None


# What may hand back its receiver's memory (a view, or the receiver itself when nothing
# needs converting): passing one shares no more than passing the receiver would.
_SHARING_METHODS = api.VIEW_METHODS | api.MAYBE_VIEW_METHODS | api.MAYBE_SELF_METHODS | {"detach", "detach_"}
# Methods whose result is a boolean tensor: indexing with one copies.
_MASK_METHODS = frozenset("ne eq lt gt le ge logical_and logical_or logical_not logical_xor isin isnan isinf isfinite".split())


def _masks(nodes: list[ast.AST]) -> frozenset[str]:
    """Names every binding of which is a boolean mask: a comparison (`keep = lengths < n`),
    a comparing method (`x.ne(pad)`), or `&`, `|`, `~` of such."""

    def is_mask(value: ast.expr) -> bool:
        if isinstance(value, ast.Compare):
            return True
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _MASK_METHODS:
            return True
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Invert):
            return is_mask(value.operand)
        if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.BitAnd, ast.BitOr)):
            return is_mask(value.left) and is_mask(value.right)
        return False

    verdict: dict[str, bool] = {}
    for node in (n for top in nodes for n in ast.walk(top)):
        if isinstance(node, ast.Assign):
            named = [t.id for t in node.targets if isinstance(t, ast.Name)]
            others = [n.id for t in node.targets if not isinstance(t, ast.Name) for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
            for name in named:
                verdict[name] = verdict.get(name, True) and is_mask(node.value)
            for name in others:
                verdict[name] = False
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            verdict[node.target.id] = False
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr)):
            for target in ([node.target] if isinstance(node, (ast.For, ast.AsyncFor, ast.NamedExpr)) else [i.optional_vars for i in node.items if i.optional_vars]):
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        verdict[n.id] = False
    return frozenset(name for name, mask in verdict.items() if mask)


def _span(body: list[ast.stmt]) -> tuple[int, int]:
    return body[0].lineno, max(s.end_lineno or s.lineno for s in body)


def _within(line: int, span: tuple[int, int]) -> bool:
    return span[0] <= line <= span[1]


def _held_by(iterable: ast.expr, modules: frozenset[str]) -> frozenset[str]:
    """The names whose objects may hold the items a `for` iterates: `batches` in
    `enumerate(batches)`, `model` in `model.parameters()`, `self` in `self.layers`; in
    `tqdm.tqdm(loader, disable=len(xs) < 8)`, where `tqdm` is an imported module, only
    `loader` (a keyword argument or a comparison holds no items)."""
    if isinstance(iterable, ast.Name):
        return frozenset((iterable.id,))
    if isinstance(iterable, (ast.Attribute, ast.Subscript, ast.Starred)):
        return _held_by(iterable.value, modules)
    if isinstance(iterable, ast.Call):
        func = iterable.func
        method = isinstance(func, ast.Attribute) and _dotted(func.value).partition(".")[0] not in modules
        held = _held_by(func.value, modules) if method else frozenset()  # type: ignore[union-attr]
        return held.union(*(_held_by(a, modules) for a in iterable.args))
    if isinstance(iterable, ast.BinOp):
        return _held_by(iterable.left, modules) | _held_by(iterable.right, modules)
    if isinstance(iterable, ast.IfExp):
        return _held_by(iterable.body, modules) | _held_by(iterable.orelse, modules)
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return frozenset().union(*(_held_by(e, modules) for e in iterable.elts))
    if isinstance(iterable, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return frozenset().union(*(_held_by(g.iter, modules) for g in iterable.generators))
    return frozenset()


def _calls(
    nodes: list[ast.AST],
    params: set[str],
    owner: tuple[str, str] = ("", "module"),
    off: bool = False,
    modules: frozenset[str] = frozenset(),
    annotated: Annotated = NOTHING_ANNOTATED,
    cls: list[str] | None = None,
) -> list[Facts]:
    """The calls in one function's body (or the module's own statements), each with the
    names it passes (by position and keyword) and those of them read again after the call's
    statement (in a loop, the whole loop is after it). A name the statement rebinds
    (`x = f(x)`) is read afterwards only as the new value, so it is not counted; a
    parameter belongs to the caller's own caller, who may read it again. Each call also
    says whether it runs with autograd off (`off`: the function's decorator, or a
    `with torch.no_grad():` around it) and which function makes it (`in`: its name and
    kind, "function", "method" or "module"); `through`: the caller's parameters it passes on
    and does not read again itself; `super`: for `super().m(...)` in a method, `cls`: the
    class's name, whose own `m` the call never reaches, then the names of its bases;
    `dropped`: the call is a statement of its own, its result thrown away."""
    spans = [] if off else grad_off_spans(nodes)
    loads: dict[str, list[int]] = {}
    stores: dict[int, set[str]] = {}
    loops: list[tuple[int, int, frozenset[str], frozenset[str]]] = []  # span, and a `for`'s targets and what it iterates
    arms: list[tuple[tuple[int, int], tuple[int, int]]] = []  # each if/else's two arms, as line spans
    calls: list[ast.Call] = []
    dropped: set[int] = set()
    replaced: dict[int, str] = {}  # a call that is the value of `target = call`: the target's code
    assigned: dict[int, set[str]] = {}  # a call inside an assignment's value: the names it binds
    array_binds: dict[str, list[ast.expr]] = {}  # what each local name is bound to, for `an_array`
    for node in (n for top in nodes for n in ast.walk(top)):
        record_binding(node, array_binds)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.setdefault(node.id, []).append(node.lineno)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets = frozenset(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
            loops.append((node.lineno, node.end_lineno or node.lineno, targets, _held_by(node.iter, modules)))
        elif isinstance(node, ast.While):
            loops.append((node.lineno, node.end_lineno or node.lineno, frozenset(), frozenset()))
        elif isinstance(node, ast.If) and node.orelse:
            arms.append((_span(node.body), _span(node.orelse)))
        elif isinstance(node, ast.Call) and isinstance(_called(node.func), (ast.Name, ast.Attribute)):
            calls.append(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            dropped.add(id(node.value))
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            stores.setdefault(node.lineno, set()).update(names)
            # A call anywhere in the value, on whatever line of a statement written over
            # several: the statement rebinds these names once the call has returned.
            for inner in ast.walk(node.value) if node.value is not None else ():
                if isinstance(inner, ast.Call):
                    assigned[id(inner)] = names
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
                replaced[id(node.value)] = ast.unparse(node.targets[0])
    masks = _masks(nodes)
    out: list[Facts] = []
    for node in calls:
        into = replaced.get(id(node))
        positional = [_passed(a, into, masks) for a in node.args if not isinstance(a, ast.Starred)]
        keywords = {k.arg: _passed(k.value, into, masks) for k in node.keywords if k.arg}
        line, end = node.lineno, node.end_lineno or node.lineno
        around = [loop for loop in loops if loop[0] <= line <= loop[1]]
        rebound = stores.get(line, set()) | assigned.get(id(node), set())

        def read_after(name: str, line: int = line, end: int = end, around: list[tuple[int, int, frozenset[str], frozenset[str]]] = around) -> bool:
            """A later read of what the call was passed: after the call in the same pass (not
            in the other arm of an `if` the call is in, nor after the name is bound anew), or
            anywhere in an enclosing loop's next pass that meets no new binding first. A
            `for` binds its target anew at each pass, so what the next pass reads by that
            name is the next item; the item passed stays reachable only through what the
            loop iterates, when that is read after the loop or belongs to the caller."""

            def bound(after: int, before: int) -> bool:
                return any(after < at < before and name in names for at, names in stores.items())

            def other_arm(at: int) -> bool:
                return any((_within(line, a) and _within(at, b)) or (_within(line, b) and _within(at, a)) for a, b in arms)

            def held(loop: tuple[int, int, frozenset[str], frozenset[str]]) -> bool:
                return any(n in params or any(at > loop[1] for at in loads.get(n, ())) for n in loop[3])

            if any(name in loop[2] and held(loop) for loop in around):
                return True
            return any(
                (at > end and not other_arm(at) and not bound(end, at)) or any(s <= at <= e and name not in targets and not bound(s, at) for s, e, targets, _ in around)
                for at in loads.get(name, ())
                if not line <= at <= end
            )

        passed = {n for n in (*positional, *keywords.values()) if n}
        # A parameter is the caller's own caller's tensor, unless the body bound it anew first.
        theirs = {n for n in passed & params if not any(at < line and n in names for at, names in stores.items())}
        again = {n for n in passed if n not in rebound and read_after(n)}
        kept = sorted(theirs | again)
        # The caller's own parameters it hands on and never reads again: whether they are
        # read again is its callers' to say (a wrapper `def _forward(self, x): return self._f(x)`).
        through = sorted(theirs - again)
        # `TABLE[key](...)`: a call of whatever function the table holds, named after the table.
        callee = f"{callee_name(node.func.value)}[]" if isinstance(node.func, ast.Subscript) else callee_name(node.func)
        off_here = off or any(s <= line <= e for s, e in spans)
        # `f(*args)` / `f(**kw)`: how many arguments, and which names, are not known.
        spread = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        record = {"callee": callee, "line": line, "pos": positional, "kw": keywords, "kept": kept, "through": through, "off": off_here, "in": list(owner), "spread": spread}
        plain = [a for a in node.args if not isinstance(a, ast.Starred)]
        arrays = [i for i, a in enumerate(plain) if an_array(a, array_binds, annotated)]
        arrays += [k.arg for k in node.keywords if k.arg and an_array(k.value, array_binds, annotated)]
        if arrays:
            record["arrays"] = arrays
        if cls and _through_super(node.func):
            record["super"] = cls
        if id(node) in dropped:
            record["dropped"] = True
        out.append(record)
    return out



def _sequences(tree: ast.AST) -> list[list[str]]:
    """The layers of each `nn.Sequential(...)` in order, by the dotted name of the class each
    element constructs (`nn.Tanh`, `Scale`; "" for an element that is not a constructor call)."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and callee_name(node.func) == "Sequential"):
            continue
        elements: list[ast.expr] = list(node.args)
        if len(elements) == 1 and isinstance(elements[0], ast.Starred) and isinstance(elements[0].value, (ast.List, ast.Tuple)):
            elements = list(elements[0].value.elts)
        out.append([_dotted(e.func) if isinstance(e, ast.Call) else "" for e in elements])
    return out


def _dotted(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        inner = _dotted(func.value)
        return f"{inner}.{func.attr}" if inner else ""
    return func.id if isinstance(func, ast.Name) else ""


def _torch_nn_names(tree: ast.Module) -> list[str]:
    """The names `from torch.nn import ...` binds in the file ("*" for a star import): there a
    bare `Linear(...)` is torch's, not a class of the repository that shares the name."""
    return sorted(
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module in ("torch.nn", "torch.nn.modules")
        for alias in node.names
    )


def _called(func: ast.expr) -> ast.expr:
    """What a call names: its function, or the table of `TABLE[key](...)`."""
    return func.value if isinstance(func, ast.Subscript) else func


def _tables(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level dispatch tables (`EXPERIMENTS = {"fixed": fixed, ...}`, or a list or tuple
    of functions): each table's name and the functions it holds by name."""
    tables: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            items = value.values if isinstance(value, ast.Dict) else value.elts if isinstance(value, (ast.List, ast.Tuple)) else []
            if held := sorted({item.id for item in items if isinstance(item, ast.Name)}):
                tables[node.targets[0].id] = held
    return tables


def _through_super(func: ast.expr) -> bool:
    """`super().m` or `super(Cls, self).m`: a base class's method."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"


def _no_facts() -> Facts:
    return {"classes": {}, "functions": {}, "calls": [], "sequences": [], "nn_names": []}


def _another_framework_only(imports: list[ast.Import | ast.ImportFrom]) -> bool:
    """The file imports another array framework and no torch module (as `parse.another_framework_only`)."""
    packages = {a.name.partition(".")[0] for n in imports if isinstance(n, ast.Import) for a in n.names}
    packages |= {n.module.partition(".")[0] for n in imports if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
    return "torch" not in packages and bool(packages & OTHER_FRAMEWORKS)


def file_facts(text: str) -> Facts:
    """{"classes": {name: {"line", "methods": {name: facts}}}, "functions": {name: facts},
    "calls": [...], "sequences": [[layer class, ...], ...], "nn_names": [...], "tables": {name: [function, ...]}}."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return _no_facts()
    # One walk for the imports, at any depth, that both questions below read.
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    if _another_framework_only(imports):
        return _no_facts()  # JAX's `rewards += r` makes a new array: its calls write into no one's tensor
    classes: dict[str, Facts] = {}
    functions: dict[str, Facts] = {}
    calls: list[Facts] = []
    script: list[ast.AST] = []  # the module's own statements: a script's calls count too
    modules = frozenset(a.asname or a.name.partition(".")[0] for n in imports if isinstance(n, ast.Import) for a in n.names)
    returning = array_functions(tree)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            defs = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            init = next((m for m in defs if m.name == "__init__"), None)
            frozen = init is not None and freezes_parameters(init)
            bases = [callee_name(b) for b in node.bases if callee_name(b)]
            siblings = _with_inherited(node, tree.body)
            classes[node.name] = {"line": node.lineno, "methods": {m.name: _method_facts(m, siblings) for m in defs}, "frozen": frozen, "bases": bases}
            for m in defs:
                calls.extend(_calls(m.body, set(_params(m)), (m.name, "method"), grad_off(m), modules, annotated_arrays(m, returning), [node.name, *bases]))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = function_facts(node)
            calls.extend(_calls(node.body, set(_params(node)), (node.name, "function"), grad_off(node), modules, annotated_arrays(node, returning)))
        else:
            script.append(node)
    calls.extend(_calls(script, set(), modules=modules, annotated=(frozenset(), frozenset(), returning)))
    return {"classes": classes, "functions": functions, "calls": calls, "sequences": _sequences(tree), "nn_names": _torch_nn_names(tree), "tables": _tables(tree)}
