"""Small sources through the dataflow model, for tests that assert what it knows."""

from __future__ import annotations

import textwrap

from review_copies.analysis.analyze import analyze_file
from review_copies.analysis.events import Event, FunctionFlow
from review_copies.analysis.parse import parse


def flows(source: str) -> dict[str, FunctionFlow]:
    parsed = parse("example.py", textwrap.dedent(source).lstrip("\n"))
    return {f.name: f for f in analyze_file(parsed)}


def flow(source: str, name: str = "f") -> FunctionFlow:
    return flows(source)[name]


def at(flow: FunctionFlow, kind: type[Event], line: int) -> list:
    return [e for e in flow.of(kind) if e.line == line]


def bound(flow: FunctionFlow, name: str) -> list:
    """Every binding of `name`, in order."""
    from review_copies.analysis.events import Bind

    return [e for e in flow.of(Bind) if e.name == name]
