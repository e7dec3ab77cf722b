"""The rule framework: one small class per rule, in the manner of Fixit.

A rule declares its code, category, severity, a cheap substring prefilter, and valid and
invalid examples next to it. Its docstring, in ruff's form (What it does / Why is this
bad? / Example / Use instead / Fix safety), is the explanation users read; the same
examples are the tests, the docs and the LLM's few-shot block.

A rule reads the dataflow model of one function (reviewer.flow) and yields `Hit`s.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from review_copies.analysis.events import FunctionFlow
from review_copies.model.findings import Category, Severity


@dataclass(frozen=True)
class Valid:
    """Code the rule must stay quiet on. With `before`, the code is a change: `before` is
    the file it was made from (rules that compare a function with its base version)."""

    code: str
    note: str = ""
    before: str | None = None

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).strip("\n") + "\n"

    @property
    def base(self) -> str | None:
        return None if self.before is None else textwrap.dedent(self.before).strip("\n") + "\n"


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag at `line` (1-based, in the dedented code); `fix` is the whole
    example after the suggestion is applied, or None when no safe fix exists; `before` as
    for `Valid`."""

    code: str
    line: int
    fix: str | None = None
    note: str = ""
    before: str | None = None

    @property
    def source(self) -> str:
        return textwrap.dedent(self.code).strip("\n") + "\n"

    @property
    def base(self) -> str | None:
        return None if self.before is None else textwrap.dedent(self.before).strip("\n") + "\n"

    @property
    def fixed(self) -> str | None:
        return None if self.fix is None else textwrap.dedent(self.fix).strip("\n") + "\n"


@dataclass(frozen=True)
class Hit:
    """What a rule reports: the node it is about, why, and an optional fix (old -> new node).

    `anchors` are other nodes the finding may be shown on when the primary node's lines
    are not part of the change but one of them is (an alias made on a changed line and
    written through on an unchanged one).
    """

    node: cst.CSTNode
    message: str
    replace: tuple[cst.CSTNode, cst.CSTNode] | None = None
    anchors: tuple[cst.CSTNode, ...] = ()
    # Python source that builds inputs and calls the function, when the sandbox could not
    # guess them from the signature (a sparse tensor, say); contract §4's `probe`.
    probe: str = ""
    # What the hit says happens: "grad" (a tensor requires grad), "gpu" (it lives on a GPU).
    claims: frozenset[str] = frozenset()


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    category: ClassVar[Category]
    severity: ClassVar[Severity]
    # The rule runs only on files that contain one of these substrings.
    prefilter: ClassVar[tuple[str, ...]]
    VALID: ClassVar[Sequence[Valid]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()
    # The sandbox recipes that can confirm this rule's findings (sandbox.recipes); empty:
    # the category's. `observable = False`: what the rule is about happens outside torch.
    recipes: ClassVar[tuple[str, ...]] = ()
    observable: ClassVar[bool] = True
    # Reads what the reviewed change did (`flow.change`): silent without a base version,
    # and second to another rule of its category on the same lines (which then says it).
    follows_change: ClassVar[bool] = False

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        raise NotImplementedError

    @classmethod
    def applies_to(cls, text: str) -> bool:
        return any(marker in text for marker in cls.prefilter)

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def sections(cls) -> dict[str, str]:
        """The docstring's sections by heading ('What it does', 'Why is this bad?', ...)."""
        out: dict[str, str] = {}
        current = "summary"
        for line in cls.doc().splitlines():
            match = re.match(r"^##\s+(.*)$", line)
            if match:
                current = match.group(1).strip()
                out[current] = ""
                continue
            out[current] = out.get(current, "") + line + "\n"
        return {k: v.strip() for k, v in out.items()}

    @classmethod
    def summary(cls) -> str:
        return cls.sections().get("What it does", "").split("\n\n")[0].replace("\n", " ")

    @classmethod
    def why(cls) -> str:
        return cls.sections().get("Why is this bad?", "").split("\n\n")[0].replace("\n", " ")
