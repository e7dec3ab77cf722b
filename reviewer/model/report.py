"""The report a review produces, and its counts.

Stages are functions from a report to a new report: none changes the one it was handed.
Each part of `Stats` is written by the stage that owns it (`static`, `llm`, `sandbox`);
`to_json` lays them out as the contract's JSON report has them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from review_copies.model.findings import Dropped, Finding, Note


@dataclass(frozen=True)
class StaticStats:
    python_files_without_torch: int = 0
    # Findings silenced by `# review-copies: ignore` comments.
    suppressed: int = 0


@dataclass(frozen=True)
class LLMStats:
    # The model, "offline" when the review was asked to run without one, "off" when unknown.
    model: str = "off"
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Of the prompt tokens, those the server read from its prefix cache (hosted APIs
    # bill them at a discount): the fixed text first, identical across requests, earns it.
    cached_prompt_tokens: int = 0
    # None: the LLM stage did not get as far as sending requests.
    requests: int | None = None
    cache_hits: int = 0
    retries: int = 0
    hunks_reviewed: int = 0
    hunks_not_reviewed: int = 0
    # Some server reported no usage: token counts are estimates.
    tokens_estimated: bool = False
    planned_prompt_tokens: int = 0
    response_format: str | None = None
    cost_usd: float | None = None
    findings: int = 0
    merged_with_static: int = 0
    lines_corrected: int = 0
    # Findings kept without their fix because the fix was unusable (outside the finding's
    # lines, not parsing, changing nothing the finding is about).
    fixes_dropped: int = 0
    suppressed: int = 0


@dataclass(frozen=True)
class SandboxStats:
    # "on" once the sandbox stage ran (even with nothing to check).
    state: str = "off"
    runs: int = 0
    # How the probes were isolated (None: the sandbox did not say).
    network: str | None = None
    filesystem: str | None = None
    processes: str | None = None
    proc: str | None = None
    devices: str | None = None
    torch: str | None = None
    # "started in 3.2 s", or "kept warm by an earlier review".
    worker: str | None = None
    # Verdicts answered from the cache, the stage's wall time, findings the budget left out.
    cache_hits: int = 0
    seconds: float = 0.0
    over_budget: int = 0


@dataclass(frozen=True)
class Stats:
    files: int = 0
    python_files: int = 0
    hunks: int = 0
    tensor_hunks: int = 0
    seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)
    static: StaticStats = field(default_factory=StaticStats)
    llm: LLMStats = field(default_factory=LLMStats)
    sandbox: SandboxStats = field(default_factory=SandboxStats)

    # The contract's names for the counts of the stages.
    @property
    def llm_calls(self) -> int:
        return self.llm.calls

    @property
    def prompt_tokens(self) -> int:
        return self.llm.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.llm.completion_tokens

    @property
    def sandbox_runs(self) -> int:
        return self.sandbox.runs

    @property
    def suppressed(self) -> int:
        return self.static.suppressed + self.llm.suppressed

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
            "python_files_without_torch": self.static.python_files_without_torch,
            "suppressed": self.suppressed,
        }
        llm = self.llm
        if llm.requests is not None:
            out.update(
                {
                    "llm_requests": llm.requests,
                    "llm_cache_hits": llm.cache_hits,
                    "llm_retries": llm.retries,
                    "llm_hunks_reviewed": llm.hunks_reviewed,
                    "llm_hunks_not_reviewed": llm.hunks_not_reviewed,
                    "llm_tokens_estimated": llm.tokens_estimated,
                    "llm_planned_prompt_tokens": llm.planned_prompt_tokens,
                    "llm_cached_prompt_tokens": llm.cached_prompt_tokens,
                }
            )
            if llm.response_format is not None:
                out["llm_response_format"] = llm.response_format
            if llm.cost_usd is not None:
                out["llm_cost_usd"] = llm.cost_usd
            out.update({"llm_findings": llm.findings, "llm_merged_with_static": llm.merged_with_static, "llm_lines_corrected": llm.lines_corrected, "llm_fixes_dropped": llm.fixes_dropped})
        for name in ("network", "filesystem", "processes", "proc", "devices", "torch", "worker"):
            value = getattr(self.sandbox, name)
            if value is not None:
                out[f"sandbox_{name}"] = value
        if self.sandbox.state == "on":
            out.update({"sandbox_cache_hits": self.sandbox.cache_hits, "sandbox_seconds": self.sandbox.seconds, "sandbox_over_budget": self.sandbox.over_budget})
        out["llm"] = llm.model
        out["sandbox"] = self.sandbox.state
        return out


@dataclass(frozen=True)
class Report:
    findings: list[Finding] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    # Lines of the change the LLM did not see (coverage is never silent).
    coverage: list[str] = field(default_factory=list)

    def sorted(self) -> Report:
        return replace(
            self,
            findings=sorted(self.findings, key=_finding_order),
            dropped=sorted(self.dropped, key=lambda d: _finding_order(d.finding)),
        )


def _finding_order(f: Finding) -> tuple[str, int, int, str]:
    return (f.path, f.line, f.column, f.rule)
