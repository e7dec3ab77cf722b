"""Transform pipelines written in one file: which step feeds which.

`Compose([ToTensor(), Scale()])`, or a list of steps kept and run as `x = step(x)` in a
loop, hands each step the previous step's output. When that output is a tensor, the
next step's `__call__` receives a tensor even though nothing in its own body says so:
that is the only cross-function fact the dataflow model takes, because the pipeline
states it in the file itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst

from review_copies.analysis.syntax import dotted


@dataclass(frozen=True)
class Step:
    """A step of a pipeline after its first: `call` builds it, `previous` builds the step
    before it, `statement` is the statement line that makes the pipeline."""

    call: cst.Call
    previous: cst.Call
    statement: cst.CSTNode


def _steps(node: cst.BaseExpression) -> list[cst.Call] | None:
    if not isinstance(node, (cst.List, cst.Tuple)) or len(node.elements) < 2:
        return None
    calls = [el.value for el in node.elements if isinstance(el, cst.Element)]
    if len(calls) != len(node.elements) or not all(isinstance(c, cst.Call) and dotted(c.func) for c in calls):
        return None
    return calls  # type: ignore[return-value]


class _Finder(cst.CSTVisitor):
    """Lists of built steps, and the names of lists that a loop runs as `x = step(x)`."""

    def __init__(self) -> None:
        self.composed: list[tuple[cst.BaseExpression, cst.CSTNode]] = []
        self.kept: list[tuple[str, cst.BaseExpression, cst.CSTNode]] = []
        self.run_in_loop: set[str] = set()
        self.statement: cst.CSTNode | None = None

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.statement = node

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        # A Compose in a compound statement's header (`if`, `for`, a default) is not in the
        # last simple statement: its own node gives its line.
        self.statement = None

    def visit_Call(self, node: cst.Call) -> None:
        if dotted(node.func).rsplit(".", 1)[-1] == "Compose" and node.args and node.args[0].keyword is None:
            self.composed.append((node.args[0].value, self.statement or node))

    def visit_Assign(self, node: cst.Assign) -> None:
        if not isinstance(node.value, (cst.List, cst.Tuple)):
            return
        for target in node.targets:
            name = dotted(target.target)
            if name:
                self.kept.append((name, node.value, self.statement or node))

    def visit_For(self, node: cst.For) -> None:
        source = dotted(node.iter)
        if not source or not isinstance(node.target, cst.Name):
            return
        step = node.target.value
        for stmt in node.body.body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            for small in stmt.body:
                if _threads(small, step):
                    self.run_in_loop.add(source)


def _threads(small: cst.BaseSmallStatement, step: str) -> bool:
    """`x = step(x)`: the step's output becomes the next step's input."""
    if not isinstance(small, cst.Assign) or len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
        return False
    call = small.value
    if not isinstance(call, cst.Call) or dotted(call.func) != step or len(call.args) != 1:
        return False
    arg = call.args[0]
    return arg.keyword is None and not arg.star and isinstance(arg.value, cst.Name) and arg.value.value == small.targets[0].target.value


def pipeline_steps(module: cst.Module) -> Iterator[Step]:
    """Every step after the first of every pipeline in the module, in source order."""
    finder = _Finder()
    module.visit(finder)
    lists = finder.composed + [(value, node) for name, value, node in finder.kept if name in finder.run_in_loop]
    for value, node in lists:
        calls = _steps(value)
        if calls is None:
            continue
        for previous, call in itertools.pairwise(calls):
            yield Step(call, previous, node)
