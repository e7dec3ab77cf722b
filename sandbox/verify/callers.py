"""Where the repository itself calls a reviewed function, and with what: the probe's first
inputs. A user trusts "as `train.py:88` calls it" far more than an invented tensor.

For a function, a call site is a call of it by a name that reaches it (the same file, or
an import of the reviewed module in any file of the repository: tests, examples, `if
__name__ == "__main__"` blocks). For a method, it is a call on an instance the caller
built in the same scope (`t = Trainer(model); t.fit(loader)`; `model(x)` for `forward`),
which gives the constructor's arguments too. Each argument is read as text
(`sandbox.verify.arguments`); none of the caller's code runs here.

Runs in the reviewer's process; no torch.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from review_copies.sandbox.verify.arguments import Imports, Scope, Translator, Untranslatable, read_imports, role_of, scope_of
from review_copies.source.tree import RepoFiles

MAX_SITES = 3
MAX_FILES = 40
MAX_TEXT = 70


@dataclass(frozen=True)
class CallSite:
    """One call of the reviewed function, with what it passes, by parameter."""

    site: str  # "train.py:88"
    args: dict[str, dict[str, Any]]  # parameter -> {"text", "spec", "role"}
    init: dict[str, dict[str, Any]] = field(default_factory=dict)  # constructor parameter -> same
    uses: tuple[str, ...] = ()  # the reviewed file's definitions the values are built from

    def to_json(self) -> dict[str, Any]:
        return {"site": self.site, "args": self.args, "init": self.init, "uses": list(self.uses)}

    @property
    def size(self) -> int:
        return len(self.args) + len(self.init)


@dataclass(frozen=True)
class Target:
    """The reviewed function, as its file defines it."""

    path: str
    name: str
    cls: str | None
    params: tuple[str, ...]
    init_params: tuple[str, ...]
    definitions: frozenset[str]
    module_classes: frozenset[str]


def target_of(path: str, text: str, qualname: tuple[str, ...]) -> Target | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    tops = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    module_classes = _module_classes(tree)
    if len(qualname) == 1:
        fn = tops.get(qualname[0])
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return None
        return Target(path, fn.name, None, _params(fn, skip_self=False), (), frozenset(tops), frozenset(module_classes))
    cls = tops.get(qualname[0])
    if not isinstance(cls, ast.ClassDef):
        return None
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    method = methods.get(qualname[1])
    if method is None:
        return None
    init = methods.get("__init__")
    init_params = _params(init, skip_self=True) if init is not None and method is not init else ()
    return Target(path, method.name, cls.name, _params(method, skip_self=True), init_params, frozenset(tops), frozenset(module_classes))


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef, skip_self: bool) -> tuple[str, ...]:
    """Positional parameters, then keyword-only ones after a `*` marker."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args)]
    if skip_self and names:
        names = names[1:]
    return (*names, *(("*", *(p.arg for p in a.kwonlyargs)) if a.kwonlyargs else ()))


def _module_classes(tree: ast.Module) -> set[str]:
    """Top-level classes that are torch modules, through bases in the file too."""
    found: set[str] = set()
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    changed = True
    while changed:
        changed = False
        for cls in classes:
            if cls.name in found:
                continue
            for base in cls.bases:
                name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
                if name.endswith("Module") or name in found:
                    found.add(cls.name)
                    changed = True
                    break
    return found


# ------------------------------------------------------------------ the search


class Callers:
    """Call sites of reviewed functions across the repository, for one review: each
    caller file is read and parsed once."""

    def __init__(self, files: RepoFiles | None) -> None:
        self.files = files
        self._trees: dict[str, tuple[str, ast.Module] | None] = {}

    def _tree(self, path: str, text: str | None = None) -> tuple[str, ast.Module] | None:
        if path not in self._trees:
            text = text if text is not None else (self.files.read(path) if self.files is not None else None)
            try:
                self._trees[path] = (text, ast.parse(text)) if text is not None else None
            except (SyntaxError, ValueError, RecursionError):
                self._trees[path] = None
        return self._trees[path]

    def sites(self, path: str, text: str, qualname: tuple[str, ...]) -> list[CallSite]:
        """The best call sites (most arguments understood first), at most MAX_SITES."""
        target = target_of(path, text, qualname)
        if target is None:
            return []
        word = target.cls or target.name
        others = [p for p in (self.files.mentioning(word) if self.files is not None else []) if p != path][:MAX_FILES]
        found: list[CallSite] = []
        for caller in [path, *others]:
            parsed = self._tree(caller, text if caller == path else None)
            if parsed is None:
                continue
            found.extend(_sites_in(caller, parsed[0], parsed[1], target))
        found = [s for s in found if s.size]
        found.sort(key=lambda s: (-s.size, s.site.split(":")[0] != path, s.site.split(":")[0], int(s.site.split(":")[1])))
        unique: list[CallSite] = []
        seen: set[str] = set()
        for s in found:
            key = repr((s.args, s.init))
            if key not in seen:
                seen.add(key)
                unique.append(s)
        return unique[:MAX_SITES]


def _enclosing(tree: ast.Module) -> Iterator[tuple[ast.Call, ast.AST | None, ast.ClassDef | None]]:
    """Every call with its innermost function (None at module level) and class."""

    def walk(node: ast.AST, fn: ast.AST | None, cls: ast.ClassDef | None) -> Iterator[tuple[ast.Call, ast.AST | None, ast.ClassDef | None]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, child, cls)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, fn, child)
            else:
                if isinstance(child, ast.Call):
                    yield child, fn, cls
                yield from walk(child, fn, cls)

    yield from walk(tree, None, None)


def _sites_in(caller: str, text: str, tree: ast.Module, target: Target) -> Iterator[CallSite]:
    same_file = caller == target.path
    imports = read_imports(tree, caller, target.path)
    if not same_file and not imports.subject and not imports.subject_modules:
        return
    module_scope = scope_of(tree.body)
    scopes: dict[int, Scope] = {}
    refs = _References(imports, same_file, target)
    for call, fn, cls in _enclosing(tree):
        if same_file and fn is not None and getattr(fn, "name", None) == target.name and (cls.name if cls else None) == target.cls:
            continue  # the function calling itself says nothing about its inputs
        scope = module_scope if fn is None else scopes.setdefault(id(fn), scope_of(fn.body))  # type: ignore[attr-defined]
        matched = refs.match(call, scope, cls)
        if matched is None:
            continue
        ctor, method_call = matched
        site = _site(caller, text, call, ctor, method_call, target, imports, scope, module_scope, same_file)
        if site is not None:
            yield site


class _References:
    """Which expressions reach the reviewed function (or its class) from a caller file."""

    def __init__(self, imports: Imports, same_file: bool, target: Target) -> None:
        self.imports = imports
        self.same_file = same_file
        self.target = target

    def _is(self, node: ast.expr, name: str) -> bool:
        if isinstance(node, ast.Name):
            return (self.same_file and node.id == name) or self.imports.subject.get(node.id) == name
        return isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name) and node.value.id in self.imports.subject_modules

    def _constructor(self, node: ast.expr, scope: Scope, line: int) -> ast.Call | None:
        """The `Cls(...)` call an expression's value comes from, if it does."""
        assert self.target.cls is not None
        if isinstance(node, ast.Call) and self._is(node.func, self.target.cls):
            return node
        if isinstance(node, ast.Name):
            bound = scope.last_before(node.id, line)
            if bound is not None and bound[1] is None:
                return self._constructor(bound[0], scope, line)
        return None

    def match(self, call: ast.Call, scope: Scope, cls: ast.ClassDef | None) -> tuple[ast.Call | None, ast.Call | None] | None:
        """(constructor call, method call) for a call of the target; None when it is not one."""
        t = self.target
        if t.cls is None:
            return (None, call) if self._is(call.func, t.name) else None
        if t.name == "__init__":
            return (None, call) if self._is(call.func, t.cls) else None
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == t.name:
            if self.same_file and cls is not None and cls.name == t.cls and isinstance(func.value, ast.Name) and func.value.id == "self":
                return None, call
            ctor = self._constructor(func.value, scope, call.lineno)
            return (ctor, call) if ctor is not None else None
        if t.name in ("forward", "__call__") and not isinstance(func, ast.Attribute):
            ctor = self._constructor(func, scope, call.lineno)
            return (ctor, call) if ctor is not None else None
        return None


def _bind(call: ast.Call, params: tuple[str, ...]) -> dict[str, ast.expr] | None:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    positional = params[: params.index("*")] if "*" in params else params
    if len(call.args) > len(positional):
        return None
    bound = dict(zip(positional, call.args))
    for keyword in call.keywords:
        if keyword.arg in params and keyword.arg != "*":
            bound[keyword.arg] = keyword.value
    return bound


def _site(
    caller: str, text: str, call: ast.Call, ctor: ast.Call | None, method_call: ast.Call | None, target: Target,
    imports: Imports, scope: Scope, module_scope: Scope, same_file: bool,
) -> CallSite | None:
    if target.name == "__init__":
        args_bound, init_bound = _bind(call, target.params), {}
    else:
        args_bound = _bind(method_call, target.params) if method_call is not None else {}
        init_bound = _bind(ctor, target.init_params) if ctor is not None else {}
    if args_bound is None or init_bound is None:
        return None
    passed = {e.id: p for p, e in args_bound.items() if isinstance(e, ast.Name)}
    passed.update({e.id: f"init:{p}" for p, e in init_bound.items() if isinstance(e, ast.Name)})
    translator = Translator(imports, scope, module_scope, call.lineno, passed, set(target.definitions), same_file)

    def read(bound: dict[str, ast.expr]) -> dict[str, dict[str, Any]]:
        out = {}
        for param, expr in bound.items():
            try:
                spec = translator.spec(expr, top=True)
            except (Untranslatable, RecursionError):
                continue
            words = " ".join((ast.get_source_segment(text, expr) or param).split())
            words = words if len(words) <= MAX_TEXT else words[: MAX_TEXT - 1] + "…"
            out[param] = {"text": words, "spec": spec, "role": role_of(spec, set(target.module_classes))}
        return out

    args = read(args_bound)
    init = read(init_bound)
    return CallSite(f"{caller}:{call.lineno}", args, init, tuple(sorted(translator.uses)))
