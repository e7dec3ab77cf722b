"""Where code runs with autograd off, as the index reads it from Python's tree: a decorator,
a `with` block, or a `torch.set_grad_enabled(False)` statement that turns it off for the
rest of its block."""

from __future__ import annotations

import ast
from collections.abc import Iterator

_GRAD_OFF = ("no_grad", "inference_mode")


def turns_grad_off(expr: ast.expr) -> bool:
    """`torch.no_grad()`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    if name in _GRAD_OFF:
        return True
    return (
        name == "set_grad_enabled"
        and isinstance(expr, ast.Call)
        and bool(expr.args)
        and isinstance(expr.args[0], ast.Constant)
        and expr.args[0].value is False
    )


def grad_off(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`@torch.no_grad()`, `@torch.inference_mode()`: the body, and what it returns, carry no graph."""
    return any(turns_grad_off(d) for d in fn.decorator_list)


def grad_off_spans(nodes: list[ast.AST]) -> list[tuple[int, int]]:
    """The lines that run with autograd off: `with torch.no_grad():` blocks, the bodies of
    nested functions decorated so, and what follows `torch.set_grad_enabled(False)` in its
    block up to a statement that sets the mode again (deeplab-pytorch's `main`, which turns
    grad off before it loads the model and infers)."""
    spans = []
    # The statement lists: the given one, and every body and else-arm inside it.
    blocks = [[n for n in nodes if isinstance(n, ast.stmt)]] if all(isinstance(n, ast.stmt) for n in nodes) else []
    for node in (n for top in nodes for n in ast.walk(top)):
        off = (
            any(turns_grad_off(item.context_expr) for item in node.items)
            if isinstance(node, (ast.With, ast.AsyncWith))
            else isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and grad_off(node)
        )
        if off:
            spans.append((node.lineno, node.end_lineno or node.lineno))
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and all(isinstance(s, ast.stmt) for s in block):
                blocks.append(block)
    modes = [span for block in blocks for span in _set_modes(block)]
    on = [(s, e) for s, e, turned_off in modes if not turned_off]
    for start, end, turned_off in modes:
        if turned_off:
            spans.extend(_minus(start, end, on))
    return spans


def _minus(start: int, end: int, holes: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """The lines from `start` to `end` outside every hole that opens after `start`: a
    nested block that turns grad back on."""
    for s, e in sorted(h for h in holes if start < h[0] <= end):
        if s > start:
            yield start, s - 1
        start = max(start, e + 1)
    if start <= end:
        yield start, end


def _set_modes(block: list[ast.stmt]) -> Iterator[tuple[int, int, bool]]:
    """Each run of the block's statements that `torch.set_grad_enabled(...)` starts, to the
    next such statement or the block's end, and whether it turns grad off."""
    start: int | None = None
    off = False
    for stmt in block:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and _callee(stmt.value) == "set_grad_enabled":
            if start is not None:
                yield start, stmt.lineno - 1, off
            start, off = stmt.lineno, turns_grad_off(stmt.value)
    if start is not None:
        yield start, block[-1].end_lineno or block[-1].lineno, off


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
