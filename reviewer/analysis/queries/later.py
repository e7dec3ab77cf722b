"""What a caller does after a call, read off the file once: the names it binds the result
to, and the names the code after the call reads (in its block, the blocks around it and, in
a loop, the next iteration)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from review_copies.analysis.parse import ParsedFile
from review_copies.analysis.syntax import code_of, names_in


def assigned_names(file: ParsedFile) -> dict[cst.Call, set[str]]:
    """For calls that are the value of an assignment: the names they are assigned to (and the
    code of item targets, `s[i]`)."""

    def compute() -> dict[cst.Call, set[str]]:
        found: dict[cst.Call, set[str]] = {}

        class _Assigns(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                if isinstance(node.value, cst.Call):
                    names: set[str] = set()
                    for target in node.targets:
                        t = target.target
                        elements = [e.value for e in t.elements] if isinstance(t, (cst.Tuple, cst.List)) else [t]
                        names |= {e.value for e in elements if isinstance(e, cst.Name)}
                        names |= {code_of(e) for e in elements if isinstance(e, cst.Subscript)}
                    found[node.value] = names

        file.module.visit(_Assigns())
        return found

    return file.once("assigned_names", compute)


def read_later(file: ParsedFile) -> dict[cst.Call, frozenset[str]]:
    """For calls that are a statement, the value of an assignment or of a return: the names that the code after that
    statement reads, in its own block, the blocks around it and (in a loop) the next
    iteration, up to the enclosing function."""

    def compute() -> dict[cst.Call, frozenset[str]]:
        out: dict[cst.Call, frozenset[str]] = {}
        _walk_block(file.module.body, frozenset(), out)
        return out

    return file.once("read_later", compute)


def _walk_block(body: Sequence[cst.CSTNode], after: frozenset[str], out: dict[cst.Call, frozenset[str]]) -> None:
    suffix: list[frozenset[str]] = [after] * (len(body) + 1)
    for i in range(len(body) - 1, -1, -1):
        suffix[i] = suffix[i + 1] | names_in(body[i])
    for i, stmt in enumerate(body):
        later = suffix[i + 1]
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.Expr)) and isinstance(small.value, cst.Call):
                    out[small.value] = later
                elif isinstance(small, cst.Return) and isinstance(small.value, cst.Call):
                    out[small.value] = frozenset()  # `return f(x)`: the caller reads nothing after it
            continue
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            later = frozenset()
        elif isinstance(stmt, (cst.For, cst.While)):
            later = later | _carried(stmt)
        for suite in _suites(stmt):
            _walk_block(suite, later, out)


def _carried(loop: cst.For | cst.While) -> frozenset[str]:
    """The names a loop's next iteration may read before binding them anew: all of its names
    but those its target binds (`for refs in batches:`) or a plain assignment at the top of
    its body binds before any read (`ref_stats = pad(refs)`, then passed along)."""
    bound: set[str] = set(names_in(loop.target)) if isinstance(loop, cst.For) else set()
    read: set[str] = set(names_in(loop.iter if isinstance(loop, cst.For) else loop.test))
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    for stmt in body:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        if isinstance(small, cst.Assign) and all(isinstance(t.target, cst.Name) for t in small.targets):
            read |= names_in(small.value) - bound
            bound |= {t.target.value for t in small.targets if isinstance(t.target, cst.Name)}
        else:
            read |= names_in(stmt) - bound
    if loop.orelse is not None:
        read |= names_in(loop.orelse)
    return frozenset(read)


def _suites(node: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    """The statement lists directly inside a compound statement (body, else, handlers...)."""
    for child in node.children:
        if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            yield child.body
        elif not isinstance(child, cst.BaseStatement):
            yield from _suites(child)


def number_constants(file: ParsedFile) -> frozenset[str]:
    """Names the module binds, at its top level, only to number literals (`BATCH_SIZE = 12`):
    what a call passes under such a name is a number, which no callee writes into."""

    def compute() -> frozenset[str]:
        numbers: set[str] = set()
        others: set[str] = set()
        for stmt in file.module.body:
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.Assign):
                    number = isinstance(small.value, (cst.Integer, cst.Float))
                    for target in small.targets:
                        if isinstance(target.target, cst.Name):
                            (numbers if number else others).add(target.target.value)
        return frozenset(numbers - others)

    return file.once("number_constants", compute)

