"""Lists, tuples and dicts of tensors: what iterating them yields, what their methods
return, and what `append` tells about what they hold."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.context import Context
from review_copies.analysis.events import Store
from review_copies.analysis.syntax import code_of, dotted, short_code
from review_copies.analysis.values import NONE, OTHER, UNKNOWN, Kind, Value


def element_of(iterable: Value, node: cst.BaseExpression) -> Value:
    """What one step of `for x in iterable` holds: a row of a tensor, an element of a list."""
    if iterable.kind is Kind.TENSOR:
        return iterable.but(roots=iterable.roots, via=iterable.via or "view", fresh=False, leaf=False, origin=f"a row of {code_of(node)}")
    if iterable.element is not None:
        return iterable.element
    return UNKNOWN


def call_container_method(cx: Context, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...]) -> Value:
    func = node.func
    assert isinstance(func, cst.Attribute)
    container = dotted(func.value) or code_of(func.value)
    if method in ("append", "add", "insert") and args:
        value = args[-1]
        value_node = node.args[-1].value if node.args else None
        cx.emit(Store, node, container=container, container_value=recv, value=value, how=method, value_node=value_node)
        _grow(cx, func.value, recv, value)
        return NONE
    if method == "extend" and args:
        cx.emit(Store, node, container=container, container_value=recv, value=args[0].element or args[0], how="extend", value_node=node.args[0].value)
        return NONE
    if method in ("update", "setdefault") and args:
        cx.emit(Store, node, container=container, container_value=recv, value=args[-1].element or args[-1], how=method, value_node=node.args[-1].value)
        return NONE
    if method == "copy":
        return recv.but(roots=cx.new_root(node, "dict"), fresh=True, via="shallow-copy", origin=f"`{short_code(node)}`")
    if method == "items":
        return Value(kind=Kind.LIST, element=Value(kind=Kind.TUPLE, items=(OTHER, recv.element or UNKNOWN)))
    if method == "values":
        return Value(kind=Kind.LIST, element=recv.element)
    if method in ("get", "pop"):
        return recv.element or UNKNOWN
    if method == "keys":
        return Value(kind=Kind.LIST, element=OTHER)
    return UNKNOWN


def _grow(cx: Context, node: cst.BaseExpression, recv: Value, value: Value) -> None:
    """After list.append(v), the list is known to hold things like v."""
    key = dotted(node)
    if key and key in cx.state:
        element = value.but(fresh=False) if recv.element is None else recv.element.join(value.but(fresh=False))
        if recv.items is not None and not recv.items:
            element = value.but(fresh=False)
        cx.state[key] = recv.but(element=element, items=None)
