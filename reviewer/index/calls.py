"""The calls of a function that the index knows, each with what it passes for one parameter:
the walk that both `RepoIndex.callers_drop` and `arrays.callers_pass_arrays` ask their
question over."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from review_copies.analysis.parse import is_test_path


class CallIndex(Protocol):
    def paths_mentioning(self, word: str) -> list[str]: ...

    def facts(self, path: str) -> dict[str, Any] | None: ...


class Admits(Protocol):
    def admits(self, call: dict[str, Any]) -> bool: ...


class Reaches(Protocol):
    def __call__(self, path: str, call: dict[str, Any]) -> bool: ...


def calls_passing(
    index: CallIndex, name: str, position: int | None, keyword: str | None, accepts: Admits | None = None, reaches: Reaches | None = None
) -> Iterator[tuple[str, dict[str, Any], int | str]]:
    """Each call of `name` in the repository (that could bind to `accepts`, and that
    `reaches` the function, when given) that passes the parameter at `position` (after
    `self` for a method) or as `keyword`, with its file and where it passes it: the
    keyword, else the position. A call that passes neither (a default, or `*args`) is left out."""
    for path in index.paths_mentioning(f"{name}("):
        for call in (index.facts(path) or {}).get("calls", []):
            if call["callee"] != name or (accepts is not None and not accepts.admits(call)):
                continue
            if reaches is not None and not reaches(path, call):
                continue
            if keyword is not None and keyword in call["kw"]:
                yield path, call, keyword
            elif position is not None and position < len(call["pos"]):
                yield path, call, position


def reaching(index: CallIndex, owner: tuple[str, str] | None) -> Reaches | None:
    """For a method of `owner` (file, class): whether a call may reach it. `super().m(...)`
    reaches a base class's `m`: never the caller's own class's, and a class's only when the
    caller's class derives from it (a base the repository does not define, such as
    `nn.Module`, cannot)."""
    if owner is None:
        return None

    def reaches(path: str, call: dict[str, Any]) -> bool:
        mro = call.get("super")
        if not mro:
            return True
        return (path, mro[0]) != owner and derives(index, mro[1:], owner[1], frozenset(mro[:1]))

    return reaches


def derives(index: CallIndex, bases: list[str], cls: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether a class with these bases may derive from a class named `cls`; a base defined
    more than once counts when any of its definitions does."""
    for base in bases:
        if base == cls:
            return True
        if base in seen:
            continue
        if any(derives(index, found.get("bases", []), cls, seen | {base}) for found in class_definitions(index, base)):
            return True
    return False


def class_definitions(index: CallIndex, name: str) -> Iterator[dict[str, Any]]:
    """The facts of each class the repository defines under `name`, one per file."""
    for path in index.paths_mentioning(f"class {name}"):
        found = (index.facts(path) or {}).get("classes", {}).get(name)
        if found is not None:
            yield found


def reading_again(
    index: CallIndex, name: str, position: int | None, keyword: str | None, accepts: Admits | None = None, reaches: Reaches | None = None
) -> tuple[str, int, str] | None:
    """A call of `name` that passes a name of its own for the parameter and reads that name
    again after the call: its file, line and the name. One outside the tests comes first;
    None when no call does."""
    found: list[tuple[bool, str, int, str]] = []
    for path, call, where in calls_passing(index, name, position, keyword, accepts, reaches):
        passed = passed_at(call, where)
        if _reads_again(call, passed):
            found.append((is_test_path(path), path, call["line"], passed))
    return min(found)[1:] if found else None


def relied_on(
    index: CallIndex, name: str, position: int | None, keyword: str | None, accepts: Admits | None = None, reaches: Reaches | None = None
) -> bool:
    """Whether a call of `name` throws the result away and reads again the name it passed
    for the parameter (`ops.scale_boxes(shape, bbox, ...)`, then `bbox` used): that caller
    wants the parameter changed, so writing into it is the function's contract."""
    return any(call.get("dropped") and _reads_again(call, passed_at(call, where)) for _, call, where in calls_passing(index, name, position, keyword, accepts, reaches))


def passed_at(call: dict[str, Any], where: int | str) -> str | None:
    """The name a call passes at `where` (a keyword, else a position); None for anything else."""
    return call["kw"][where] if isinstance(where, str) else call["pos"][where]


def _reads_again(call: dict[str, Any], passed: str | None) -> bool:
    """The caller reads again, itself, the name it passed (not only hands on its own parameter)."""
    return bool(passed) and passed in call["kept"] and passed not in call.get("through", ())
