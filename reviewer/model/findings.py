"""What the review says: findings in the seven categories, their fixes and verdicts, what
was dropped and why, notes. Plain frozen dataclasses; `model.report` gathers them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any


class Category(str, Enum):
    """The seven categories of the contract (section 2)."""

    ALIAS_MUTATION = "alias-mutation"
    INPLACE_AUTOGRAD = "inplace-autograd"
    GRAPH_RETENTION = "graph-retention"
    STALE_SNAPSHOT = "stale-snapshot"
    COPY_CONSTRUCT = "copy-construct"
    NUMPY_BRIDGE = "numpy-bridge"
    REDUNDANT_COPY = "redundant-copy"


CATEGORY_SUMMARY: dict[Category, str] = {
    Category.ALIAS_MUTATION: "an in-place write through one name changes a tensor other code still reads",
    Category.INPLACE_AUTOGRAD: "an in-place op breaks or silently corrupts autograd",
    Category.GRAPH_RETENTION: "a tensor attached to the graph is kept past its step",
    Category.STALE_SNAPSHOT: "a 'copy' that is really a reference and changes later",
    Category.COPY_CONSTRUCT: "torch.tensor(t)-style construction from an existing tensor",
    Category.NUMPY_BRIDGE: "a NumPy conversion that fails (grad, GPU) or leaks memory sharing",
    Category.REDUNDANT_COPY: "a copy that costs memory or time and buys nothing",
}


class Severity(str, Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 1, Severity.WARNING: 2, Severity.ERROR: 3}


class Status(str, Enum):
    """Sandbox verdicts (contract section 3)."""

    CONFIRMED = "confirmed"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"
    NOT_RUN = "not-run"


@dataclass(frozen=True)
class Suggestion:
    """Replace lines start_line..end_line (1-based, new file) whole with `replacement`."""

    start_line: int
    end_line: int
    replacement: str
    # The lines it replaces, for showing the fix as a diff (not part of the JSON report).
    original: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"start_line": self.start_line, "end_line": self.end_line, "replacement": self.replacement}


@dataclass(frozen=True)
class Verification:
    status: Status = Status.NOT_RUN
    device: str | None = None
    evidence: str = ""


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    end_line: int
    # None only in `dropped`, for LLM output that named no category of section 2 (or was
    # not a finding at all, like an answer that is not JSON).
    category: Category | None
    rule: str
    severity: Severity
    message: str
    source: str = "static"
    suggestion: Suggestion | None = None
    verification: Verification = field(default_factory=Verification)
    # The source lines the finding is about, as they stand in the new file. Not part of
    # the JSON contract; used for fingerprints and for the sandbox to locate the code.
    code: str = ""
    column: int = 1
    # Python source that builds inputs and calls the reviewed function (from the LLM's
    # answer or a rule's recipe); the sandbox synthesises one when empty. Not in the JSON.
    probe: str = ""
    # What the finding says happens, for the sandbox: "grad" (a tensor requires grad),
    # "gpu" (it lives on a GPU; never refuted on a machine without one). Not in the JSON.
    claims: frozenset[str] = frozenset()

    @property
    def category_label(self) -> str:
        return self.category.value if self.category is not None else "no category"

    def with_verification(self, verification: Verification) -> Finding:
        return replace(self, verification=verification)

    @property
    def fingerprint(self) -> str:
        """Stable across line shifts: path, rule and the normalised code, not the line."""
        normalised = re.sub(r"\s+", " ", self.code).strip()
        digest = hashlib.sha256(f"{self.path}\0{self.rule}\0{normalised}".encode()).hexdigest()
        return digest[:16]

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "end_line": self.end_line,
            "category": self.category.value if self.category is not None else None,
            "rule": self.rule,
            "severity": self.severity.value,
            "message": self.message,
            "source": self.source,
            "suggestion": self.suggestion.to_json() if self.suggestion else None,
            "verification": {
                "status": self.verification.status.value,
                "device": self.verification.device,
                "evidence": self.verification.evidence,
            },
        }


@dataclass(frozen=True)
class Dropped:
    """A finding that is not posted, and why."""

    finding: Finding
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {**self.finding.to_json(), "reason": self.reason}


@dataclass(frozen=True)
class Note:
    """Something the user should know that is not a finding (a file that did not parse...)."""

    message: str
    path: str | None = None

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message
