"""Loops that set the grad flag of every parameter of a module: `for p in
self.model.parameters(): p.requires_grad = False`, or two modules at once through
`zip(self.model.parameters(), self.output.parameters())` (a re-basin network's frozen
copies). The interpreter reads them to know a module's parameters no longer require grad."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.syntax import dotted, first_argument_false, is_name

_PARAMETER_METHODS = frozenset(("parameters", "named_parameters"))


def grad_flags_set(stmt: cst.For) -> dict[str, bool]:
    """The modules (by dotted name) whose every parameter this loop's own statements (not
    under an `if`) set the grad flag of, with the flag: `False` for
    `p.requires_grad = False` / `p.requires_grad_(False)`, `True` for turning it on. A
    loop that skips some parameters (`if "head" in name: continue`) sets no module's."""
    if any(isinstance(s, cst.If) or _skips(s) for s in _body(stmt)):
        return {}
    each = _parameter_targets(stmt.target, stmt.iter)
    found: dict[str, bool] = {}
    for owner, name in each:
        flag = _flag_set(stmt, name)
        if flag is not None:
            found[owner] = flag
    return found


def _body(stmt: cst.For) -> list[cst.CSTNode]:
    return list(stmt.body.body) if isinstance(stmt.body, cst.IndentedBlock) else [stmt.body]


def _skips(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(isinstance(s, (cst.Continue, cst.Break)) for s in stmt.body)


def _parameter_targets(target: cst.BaseExpression, iterable: cst.BaseExpression) -> list[tuple[str, str]]:
    """(module, loop name) for each parameter the loop binds: `p` of `m.parameters()`,
    `p` of `(name, p)` over `m.named_parameters()`, and each part of a `zip` of those."""
    if not isinstance(iterable, cst.Call):
        return []
    func = iterable.func
    if is_name(func, "zip") and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(iterable.args):
        return [pair for element, arg in zip(target.elements, iterable.args) if arg.star == "" for pair in _parameter_targets(element.value, arg.value)]
    if not (isinstance(func, cst.Attribute) and func.attr.value in _PARAMETER_METHODS):
        return []
    owner = dotted(func.value)
    if not owner:
        return []
    if func.attr.value == "named_parameters":
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Name):
            return [(owner, target.elements[1].value.value)]
        return []
    return [(owner, target.value)] if isinstance(target, cst.Name) else []


def _flag_set(stmt: cst.For, name: str) -> bool | None:
    """The flag the loop's own statements give `name`'s grad, if one of them sets it."""
    flag: bool | None = None
    for line in _body(stmt):
        if not isinstance(line, cst.SimpleStatementLine):
            continue
        for small in line.body:
            if isinstance(small, cst.Assign) and len(small.targets) == 1:
                target = small.targets[0].target
                sets = isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and is_name(target.value, name)
                if sets and is_name(small.value, "False", "True"):
                    flag = is_name(small.value, "True")
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and is_name(func.value, name):
                    flag = not first_argument_false(small.value, "requires_grad")
    return flag
