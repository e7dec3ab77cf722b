"""Whether the repository ever reads an attribute, answered from the text of the files that
name it: an object may keep a value that no code looks at again."""

from __future__ import annotations

import re
from typing import Protocol


class TextIndex(Protocol):
    def paths_mentioning(self, word: str) -> list[str]: ...

    def text(self, path: str) -> str | None: ...


def never_read(index: TextIndex, attr: str) -> bool:
    """No file of the repository reads `.attr`: every mention is a plain store
    (`self.attr = ...`), and no string names it (`getattr(obj, "attr")`, a config key).
    False when no file mentions it at all: then the index knows nothing of it."""
    load = re.compile(rf"\.{re.escape(attr)}\b(?!\s*=(?!=))")
    named = re.compile(rf"[\"']{re.escape(attr)}[\"']")
    paths = index.paths_mentioning(attr)
    for path in paths:
        text = index.text(path)
        if text is None or load.search(text) or named.search(text):
            return False
    return bool(paths)
