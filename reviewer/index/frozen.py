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
