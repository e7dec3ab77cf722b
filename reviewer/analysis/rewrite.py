"""libcst builders for the rules' fixes: a method call on an expression, a keyword argument,
an in-place statement written out of place, a line wrapped in `with torch.no_grad():`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from review_copies.analysis.syntax import call_method_name, receiver_of

_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.SimpleString, cst.Integer, cst.Float, cst.List, cst.Tuple, cst.Dict)


def atom(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The expression, parenthesised if a method call on it would bind wrongly (a + b)."""
    if isinstance(expr, _ATOMS) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def method(receiver: cst.BaseExpression, name: str, args: Sequence[cst.Arg] = ()) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=atom(receiver), attr=cst.Name(name)), args=list(args))


def chain(receiver: cst.BaseExpression, *names: str) -> cst.BaseExpression:
    out = receiver
    for name in names:
        out = method(out, name)
    return out


def kwarg(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def clean_args(args: Sequence[cst.Arg]) -> list[cst.Arg]:
    """Arguments re-joined with ', ' (dropping one can leave a dangling comma)."""
    out = []
    for i, arg in enumerate(args):
        comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT
        out.append(arg.with_changes(comma=comma))
    return out


_AUG_TO_BINARY = {
    cst.AddAssign: cst.Add,
    cst.SubtractAssign: cst.Subtract,
    cst.MultiplyAssign: cst.Multiply,
    cst.DivideAssign: cst.Divide,
    cst.FloorDivideAssign: cst.FloorDivide,
    cst.ModuloAssign: cst.Modulo,
    cst.PowerAssign: cst.Power,
    cst.MatrixMultiplyAssign: cst.MatrixMultiply,
    cst.BitAndAssign: cst.BitAnd,
    cst.BitOrAssign: cst.BitOr,
    cst.BitXorAssign: cst.BitXor,
    cst.LeftShiftAssign: cst.LeftShift,
    cst.RightShiftAssign: cst.RightShift,
}


def _assign(target: cst.BaseAssignTargetExpression, value: cst.BaseExpression) -> cst.Assign:
    return cst.Assign(targets=[cst.AssignTarget(target=target)], value=value)


def out_of_place(stmt: cst.CSTNode | None, returns_tensor: Callable[[str], bool]) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """`t += v` -> `t = t + v`; `t.add_(v)` (a statement) -> `t = t.add(v)`.

    Only for a plain name or attribute target, so that the rebinding is all that changes."""
    if isinstance(stmt, cst.AugAssign) and isinstance(stmt.target, (cst.Name, cst.Attribute)):
        op = _AUG_TO_BINARY.get(type(stmt.operator))
        if op is None:
            return None
        value = stmt.value if isinstance(stmt.value, _ATOMS) else atom(stmt.value)
        new = _assign(stmt.target, cst.BinaryOperation(left=stmt.target, operator=op(), right=value))
        return stmt, new.with_changes(semicolon=stmt.semicolon)
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
        call = stmt.value
        name = call_method_name(call)
        receiver = receiver_of(call) if name else None
        if name and name.endswith("_") and isinstance(receiver, (cst.Name, cst.Attribute)) and returns_tensor(name[:-1]):
            new_call = call.with_changes(func=call.func.with_changes(attr=cst.Name(name[:-1])))  # type: ignore[union-attr]
            return stmt, _assign(receiver, new_call).with_changes(semicolon=stmt.semicolon)
    return None


def no_grad_block(line: cst.SimpleStatementLine, torch_name: str) -> cst.With:
    """Wrap one statement line in `with torch.no_grad():`."""
    return cst.With(
        items=[cst.WithItem(item=cst.Call(func=cst.Attribute(value=cst.Name(torch_name), attr=cst.Name("no_grad"))))],
        body=cst.IndentedBlock(body=[line.with_changes(leading_lines=[])]),
        leading_lines=line.leading_lines,
    )


def dotted_expr(dotted: str) -> cst.BaseExpression:
    head, *rest = dotted.split(".")
    expr: cst.BaseExpression = cst.Name(head)
    for part in rest:
        expr = cst.Attribute(value=expr, attr=cst.Name(part))
    return expr
