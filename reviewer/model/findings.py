"""The data that flows through the review: findings, their fixes, verdicts and the report.

Everything here is a plain dataclass. Stages create new values and pass them on;
nothing downstream reaches back into a stage that produced them.
"""

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
FAIL_ON_RANK = {"none": 99, "info": 1, "warning": 2, "error": 3}


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


@dataclass
class Stats:
    files: int = 0
    python_files: int = 0
    hunks: int = 0
    tensor_hunks: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    sandbox_runs: int = 0
    seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + count

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "files": self.files,
            "hunks": self.hunks,
            "tensor_hunks": self.tensor_hunks,
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "sandbox_runs": self.sandbox_runs,
            "seconds": round(self.seconds, 3),
            "python_files": self.python_files,
            "skipped_files": dict(sorted(self.skipped.items())),
        }
        out.update(self.extra)
        return out


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    # Lines of the change the LLM did not see (issue: coverage is never silent).
    coverage: list[str] = field(default_factory=list)

    def sorted(self) -> Report:
        key = _finding_order
        return Report(
            findings=sorted(self.findings, key=key),
            dropped=sorted(self.dropped, key=lambda d: _finding_order(d.finding)),
            notes=self.notes,
            stats=self.stats,
            coverage=self.coverage,
        )


def _finding_order(f: Finding) -> tuple[str, int, int, str]:
    return (f.path, f.line, f.column, f.rule)
