"""The calls of a function that the index knows, each with what it passes for one parameter:
the walk that both `RepoIndex.callers_drop` and `arrays.callers_pass_arrays` ask their
question over."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


class CallIndex(Protocol):
    def paths_mentioning(self, word: str) -> list[str]: ...

    def facts(self, path: str) -> dict[str, Any] | None: ...


class Admits(Protocol):
    def admits(self, call: dict[str, Any]) -> bool: ...


def calls_passing(index: CallIndex, name: str, position: int | None, keyword: str | None, accepts: Admits | None = None) -> Iterator[tuple[str, dict[str, Any], int | str]]:
    """Each call of `name` in the repository (that could bind to `accepts`, when given) that
    passes the parameter at `position` (after `self` for a method) or as `keyword`, with its
    file and where it passes it: the keyword, else the position. A call that passes neither
    (a default, or `*args`) is left out."""
    for path in index.paths_mentioning(f"{name}("):
        for call in (index.facts(path) or {}).get("calls", []):
            if call["callee"] != name or (accepts is not None and not accepts.admits(call)):
                continue
            if keyword is not None and keyword in call["kw"]:
                yield path, call, keyword
            elif position is not None and position < len(call["pos"]):
                yield path, call, position
