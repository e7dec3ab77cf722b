"""A caller's argument, read as text, turned into a value the probe process can build: a
small JSON language of constants, torch factories and layers, optimizers, loaders, the
reviewed file's own classes, and calls and methods on those.

    torch.randn(64, 10, requires_grad=True)   {"k": "call", "fn": "torch.randn", "args": [64, 10], "kwargs": {"requires_grad": true}}
    nn.Linear(10, 2).to(device)                {"k": "to_device", "on": {"k": "call", "fn": "torch.nn.Linear", ...}}
    optim.SGD(model.parameters(), lr=0.1)      {"k": "call", "fn": "torch.optim.SGD", "args": [{"k": "method", "on": {"k": "same_as", ...}, ...}]}

Nothing here runs the caller's code: names are followed to the assignment that binds them
in the caller's scope (the last one before the call), and anything outside the language
(a file read, a call into another module of the repository) makes the argument unknown,
so the probe falls back on inputs it invents. The probe process builds the value
(`worker.inputs.callers`) inside the sandbox.

Runs in the reviewer's process, with `ast`: a caller file is read once and only for its
call sites, where libcst's concrete tree would cost ten times as much for nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from review_copies.sandbox.protocol import DENIED_TORCH_NAMES

Spec = dict[str, Any]
MAX_DEPTH = 6
_CONSTANTS = (int, float, bool, str, type(None))
_DEVICE_NAMES = frozenset(("device", "dev", "rank", "local_rank", "gpu", "cuda_device"))
# Where a name imported from torch lives: `from torch.nn import Linear` -> torch.nn.Linear.
_TORCH_PREFIXES = ("torch",)


class Untranslatable(Exception):
    """The argument uses something outside the language: it stays unknown."""


@dataclass
class Imports:
    """What the caller file's names stand for: torch modules and objects by their dotted
    name, and the reviewed file's definitions (`file:Name`)."""

    torch: dict[str, str] = field(default_factory=dict)  # local name -> dotted torch name
    subject: dict[str, str] = field(default_factory=dict)  # local name -> name in the reviewed file
    subject_modules: set[str] = field(default_factory=set)  # local names of the reviewed module


def module_names(path: str) -> set[str]:
    """The dotted names a file may be imported as: every suffix of its path (`src/pkg/m.py`
    is `src.pkg.m`, `pkg.m` or `m`, depending on what is on the path)."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return {".".join(parts[i:]) for i in range(len(parts)) if parts[i:]}


def _package_of(path: str, level: int) -> str:
    parts = path.split("/")[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    return ".".join(parts)


def read_imports(tree: ast.Module, caller_path: str, subject_path: str) -> Imports:
    """Imports anywhere in the file (a test imports inside its function too)."""
    imports = Imports()
    targets = module_names(subject_path)
    same_file = caller_path == subject_path
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                if alias.name.split(".")[0] in _TORCH_PREFIXES:
                    imports.torch[local] = alias.name if alias.asname else alias.name.split(".")[0]
                if alias.name in targets and not same_file:
                    if alias.asname:
                        imports.subject_modules.add(alias.asname)
                    elif "." not in alias.name:
                        imports.subject_modules.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(caller_path, node.level)
                base = ".".join(p for p in (package, base) if p)
            for alias in node.names:
                local = alias.asname or alias.name
                if base.split(".")[0] in _TORCH_PREFIXES and node.level == 0:
                    imports.torch[local] = f"{base}.{alias.name}"
                elif base in targets and not same_file:
                    imports.subject[local] = alias.name
                elif f"{base}.{alias.name}" in targets and not same_file:
                    imports.subject_modules.add(local)
    return imports


# ------------------------------------------------------------------ scopes


@dataclass
class Scope:
    """Simple bindings of one function (or the module): name -> (line, how it is bound)."""

    bindings: dict[str, list[tuple[int, Spec | ast.expr, ast.expr | None]]] = field(default_factory=dict)

    def bind(self, name: str, line: int, value: ast.expr, loop_index: ast.expr | None = None) -> None:
        self.bindings.setdefault(name, []).append((line, value, loop_index))

    def last_before(self, name: str, line: int) -> tuple[ast.expr, ast.expr | None] | None:
        found = [(ln, v, i) for ln, v, i in self.bindings.get(name, []) if ln < line]
        if not found:
            return None
        _, value, index = max(found, key=lambda b: b[0])
        assert isinstance(value, ast.expr)
        return value, index


_LOOP_ITEM = ast.Constant(value="__item__")


def scope_of(body: list[ast.stmt]) -> Scope:
    """The bindings of a body, not descending into nested functions or classes."""
    scope = Scope()

    def targets(target: ast.expr, value: ast.expr, line: int, index: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            scope.bind(target.id, line, value, index)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, element in enumerate(target.elts):
                targets(element, value, line, ast.Constant(value=i) if index is None else ast.Tuple(elts=[index, ast.Constant(value=i)]))

    def walk(stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                targets(stmt.targets[0], stmt.value, stmt.lineno, None)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets(stmt.target, stmt.value, stmt.lineno, None)
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                # The loop's first element: `for x, y in loader` binds x to loader's first item's [0].
                element = ast.Subscript(value=stmt.iter, slice=_LOOP_ITEM, ctx=ast.Load())
                targets(stmt.target, element, stmt.lineno, None)
            elif isinstance(stmt, ast.With):
                for item in stmt.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars, item.context_expr, stmt.lineno, None)
            for child in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, child, None)
                if isinstance(inner, list) and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    walk(inner)
            for handler in getattr(stmt, "handlers", []) or []:
                walk(handler.body)

    walk(body)
    return scope


# ------------------------------------------------------------------ translation


class Translator:
    """Turns one call site's argument expressions into specs."""

    def __init__(self, imports: Imports, scope: Scope, module_scope: Scope, line: int, passed: dict[str, str], subject_names: set[str], same_file: bool) -> None:
        self.imports = imports
        self.scope = scope
        self.module_scope = module_scope
        self.line = line
        self.passed = passed  # local name passed straight as an argument -> the parameter it becomes
        self.subject_names = subject_names  # definitions the reviewed file has (classes, functions)
        self.same_file = same_file
        self.uses: set[str] = set()  # reviewed-file names the specs build from

    def spec(self, node: ast.expr, depth: int = 0, top: bool = False) -> Spec:
        if depth > MAX_DEPTH:
            raise Untranslatable("too deep")
        if isinstance(node, ast.Constant) and isinstance(node.value, _CONSTANTS):
            return {"k": "const", "v": node.value}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float)):
            return {"k": "const", "v": -node.operand.value}
        if isinstance(node, (ast.Tuple, ast.List)):
            return {"k": "tuple" if isinstance(node, ast.Tuple) else "list", "items": [self.spec(e, depth + 1) for e in node.elts]}
        if isinstance(node, ast.Dict):
            items = []
            for key, value in zip(node.keys, node.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, (str, int))):
                    raise Untranslatable("dict key")
                items.append([key.value, self.spec(value, depth + 1)])
            return {"k": "dict", "items": items}
        if isinstance(node, ast.Name):
            return self._name(node, depth, top)
        if isinstance(node, ast.Attribute):
            dotted = self.dotted(node)
            if dotted and dotted.startswith("torch.") and _dtype_name(dotted):
                return {"k": "dtype", "v": _dtype_name(dotted)}
            raise Untranslatable("attribute")
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.BinOp) and type(node.op).__name__ in _BINOPS:
            return {"k": "binop", "op": _BINOPS[type(node.op).__name__], "left": self.spec(node.left, depth + 1), "right": self.spec(node.right, depth + 1)}
        if isinstance(node, ast.Subscript) and node.slice is _LOOP_ITEM:
            return {"k": "item", "of": self.spec(node.value, depth + 1)}
        raise Untranslatable(type(node).__name__)

    def _name(self, node: ast.Name, depth: int, top: bool) -> Spec:
        if not top and node.id in self.passed:
            return {"k": "same_as", "param": self.passed[node.id]}
        if node.id in ("True", "False", "None"):
            return {"k": "const", "v": {"True": True, "False": False, "None": None}[node.id]}
        for scope in (self.scope, self.module_scope):
            bound = scope.last_before(node.id, self.line if scope is self.scope else 1 << 30)
            if bound is not None:
                value, index = bound
                spec = self.spec(value, depth + 1)
                return _indexed(spec, index)
        raise Untranslatable(f"unbound {node.id}")

    def dotted(self, node: ast.expr) -> str | None:
        """The canonical dotted name of a reference to torch (`nn.Linear` -> torch.nn.Linear)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        head = self.imports.torch.get(node.id)
        if head is None:
            return None
        return ".".join([head, *reversed(parts)])

    def _callee(self, func: ast.expr) -> str | None:
        """`torch.X...` for torch, `file:Name` for a definition of the reviewed file."""
        dotted = self.dotted(func)
        if dotted is not None:
            return dotted
        if isinstance(func, ast.Name):
            if func.id in self.imports.subject:
                return f"file:{self.imports.subject[func.id]}"
            if self.same_file and func.id in self.subject_names:
                return f"file:{func.id}"
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.imports.subject_modules:
            return f"file:{func.attr}"
        return None

    def _call(self, node: ast.Call, depth: int) -> Spec:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise Untranslatable("star arguments")
        callee = self._callee(node.func)
        if callee is not None:
            if callee.startswith("file:"):
                if callee[5:] not in self.subject_names:
                    raise Untranslatable(f"{callee} is not in the reviewed file")
                self.uses.add(callee[5:])
            elif callee == "torch.device" or callee.endswith(".cuda.current_device"):
                return {"k": "device"}
            elif any(part.startswith("_") or part in DENIED_TORCH_NAMES for part in callee.split(".")[1:]):
                raise Untranslatable(f"{callee} is not built in the sandbox")
            return {"k": "call", "fn": callee, **self._arguments(node, depth)}
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in ("to", "cuda") and self._device_move(node):
                return {"k": "to_device", "on": self.spec(func.value, depth + 1)}
            return {"k": "method", "name": func.attr, "on": self.spec(func.value, depth + 1), **self._arguments(node, depth)}
        return {"k": "invoke", "on": self.spec(func, depth + 1), **self._arguments(node, depth)}

    def _device_move(self, node: ast.Call) -> bool:
        """`.cuda()`, `.to(device)`, `.to("cuda:0")`: the probe puts values on its own device."""
        if isinstance(node.func, ast.Attribute) and node.func.attr == "cuda":
            return True
        args = list(node.args) + [k.value for k in node.keywords if k.arg == "device"]
        if not args:
            return False
        first = args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.split(":")[0] in ("cuda", "cpu", "mps")
        if isinstance(first, ast.Name):
            return first.id.lower() in _DEVICE_NAMES or first.id.lower().endswith("device")
        if isinstance(first, ast.Attribute):
            return first.attr.lower().endswith("device")
        if isinstance(first, ast.Call):
            return self._callee(first.func) == "torch.device"
        return False

    def _arguments(self, node: ast.Call, depth: int) -> dict[str, Any]:
        return {
            "args": [self.spec(a, depth + 1) for a in node.args],
            "kwargs": {k.arg: self.spec(k.value, depth + 1) for k in node.keywords if k.arg is not None},
        }


_BINOPS = {"Add": "+", "Sub": "-", "Mult": "*", "Div": "/", "MatMult": "@", "Pow": "**", "FloorDiv": "//", "Mod": "%"}
_DTYPES = frozenset(
    "float float32 float64 double half float16 bfloat16 int int32 int64 long short int16 int8 uint8 bool complex64 complex128 cfloat cdouble".split()
)


def _dtype_name(dotted: str) -> str | None:
    name = dotted.rsplit(".", 1)[-1]
    return name if dotted.count(".") == 1 and name in _DTYPES else None


def _indexed(spec: Spec, index: ast.expr | None) -> Spec:
    """The part of a tuple-unpacked value a name got (`x, y = batch` -> batch[0])."""
    for i in _index_path(index):
        spec = {"k": "index", "of": spec, "i": i}
    return spec


def _index_path(index: ast.expr | None) -> Iterator[int]:
    if index is None:
        return
    if isinstance(index, ast.Tuple):
        for part in index.elts:
            yield from _index_path(part)
    elif isinstance(index, ast.Constant) and isinstance(index.value, int):
        yield index.value


def role_of(spec: Spec, module_classes: set[str]) -> str:
    """What the built value will be used as, for the probe's bookkeeping (models first,
    optimizers paired with them, loaders iterated a few steps)."""
    while spec.get("k") == "to_device" or (spec.get("k") == "method" and spec.get("name") in ("train", "eval", "float", "double")):
        spec = spec["on"]
    if spec.get("k") != "call":
        return "value"
    fn = str(spec.get("fn", ""))
    name = fn.rsplit(".", 1)[-1].removeprefix("file:")
    if fn.startswith("torch.optim.") and fn.count(".") == 2:
        return "optimizer"
    if fn.endswith("DataLoader"):
        return "loader"
    if fn.startswith("torch.nn.") and name[:1].isupper() and not name.endswith("Loss") and fn.count(".") == 2:
        return "model"
    if fn.startswith("file:") and name in module_classes:
        return "model"
    return "value"
