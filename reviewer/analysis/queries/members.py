"""What the methods of a class assign to one of its attributes, read off the class's text."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.syntax import code_of, is_name

# What `classes_assigned` says of `self.f = lambda ...` or of a method's function.
A_FUNCTION = ""


def classes_assigned(cls: cst.ClassDef, attr: str) -> set[str] | None:
    """The classes whose instances the class's methods assign to `self.<attr>`, by their
    plain names, or `A_FUNCTION` for a lambda or what a method of the class that returns
    only functions made (`self.bezier_coeff = self.get_bezier_coefficient()`); None when
    one assignment is anything else."""
    names: set[str] = set()
    for node in _walk(cls):
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target] if isinstance(node, (cst.AnnAssign, cst.AugAssign)) else []
        if not any(_is_self_attr(t, attr) for t in targets):
            continue
        value = node.value if isinstance(node, cst.Assign | cst.AnnAssign) else None
        if isinstance(value, cst.Lambda):
            names.add(A_FUNCTION)
            continue
        if not isinstance(value, cst.Call):
            return None
        if isinstance(value.func, cst.Attribute) and is_name(value.func.value, "self") and _returns_functions(cls, value.func.attr.value):
            names.add(A_FUNCTION)
            continue
        name = code_of(value.func).rsplit(".", 1)[-1]
        if not name[:1].isupper():
            return None
        names.add(name)
    return names or None


def _returns_functions(cls: cst.ClassDef, method: str) -> bool:
    """Every `return` of the class's method hands back a lambda or a function it defines
    (with `def`, or as a name bound to a lambda)."""
    fn = next((m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == method), None)
    if fn is None:
        return False
    inner: set[str] = set()
    other: set[str] = set()  # names the method binds to anything but a lambda too
    returned: list[cst.BaseExpression | None] = []
    pending: list[cst.CSTNode] = [fn.body]
    while pending:  # the method's own statements, not those of the functions it defines
        node = pending.pop()
        if isinstance(node, cst.FunctionDef):
            inner.add(node.name.value)
            continue
        if isinstance(node, cst.Assign):
            bound = {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
            (inner if isinstance(node.value, cst.Lambda) else other).update(bound)
        if isinstance(node, cst.Return):
            returned.append(node.value)
        if not isinstance(node, cst.Lambda):
            pending.extend(node.children)
    return bool(returned) and all(isinstance(r, cst.Lambda) or (isinstance(r, cst.Name) and r.value in inner - other) for r in returned)


def _is_self_attr(node: cst.BaseExpression, attr: str) -> bool:
    return isinstance(node, cst.Attribute) and is_name(node.value, "self") and node.attr.value == attr


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)
