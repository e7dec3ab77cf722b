"""Small libcst builders shared by the rules' fixes."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

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


def is_name(node: cst.CSTNode, *values: str) -> bool:
    return isinstance(node, cst.Name) and node.value in values


def call_method_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value
    return None


def receiver_of(node: cst.Call) -> cst.BaseExpression:
    assert isinstance(node.func, cst.Attribute)
    return node.func.value
