"""Which arguments the repository's calls pass as NumPy arrays: read off each call when the
index records a file's facts (`an_array`), and asked of all the calls of a function
(`callers_pass_arrays`) when an annotation says `torch.Tensor` of what arrives."""

from __future__ import annotations

import ast
import re
from typing import Any, Protocol


class _Index(Protocol):
    def paths_mentioning(self, word: str) -> list[str]: ...

    def facts(self, path: str) -> dict[str, Any] | None: ...


class _Signature(Protocol):
    def admits(self, call: dict[str, Any]) -> bool: ...


# NumPy functions whose result is an array.
_NUMPY_ARRAYS = frozenset("array asarray ascontiguousarray zeros ones empty full zeros_like ones_like empty_like full_like stack concatenate load arange linspace eye copy".split())


def annotated_arrays(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[frozenset[str], frozenset[str]]:
    """The parameters annotated as a NumPy array (`x: np.ndarray`), and those annotated as a
    list or sequence of them (`w2c_list: List[np.ndarray]`)."""
    arrays, lists = set(), set()
    a = fn.args
    for p in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        text = ast.unparse(p.annotation) if p.annotation is not None else ""
        if re.fullmatch(r"(np|numpy)\.ndarray", text):
            arrays.add(p.arg)
        elif re.fullmatch(r"(typing\.)?(List|list|Sequence|Tuple|tuple)\[(np|numpy)\.ndarray(, \.\.\.)?\]", text):
            lists.add(p.arg)
    return frozenset(arrays), frozenset(lists)


def an_array(expr: ast.expr, binds: dict[str, list[ast.expr]], annotated: tuple[frozenset[str], frozenset[str]], depth: int = 0) -> bool:
    """Is what a call passes surely a NumPy array: `t.cpu().numpy()`, `np.stack(...)`, a
    parameter annotated `np.ndarray`, an item of one annotated `List[np.ndarray]`, or a name
    bound only so?"""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "numpy" and not expr.args:
            return True
        return isinstance(expr.func.value, ast.Name) and expr.func.value.id in ("np", "numpy") and expr.func.attr in _NUMPY_ARRAYS
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and isinstance(expr.slice, (ast.Name, ast.Constant, ast.BinOp)):
        return expr.value.id in annotated[1]
    if isinstance(expr, ast.Name):
        if expr.id in annotated[0]:
            return True
        exprs = binds.get(expr.id)
        return bool(exprs) and depth < 3 and all(an_array(e, binds, annotated, depth + 1) for e in exprs)
    return False


def callers_pass_arrays(index: _Index, name: str, position: int | None, keyword: str | None, accepts: _Signature | None = None) -> bool:
    """Whether every call of `name` in the repository that passes the parameter at
    `position` (after `self` for a method) or `keyword` passes a NumPy array there
    (`t.cpu().numpy()`, `np.stack(...)`, an item of a `List[np.ndarray]`), and there is
    one: an annotation that says `torch.Tensor` is then wrong about what arrives."""
    seen = False
    for path in index.paths_mentioning(f"{name}("):
        for call in (index.facts(path) or {}).get("calls", []):
            if call["callee"] != name or (accepts is not None and not accepts.admits(call)):
                continue
            if keyword is not None and keyword in call["kw"]:
                where: int | str = keyword
            elif position is not None and position < len(call["pos"]) and not call.get("spread"):
                where = position
            else:
                continue
            if where not in call.get("arrays", ()):
                return False
            seen = True
    return seen
