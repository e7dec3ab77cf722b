"""Facts about the values a function is given, by path (`batch`, `batch['image']`,
`loader[*][0]`): the roles its uses imply, its methods and attributes, its rank, the names
it goes by. Plain JSON, carried to the probe process in `Side.facts`."""

from __future__ import annotations

from typing import Any

Facts = dict[str, Any]
# Keys that collect every value seen; the others keep the first (or, for counts, the largest).
_LISTS = frozenset(("roles", "methods", "attrs", "keys", "names", "feeds"))
_MAXIMA = frozenset(("min_rank", "items"))


class FactTable:
    def __init__(self) -> None:
        self.by_path: dict[str, Facts] = {}

    def at(self, path: str) -> Facts:
        return self.by_path.setdefault(path, {})

    def add(self, path: str, key: str, value: Any) -> None:
        f = self.at(path)
        if key in _LISTS:
            items = f.setdefault(key, [])
            if value not in items:
                items.append(value)
        elif key in _MAXIMA:
            f[key] = max(int(f.get(key, 0)), int(value))
        else:
            f.setdefault(key, value)

    def merge(self, path: str, other: Facts) -> None:
        for key, value in other.items():
            if key == "names":
                continue
            if isinstance(value, list):
                for v in value:
                    self.add(path, key, v)
            else:
                self.add(path, key, value)

    def to_json(self) -> dict[str, Facts]:
        return {p: {k: (sorted(v) if isinstance(v, list) and k != "names" else v) for k, v in f.items()} for p, f in sorted(self.by_path.items())}
