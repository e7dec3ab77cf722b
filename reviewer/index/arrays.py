"""Which arguments the repository's calls pass as NumPy arrays: read off each call when the
index records a file's facts (`an_array`), and asked of all the calls of a function
(`callers_pass_arrays`) when an annotation says `torch.Tensor` of what arrives."""

from __future__ import annotations

import ast
import re

from review_copies.index.calls import Admits, CallIndex, calls_passing

# NumPy functions whose result is an array.
_NUMPY_ARRAYS = frozenset("array asarray ascontiguousarray zeros ones empty full zeros_like ones_like empty_like full_like stack concatenate load arange linspace eye copy".split())
# Those whose array is always a new one (`np.asarray(a)` may be `a` itself).
_NEW_ARRAYS = _NUMPY_ARRAYS - {"asarray", "ascontiguousarray"}


def _numpy_function(expr: ast.expr) -> str | None:
    """`stack` of `np.stack(...)`: which NumPy function a call calls, if it calls one."""
    func = expr.func if isinstance(expr, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy") else None


def a_new_array(expr: ast.expr) -> bool:
    """`np.stack(patches)`, `np.zeros(n)`: a NumPy array no one else holds."""
    return _numpy_function(expr) in _NEW_ARRAYS


# What a function's signature and its file say are NumPy arrays: its parameters annotated
# `np.ndarray`, those annotated a list or sequence of them, and the file's module-level
# functions annotated to return one.
Annotated = tuple[frozenset[str], frozenset[str], frozenset[str]]
NOTHING_ANNOTATED: Annotated = (frozenset(), frozenset(), frozenset())

_ARRAY = r"(np|numpy)\.ndarray"


def annotated_arrays(fn: ast.FunctionDef | ast.AsyncFunctionDef, returning: frozenset[str] = frozenset()) -> Annotated:
    """The parameters annotated as a NumPy array (`x: np.ndarray`), those annotated as a
    list or sequence of them (`w2c_list: List[np.ndarray]`), and `returning`."""
    arrays, lists = set(), set()
    a = fn.args
    for p in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        text = ast.unparse(p.annotation) if p.annotation is not None else ""
        if re.fullmatch(_ARRAY, text):
            arrays.add(p.arg)
        elif re.fullmatch(rf"(typing\.)?(List|list|Sequence|Tuple|tuple)\[{_ARRAY}(, \.\.\.)?\]", text):
            lists.add(p.arg)
    return frozenset(arrays), frozenset(lists), returning


def array_functions(tree: ast.Module) -> frozenset[str]:
    """The module-level functions annotated to return a NumPy array (`def grid(n) ->
    np.ndarray`), or whose every `return` hands back one it made (LLM-ISR's
    `select_topk_neighboehood`: `graph = np.zeros(...)`, filled, `return graph`)."""
    return frozenset(
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (re.fullmatch(_ARRAY, ast.unparse(n.returns)) if n.returns is not None else _returns_arrays(n))
    )


def _returns_arrays(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    binds: dict[str, list[ast.expr]] = {}
    returns: list[ast.expr | None] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Return):
            returns.append(node.value)
        elif node is not fn and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False  # a nested function's returns would mix with its own
        else:
            record_binding(node, binds)
    return bool(returns) and all(value is not None and an_array(value, binds, NOTHING_ANNOTATED) for value in returns)


def record_binding(node: ast.AST, binds: dict[str, list[ast.expr]]) -> None:
    """Add what `node` binds to `binds`, for `an_array`: `name = value` records the value; a
    name bound another way (a loop's or a `with`'s target, a tuple, `+=`, `:=`) records a
    placeholder that is no array. Unlike `graphless.returns_no_graph`, a plain assignment
    inside a loop body keeps its value: `w = items[i]` there is still an item."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        binds.setdefault(node.targets[0].id, []).append(node.value)
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.NamedExpr)):
        for n in ast.walk(node.target if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)) else node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and not (isinstance(node, ast.Assign) and len(node.targets) == 1 and node.targets[0] is n):
                binds.setdefault(n.id, []).append(ast.Constant(value=None))


def an_array(expr: ast.expr, binds: dict[str, list[ast.expr]], annotated: Annotated, depth: int = 0) -> bool:
    """Is what a call passes surely a NumPy array: `t.cpu().numpy()`, `np.stack(...)`, a
    parameter annotated `np.ndarray`, an item of one annotated `List[np.ndarray]`, what a
    function of the file annotated `-> np.ndarray` returns, or a name bound only so?"""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return expr.func.id in annotated[2]
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "numpy" and not expr.args:
            return True
        return _numpy_function(expr) in _NUMPY_ARRAYS
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name) and isinstance(expr.slice, (ast.Name, ast.Constant, ast.BinOp)):
        return expr.value.id in annotated[1]
    if isinstance(expr, ast.Name):
        if expr.id in annotated[0]:
            return True
        exprs = binds.get(expr.id)
        return bool(exprs) and depth < 3 and all(an_array(e, binds, annotated, depth + 1) for e in exprs)
    return False


def callers_pass_arrays(index: CallIndex, name: str, position: int | None, keyword: str | None, accepts: Admits | None = None) -> bool:
    """Whether every call of `name` in the repository that passes the parameter at
    `position` (after `self` for a method) or `keyword` passes a NumPy array there
    (`t.cpu().numpy()`, `np.stack(...)`, an item of a `List[np.ndarray]`), and there is
    one: an annotation that says `torch.Tensor` is then wrong about what arrives. A call
    with `*args` is left out of the positional question: its positions are not known."""
    seen = False
    for _, call, where in calls_passing(index, name, position, keyword, accepts):
        if isinstance(where, int) and call.get("spread"):
            continue
        if where not in call.get("arrays", ()):
            return False
        seen = True
    return seen
