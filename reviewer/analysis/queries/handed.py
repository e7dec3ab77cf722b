"""Which classes a module a function calls was built from: a local bound to `Cls(...)`,
or a parameter every caller in the file fills with one (followed a few calls up). Rules
ask the repository index what such a class does (RC321: a class whose constructor turns
grad off for all its parameters). And whether every caller hands over a module it froze
itself (`.requires_grad_(False)`, or a deep copy of such a module)."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.parse import ParsedFile, Scope
from review_copies.analysis.queries.callers import passed_in
from review_copies.analysis.syntax import bound_names, code_of, dotted

# Calls on a module that hand back the same module (`InceptionV3(...).cuda().eval()`).
_SAME_MODULE = frozenset(("to", "cuda", "cpu", "eval", "train", "float", "half", "double"))


def classes_handed(file: ParsedFile, scope: Scope | None, arg: str, depth: int = 3) -> frozenset[str] | None:
    """The classes whose instances the calls of this function in its file pass for `arg`:
    each call hands over `Cls(...)`, or a name its function binds only so, or its own
    parameter that its callers fill so in turn (followed `depth` calls up). None when some
    call passes anything else, or there is no call."""
    sites = passed_in(file, scope, arg)
    if not sites or depth <= 0:
        return None
    found: set[str] = set()
    for call, value in sites:
        caller = file.innermost_scope(file.line_of(call), ("function", "method"))
        built = _built(file, caller, value, depth)
        if built is None:
            return None
        found |= built
    return frozenset(found)


def _built(file: ParsedFile, scope: Scope | None, value: cst.BaseExpression | None, depth: int) -> frozenset[str] | None:
    value = _module_itself(value)
    if isinstance(value, cst.Call):
        cls = class_built(value)
        return frozenset((cls,)) if cls else None
    if not isinstance(value, cst.Name) or scope is None or not isinstance(scope.node, cst.FunctionDef):
        return None
    params = scope.node.params
    if any(p.name.value == value.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
        return classes_handed(file, scope, value.value, depth - 1)
    return classes_bound(scope, value.value)


def classes_bound(scope: Scope, name: str) -> frozenset[str] | None:
    """The classes a local of the function is built as: every `name = Cls(...)` (or
    `name = name.cuda()`, the same module); None when one binding is anything else."""
    if not isinstance(scope.node, cst.FunctionDef):
        return None
    found: set[str] = set()
    for bind in _own_assignments(scope.node, name):
        bound = _module_itself(bind.value)
        if isinstance(bound, cst.Name) and bound.value == name:
            continue
        cls = class_built(bound)
        if not cls:
            return None
        found.add(cls)
    return frozenset(found) or None


def _module_itself(value: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The module a chain of calls that hand it back is made on: `InceptionV3(...)` of
    `InceptionV3(...).cuda().eval()`."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_MODULE:
        value = value.func.value
    return value


def class_built(value: cst.BaseExpression | None) -> str:
    """`InceptionV3` of `InceptionV3(...)`, `fid.InceptionV3(...)` or
    `InceptionV3(...).cuda().eval()`; "" for anything not a call named like a class."""
    value = _module_itself(value)
    if not isinstance(value, cst.Call):
        return ""
    cls = dotted(value.func).rpartition(".")[2]
    return cls if cls[:1].isupper() else ""


def _own_assignments(fn: cst.FunctionDef, name: str) -> list[cst.Assign]:
    """`name = ...` statements of the function itself (not of functions nested in it); any
    other binding of the name (a loop, `with ... as`, a tuple) makes the list empty."""
    found: list[cst.Assign] = []
    other = False

    class Find(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal other
            for target in node.targets:
                if isinstance(target.target, cst.Name) and target.target.value == name:
                    found.append(node)
                elif name in bound_names(target.target):
                    other = True

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            nonlocal other
            other = other or (isinstance(node.target, cst.Name) and node.target.value == name)

        def visit_For(self, node: cst.For) -> None:
            nonlocal other
            other = other or name in bound_names(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            nonlocal other
            other = other or name in bound_names(node.name)

    fn.visit(Find())
    return [] if other else found


def frozen_handed(file: ParsedFile, scope: Scope | None, arg: str, depth: int = 3) -> bool:
    """Every call of this function in its file passes for `arg` a module that its caller
    froze and never thawed by that name: bound to a chain that turns grad off
    (`construct(...).train().requires_grad_(False).to(device)`), or to a deep copy of such a
    local (StyleGAN's `G_ema = copy.deepcopy(G).eval()`), or its own parameter that its callers
    fill so in turn (followed `depth` calls up). False when some call passes anything else,
    or there is no call."""
    sites = passed_in(file, scope, arg)
    if not sites or depth <= 0:
        return False
    for call, value in sites:
        caller = file.innermost_scope(file.line_of(call), ("function", "method"))
        if not isinstance(value, cst.Name) or caller is None or not isinstance(caller.node, cst.FunctionDef):
            return False
        params = caller.node.params
        if any(p.name.value == value.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)):
            if not frozen_handed(file, caller, value.value, depth - 1):
                return False
        elif not _frozen_local(file, caller.node, value.value, frozenset()):
            return False
    return True


def _frozen_local(file: ParsedFile, fn: cst.FunctionDef, name: str, seen: frozenset[str], before: int | None = None) -> bool:
    """`name` is bound only to frozen modules, and not thawed by name (before line `before`,
    for the source of a deep copy: a later thaw does not reach the copy)."""
    binds = _own_assignments(fn, name)
    if not binds or name in seen or _thawed(file, fn, name, before):
        return False
    for bind in binds:
        if _freezes(bind.value):
            continue
        source = _module_itself(bind.value)
        if not (isinstance(source, cst.Call) and dotted(source.func) in ("copy.deepcopy", "deepcopy") and source.args):
            return False
        copied = source.args[0].value
        if not (isinstance(copied, cst.Name) and _frozen_local(file, fn, copied.value, seen | {name}, file.line_of(bind))):
            return False
    return True


def _freezes(value: cst.BaseExpression) -> bool:
    """The last `requires_grad_` of a chain of calls turns grad off."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        if value.func.attr.value == "requires_grad_":
            first = value.args[0].value if value.args else None
            return isinstance(first, cst.Name) and first.value == "False"
        value = value.func.value
    return False


def _thawed(file: ParsedFile, fn: cst.FunctionDef, name: str, before: int | None) -> bool:
    """`name.requires_grad_()` (or with anything but False), or a loop over its parameters
    that sets `requires_grad`: the function turns grad back on by that name."""
    found = False

    def counts(node: cst.CSTNode) -> bool:
        return before is None or file.line_of(node) < before

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and dotted(func.value) == name and counts(node):
                found = found or not _freezes(node)

        def visit_For(self, node: cst.For) -> None:
            nonlocal found
            over = node.iter.func if isinstance(node.iter, cst.Call) else node.iter
            if isinstance(over, cst.Attribute) and dotted(over.value) == name and "requires_grad" in code_of(node.body) and counts(node):
                found = True

    fn.visit(Find())
    return found
