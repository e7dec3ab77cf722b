"""Small questions about libcst nodes, asked in one way everywhere: the dotted name of an
expression, the names in a node, a statement's blocks, a node's source text, the value of a
keyword argument. Nothing here knows torch."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

_EMPTY_MODULE = cst.Module(body=())


def dotted(node: cst.CSTNode) -> str:
    """`a.b.c` for a name or a chain of attributes on a name; "" for anything else (`f().x`)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def opt_in_arm(test: cst.BaseExpression) -> int | None:
    """Which arm of a branch runs because the caller asked for in-place work: 0 (the body)
    for `if self.inplace:`, 1 (the else) for `if not inplace:`, None for any other test."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = opt_in_arm(test.expression)
        return None if inner is None else 1 - inner
    name = dotted(test).rpartition(".")[2].lower()
    return 0 if name and "inplace" in name.replace("_", "") else None  # `inplace`, `self.inplace_add`, `in_place`


def last(qualname: str) -> str:
    """`torch.nn.Linear` -> `Linear`."""
    return qualname.rsplit(".", 1)[-1]


def names_in(node: cst.CSTNode, *, attributes: bool = False, into_lambdas: bool = True) -> frozenset[str]:
    """Every name read or written in `node`; with `attributes`, also each dotted attribute
    chain (`self.buf`, `x.data`). A lambda's body is a separate scope: `into_lambdas=False`
    leaves it out."""
    found: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> None:
            if attributes:
                key = dotted(n)
                if key:
                    found.add(key)

        def visit_Lambda(self, n: cst.Lambda) -> bool:
            return into_lambdas

    node.visit(_Collect())
    return frozenset(found)


def variables_in(node: cst.CSTNode) -> frozenset[str]:
    """The names `node` reads or writes as variables: not an attribute's name (`grad1` of
    `param.grad1`), nor a keyword argument's (`dim` of `f(dim=1)`)."""
    found: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

        def visit_Arg(self, n: cst.Arg) -> bool:
            n.value.visit(self)
            return False

    node.visit(_Collect())
    return frozenset(found)


def name_nodes(node: cst.CSTNode) -> list[cst.Name]:
    """Every `Name` node under `node`, in order (for callers that need the nodes themselves,
    not only the names `names_in` gives)."""
    found: list[cst.Name] = []

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.append(n)

    node.visit(_Collect())
    return found


def bound_names(target: cst.CSTNode) -> Iterator[str]:
    """The names an assignment target binds: `a`, `a, (b, c)`, `self.x`."""
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for el in target.elements:
            yield from bound_names(el.value)
    elif isinstance(target, cst.Attribute):
        key = dotted(target)
        if key:
            yield key


def statement_bodies(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The statements directly inside a compound statement (all its blocks)."""
    for child in node.children:
        if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            yield from child.body
        elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)):
            yield from statement_bodies(child)


def item_key(node: cst.CSTNode) -> str:
    """`d[k]`, `batch["x"]`, `self.params[0]` as one key (a container's entry read by a name or
    a literal); "" for anything else (a slice, a computed index)."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return ""
    base, index = dotted(node.value), node.slice[0].slice.value
    if not base:
        return ""
    if isinstance(index, (cst.SimpleString, cst.Integer)):
        return f"{base}[{index.value}]"
    return f"{base}[{dotted(index)}]" if dotted(index) else ""


def code_of(node: cst.CSTNode) -> str:
    """The node's source text, as libcst prints it."""
    return _EMPTY_MODULE.code_for_node(node)


def short_code(node: cst.CSTNode, limit: int = 60) -> str:
    """The node's source on one line, cut at `limit` characters: for messages."""
    text = " ".join(code_of(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def keyword(node: cst.Call, name: str) -> cst.BaseExpression | None:
    """The value passed as `name=...`, if any."""
    for arg in node.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def keyword_is(node: cst.Call, name: str, literal: str) -> bool:
    """`f(..., name=True)` with `literal` "True" (or "False", "None") written out."""
    value = keyword(node, name)
    return isinstance(value, cst.Name) and value.value == literal


def retains_graph(node: cst.Call) -> bool:
    """`backward(retain_graph=True)`, `torch.autograd.grad(..., create_graph=True)`: the graph
    and the tensors it saved outlive the call (a flag that is a variable may be on)."""
    for name in ("retain_graph", "create_graph"):
        value = keyword(node, name)
        if value is not None and not (isinstance(value, cst.Name) and value.value in ("False", "None")):
            return True
    return False


def first_argument_false(node: cst.Call, keyword_name: str) -> bool:
    """`x.requires_grad_(False)` or `x.requires_grad_(requires_grad=False)`."""
    if node.args and node.args[0].keyword is None and isinstance(node.args[0].value, cst.Name):
        return node.args[0].value.value == "False"
    return keyword_is(node, keyword_name, "False")


def is_name(node: cst.CSTNode, *values: str) -> bool:
    return isinstance(node, cst.Name) and node.value in values


def call_method_name(node: cst.CSTNode) -> str | None:
    """`recv.name(...)` -> "name"."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value
    return None


def receiver_of(node: cst.Call) -> cst.BaseExpression:
    assert isinstance(node.func, cst.Attribute)
    return node.func.value


def transposed(node: cst.BaseExpression) -> bool:
    """`x.t()`, `x.transpose(0, 1)`, `x.permute(1, 0)`, `x.T`: a view with swapped strides.
    Two dims that may be the same one swap nothing: `x.transpose(1, -1)` of a 2-D tensor,
    `x.transpose(d, 1)`, `x.permute(0, 1)` are `x` itself."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        name = node.func.attr.value
        dims = [_int_literal(a.value) for a in node.args]
        if name in ("transpose", "swapaxes", "movedim"):
            if len(dims) != 2 or dims[0] is None or dims[1] is None:
                return False
            return (dims[0] < 0) == (dims[1] < 0) and dims[0] != dims[1]
        if name == "permute":
            known = [d for d in dims if d is not None and d >= 0]
            return len(dims) > 1 and len(known) == len(dims) and known != sorted(known)
        return name in ("t", "mT")
    return isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT")


def built_on_optimizer(cls: cst.ClassDef) -> bool:
    """`class Adasum(torch.optim.Optimizer)`: a class whose base is an optimizer."""
    return any(dotted(b.value).endswith("Optimizer") for b in cls.bases)


def sliced_inside(node: cst.BaseExpression) -> bool:
    """`x[:, a:b]`, `x[0, :, :k]`, `x[::2]`: a slice that keeps part of a dimension after one
    kept whole by `:`, or steps over elements. Short of a degenerate shape (a size-1
    dimension) the view is not contiguous, so `.contiguous()` of it copies; an advanced index
    among them copies already."""
    if not isinstance(node, cst.Subscript):
        return False
    whole_before = False
    for element in node.slice:
        index = element.slice
        if not isinstance(index, cst.Slice):
            continue
        if index.step is not None and not (isinstance(index.step, cst.Integer) and index.step.value == "1"):
            return True
        if index.lower is None and index.upper is None:
            whole_before = True
        elif whole_before:
            return True
    return False


def _int_literal(node: cst.BaseExpression) -> int | None:
    """The value of `1` or `-1`; None for anything else."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = _int_literal(node.expression)
        return -inner if inner is not None else None
    return int(node.value) if isinstance(node, cst.Integer) and node.value.isdigit() else None
