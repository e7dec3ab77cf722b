"""Facts about one file's classes and functions, read with `ast` (libcst's concrete tree
would cost ten times as much for what the index keeps): for every method and function,
which parameters it writes in place, which it accumulates or stores on `self` (and into
which attribute), which it returns as they are. Plain JSON, so that it can be cached."""

from __future__ import annotations

import ast
from typing import Any

from review_copies.analysis.semantics import api

Facts = dict[str, Any]


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def function_facts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Facts:
    params = _params(fn)
    param_set = set(params)
    keeps: dict[str, list[Any]] = {}  # param -> [attr, line, how]
    writes: set[str] = set()
    returns: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign):
            attr = _self_attr(node.target)
            used = _names(node.value) & param_set
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
                used = _names(node.value) & param_set
                how = "accumulates" if f"self.{attr}" in ast.unparse(node.value) else "stores"
                for p in sorted(used):
                    keeps.setdefault(p, [attr, node.lineno, how])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            owner = node.func.value
            attr = _self_attr(owner)
            if attr and method in ("append", "extend", "add", "insert", "update", "__setitem__"):
                for arg in node.args:
                    for p in sorted(_names(arg) & param_set):
                        keeps.setdefault(p, [attr, node.lineno, "stores"])
            if isinstance(owner, ast.Name) and owner.id in param_set and api.is_inplace_method(method):
                writes.add(owner.id)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and node.value.id in param_set:
            returns.add(node.value.id)
    return {"params": params, "line": fn.lineno, "keeps": keeps, "writes": sorted(writes), "returns": sorted(returns)}


def file_facts(text: str) -> Facts:
    """{"classes": {name: {"line", "methods": {name: facts}}}, "functions": {name: facts}}."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {"classes": {}, "functions": {}}
    classes: dict[str, Facts] = {}
    functions: dict[str, Facts] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods = {m.name: function_facts(m) for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
            classes[node.name] = {"line": node.lineno, "methods": methods}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = function_facts(node)
    return {"classes": classes, "functions": functions}
