"""Functions the file registers as backward hooks (`module.register_full_backward_hook(fn)`,
`tensor.register_hook(fn)`): autograd calls them during the backward pass, where grad mode
is on only for a `create_graph=True` backward, so what they compute records no graph."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.parse import ParsedFile, Scope
from review_copies.analysis.syntax import dotted

_BACKWARD_HOOKS = frozenset(("register_full_backward_hook", "register_backward_hook", "register_full_backward_pre_hook", "register_hook"))


def registered_as_backward_hook(file: ParsedFile, scope: Scope) -> bool:
    """The function is handed to a backward-hook registration in this file, by name
    (`register_full_backward_hook(back_hook_fn)`) or as what a factory of the file returns
    (`register_full_backward_hook(get_grad(name))`, `def get_grad(name): def hook(...): ...;
    return hook`); and nothing in the file backpropagates with `create_graph=True`."""
    if not any(word in file.text for word in _BACKWARD_HOOKS) or "create_graph=True" in file.text:
        return False
    names, factories = file.once("backward hooks", lambda: _registered(file.module))
    if scope.name in names:
        return True
    outer = scope.enclosing_function
    return outer is not None and outer.name.value in factories and _returns_name(outer, scope.name)


def _registered(module: cst.Module) -> tuple[frozenset[str], frozenset[str]]:
    """The names handed to a backward-hook registration, and the functions whose call is."""
    names: set[str] = set()
    factories: set[str] = set()

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if not (isinstance(node.func, cst.Attribute) and node.func.attr.value in _BACKWARD_HOOKS and node.args):
                return
            hook = node.args[0].value
            if isinstance(hook, cst.Call) and dotted(hook.func).endswith("partial") and hook.args:
                hook = hook.args[0].value  # `functools.partial(save_grad, name=name)`
            if isinstance(hook, cst.Name):
                names.add(hook.value)
            elif isinstance(hook, cst.Call) and isinstance(hook.func, cst.Name):
                factories.add(hook.func.value)

    module.visit(Find())
    return frozenset(names), frozenset(factories)


def _returns_name(fn: cst.FunctionDef, name: str) -> bool:
    """The function's own body ends by returning the name (`return hook`)."""
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    if not isinstance(last, cst.SimpleStatementLine):
        return False
    return any(isinstance(s, cst.Return) and isinstance(s.value, cst.Name) and s.value.value == name for s in last.body)
