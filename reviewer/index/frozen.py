"""Which module classes freeze themselves: a constructor that turns grad off for every
parameter it built (pytorch-fid's InceptionV3) makes a module whose output holds a graph
only through its input. The index records it per class (`frozen`)."""

from __future__ import annotations

import ast


def freezes_parameters(init: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a constructor's own statements (not under an `if`) turn off grad for every
    parameter of the module it builds: `for p in self.parameters(): p.requires_grad = False`
    (pytorch-fid's InceptionV3 sets it from a parameter `requires_grad=False` by default) or
    `self.requires_grad_(False)`, and nothing after it turns grad on again for a part
    (`self.head.requires_grad_(True)`). An instance's output then holds a graph only through
    its input."""
    defaults = _false_defaults(init)

    def off(value: ast.expr | None) -> bool:  # `requires_grad_()` with no argument turns grad on
        return (isinstance(value, ast.Constant) and value.value is False) or (isinstance(value, ast.Name) and value.id in defaults)

    frozen_at = None
    for stmt in init.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if _spelled(call.func) == "self.requires_grad_" and off(call.args[0] if call.args else None):
                frozen_at = stmt
        if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and isinstance(stmt.iter, ast.Call) and _spelled(stmt.iter.func) == "self.parameters" and not stmt.iter.args:
            each = stmt.target.id
            for inner in stmt.body:
                if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and _spelled(inner.targets[0]) == f"{each}.requires_grad" and off(inner.value):
                    frozen_at = stmt
                each_call = inner.value if isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call) else None
                if each_call is not None and _spelled(each_call.func) == f"{each}.requires_grad_" and off(each_call.args[0] if each_call.args else None):
                    frozen_at = stmt
        if frozen_at is not None:
            break
    if frozen_at is None:
        return False
    later = [n for stmt in init.body[init.body.index(frozen_at) + 1 :] for n in ast.walk(stmt)]
    for node in later:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "requires_grad" for t in node.targets) and not off(node.value):
            return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_" and not off(node.args[0] if node.args else None):
            return False
    return True


def _false_defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """Parameters whose default is `False` and that nothing in the function rebinds."""
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults)) + [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    rebound = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return frozenset(a.arg for a, d in pairs if isinstance(d, ast.Constant) and d.value is False and a.arg not in rebound)


def _spelled(node: ast.expr) -> str:
    """`self.requires_grad_` for that attribute chain; anything else as Python spells it."""
    return ast.unparse(node)


def grad_flag_setter(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, object] | None:
    """Whether the function sets the grad flag of every parameter of modules it is handed,
    and how: ROME's `nethook.set_requires_grad(requires_grad, *models)` (`for model in
    models: for param in model.parameters(): param.requires_grad = requires_grad`),
    CycleGAN's `set_requires_grad(nets, requires_grad=False)`, a `freeze(model)` that calls
    `model.requires_grad_(False)`. `modules`: the parameters that hold the modules (a
    `*models` one holds every argument from its place on, a list one its items); `flag`:
    the parameter that gives the flag, or the flag itself. None when the function sets none,
    or sets them from different places."""
    a = fn.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    params = {*positional, *(p.arg for p in a.kwonlyargs)} | ({a.vararg.arg} if a.vararg else set())
    # A loop name taken from a parameter's items (`for net in nets`) stands for that parameter.
    held: dict[str, str] = {p: p for p in params}
    loops = [n for n in ast.walk(fn) if isinstance(n, ast.For)]
    for loop in loops:
        if isinstance(loop.target, ast.Name) and isinstance(loop.iter, ast.Name) and loop.iter.id in params:
            held.setdefault(loop.target.id, loop.iter.id)
    each: dict[str, str] = {}  # a loop name over a module's `.parameters()` -> the parameter holding the module
    for loop in loops:
        it = loop.iter
        if (isinstance(loop.target, ast.Name) and isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr == "parameters" and isinstance(it.func.value, ast.Name) and it.func.value.id in held):
            each[loop.target.id] = held[it.func.value.id]
    modules: set[str] = set()
    flags: set[object] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Attribute) and target.attr == "requires_grad" and isinstance(target.value, ast.Name) and target.value.id in each:
                modules.add(each[target.value.id])
                flags.add(_flag_of(node.value, params))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "requires_grad_":
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in held and owner.id not in each:
                modules.add(held[owner.id])
                flags.add(_flag_of(node.args[0], params) if node.args else True)
    if not modules or len(flags) != 1 or None in flags:
        return None
    return {"modules": sorted(modules), "flag": flags.pop(), "positional": positional, "vararg": a.vararg.arg if a.vararg else None,
            "defaults": {p: d.value for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults) if isinstance(d, ast.Constant) and isinstance(d.value, bool)}}


def _flag_of(value: ast.expr, params: set[str]) -> object:
    """`False`/`True`, the parameter's name that gives the flag, or None (anything else)."""
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return value.value
    if isinstance(value, ast.Name) and value.id in params:
        return value.id
    return None
