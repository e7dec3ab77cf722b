"""Facts about the whole file that the walk of one function needs: module-level constants,
the inputs that transform pipelines hand to `__call__` methods, which classes are modules.

The interpreter reads them through `FileFacts`; `analysis.analyze` computes them (by
running the interpreter over other parts of the file) and caches them per file.
"""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from review_copies.analysis.parse import ParsedFile
from review_copies.analysis.syntax import dotted
from review_copies.analysis.values import Value


class FileFacts(Protocol):
    file: ParsedFile

    def constants(self) -> dict[str, Value]:
        """Module-level names bound once to a device, a dtype or a literal."""

    def pipeline_input(self, class_name: str) -> str | None:
        """Why the `__call__` input of this file's class `class_name` is a tensor, if a
        pipeline of the file hands it one."""


def is_module_class(file: ParsedFile, cls: cst.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
    """Does the class derive from torch.nn.Module (directly, or via a class in this file)?"""
    for base in cls.bases:
        name = dotted(base.value)
        if any(q.startswith("torch.nn") for q in file.imports.resolve(name)):
            return True
        if name and name not in seen and any(is_module_class(file, node, seen | {name}) for node in local_classes(file, name)):
            return True
    return False


def local_classes(file: ParsedFile, name: str) -> list[cst.ClassDef]:
    return [s.node for s in file.scopes if s.kind == "class" and s.name == name and isinstance(s.node, cst.ClassDef)]


def is_local_module_class(file: ParsedFile, name: str) -> bool:
    return any(is_module_class(file, c) for c in local_classes(file, name))
