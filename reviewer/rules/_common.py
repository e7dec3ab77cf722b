"""What more than one category needs: fixes that make the binding of an alias a copy or
write an in-place statement out of place, and what the reviewed change dropped from a
statement (from `analysis.change`), with the fix that puts it back."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.change import Dropped
from review_copies.analysis.events import Bind, FunctionFlow, Write
from review_copies.analysis.rewrite import atom, kwarg, method, out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import call_method_name, code_of
from review_copies.analysis.syntax import dotted as dotted_name
from review_copies.analysis.values import Kind


def attribute_source(expr: cst.BaseExpression) -> bool:
    """`bn.running_mean`, `self.weight`: a module's state, not a local tensor."""
    return isinstance(expr, cst.Attribute) and expr.attr.value not in ("data", "T", "mT", "H", "mH", "real", "imag")


def copy_at_binding(bind: Bind | None, ndarray: bool = False) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """Make the binding a copy: `b = a` -> `b = a.clone()`; `y = x.to(d)` -> `x.to(d, copy=True)`."""
    if bind is None or bind.expr is None:
        return None
    expr = bind.expr
    if call_method_name(expr) == "to" and isinstance(expr, cst.Call) and not any(a.keyword is not None and a.keyword.value == "copy" for a in expr.args):
        args = [*expr.args[:-1], expr.args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))] if expr.args else []
        return expr, expr.with_changes(args=[*args, kwarg("copy", cst.Name("True"))])
    if bind.value.kind is Kind.STATE_DICT:
        # A dict has no `.clone()`: copy each tensor it holds.
        return expr, cst.parse_expression(f"{{k: v.clone() for k, v in {code_of(atom(expr))}.items()}}")
    return expr, method(atom(expr), "copy" if ndarray else "clone")


def write_fix(write: Write, bind: Bind | None, ndarray: bool = False) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    return copy_at_binding(bind, ndarray) or out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor")


# ------------------------------------------------------------- what the change dropped


def dropped_at(flow: FunctionFlow, line: int, kinds: tuple[str, ...]) -> list[Dropped]:
    """Protections of `kinds` the reviewed change took off the statement at `line`."""
    if flow.change is None:
        return []
    return [d for d in flow.change.dropped_at(line) if d.what in kinds]


def dropped_words(dropped: list[Dropped]) -> str:
    """"the `.detach()`" or "the `.detach()` and `.cpu()`", as a message says it."""
    names = [f"`{d.what.rstrip(':')}`" if not d.what.endswith("(...)") else f"`{d.what}`" for d in dropped]
    return "the " + " and ".join(dict.fromkeys(names))


def restore(stmt: cst.CSTNode | None, dropped: list[Dropped]) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """The fix that puts the protection back: the statement as the base version wrote it
    (the change altered nothing else in it: only protections differ)."""
    if stmt is None or not dropped or any(d.what.startswith("with ") for d in dropped):
        return None
    try:
        line = cst.parse_statement(dropped[0].before + "\n")
    except cst.ParserSyntaxError:
        return None
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 or type(line.body[0]) is not type(stmt):
        return None
    return stmt, line.body[0]


def written_through(flow: FunctionFlow, name: str, after_line: int) -> cst.CSTNode | None:
    """The first statement after `after_line` that writes in place through `name` as
    written (`name += ...`, `name[i] = ...`, `name.op_(...)`), whatever the analysis knows
    of its value: for rules where the change itself says the value was a tensor."""
    if flow.scope is None:
        return None
    found: list[cst.CSTNode] = []
    file = flow.file

    def through(target: cst.BaseExpression) -> bool:
        while isinstance(target, (cst.Subscript, cst.Attribute)) and not (isinstance(target, cst.Attribute) and dotted_name(target) == name):
            target = target.value
        return dotted_name(target) == name

    class Find(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if through(node.target) and file.line_of(node) > after_line:
                found.append(node)

        def visit_Assign(self, node: cst.Assign) -> None:
            if any(isinstance(t.target, cst.Subscript) and through(t.target) for t in node.targets) and file.line_of(node) > after_line:
                found.append(node)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            method = func.attr.value if isinstance(func, cst.Attribute) else ""
            if api.is_inplace_method(method) and through(func.value) and file.line_of(node) > after_line:  # type: ignore[attr-defined]
                found.append(node)

    flow.scope.node.visit(Find())
    return min(found, key=file.line_of) if found else None
