"""What a review is asked to do: the change to review, the settings resolved from flags,
`[tool.review-copies]` and the environment, and every option of the configuration file,
declared once (`FILE_OPTIONS`, `LLM_OPTIONS`): the file reader checks types from these
tables, the LLM stage builds its options from them, and a test keeps the README's table
in step with them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PROG = "review-copies"
DEVICES = ("auto", "cpu", "cuda")
FAIL_ON = ("none", "info", "warning", "error")
FAIL_ON_RANK = {"none": 99, "info": 1, "warning": 2, "error": 3}
DEFAULT_MODEL = "gpt-4o-mini"
# Seconds of sandbox time for one review: a pull request's review stays quick.
DEFAULT_SANDBOX_BUDGET = 30.0
# Seconds the sandbox's worker waits for the next review after one (0 in CI, where every
# job starts from scratch and nothing should outlive it).
DEFAULT_KEEP_WARM = 300.0


@dataclass(frozen=True)
class ChangeSpec:
    """Which change to review, as the command line says it: revisions of a repository, a
    diff file, or whole files."""

    repo: str | None = None
    base: str | None = None
    head: str | None = None
    diff: str | None = None
    all: bool = False
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class LLMOption:
    """One `llm-*` (or price) key of `[tool.review-copies]`: its type, its default, the
    `LLMOptions` field it sets, the bound it must respect, and what it does."""

    key: str
    field: str
    kinds: tuple[type, ...]
    default: Any
    # "positive" (> 0), "zero-or-more" (>= 0), "not-negative" (>= 0, prices), or "" (no bound).
    bound: str
    help: str
    # The largest value allowed (None: no ceiling).
    most: float | None = None


LLM_OPTIONS: tuple[LLMOption, ...] = (
    LLMOption("llm-budget-tokens", "budget_tokens", (int,), 60_000, "positive", "prompt tokens for the whole review; hunks past it are listed as not reviewed"),
    LLMOption("llm-request-tokens", "request_tokens", (int,), 12_000, "positive", "prompt tokens in one request; larger changes are split into several requests"),
    LLMOption("llm-max-output-tokens", "max_output_tokens", (int,), 2_000, "positive", "the answer's limit"),
    LLMOption("llm-concurrency", "concurrency", (int,), 4, "positive", "how many requests run at once"),
    LLMOption("llm-timeout", "timeout", (int, float), 60.0, "positive", "seconds to wait for one answer"),
    LLMOption("llm-retries", "retries", (int,), 3, "zero-or-more", "further tries after a 408/409/429/5xx, a timeout or a dropped connection (at most 10)", most=10),
    LLMOption("llm-backoff", "backoff", (int, float), 1.0, "zero-or-more", "first wait in seconds before a retry, doubled for each further try"),
    LLMOption("llm-cache-dir", "cache_dir", (str,), None, "", "answers already paid for; \"\" turns the cache off; never inside the reviewed repository"),
    LLMOption("price-per-million-input", "price_input", (int, float), None, "not-negative", "price of a million prompt tokens, for the cost estimate"),
    LLMOption("price-per-million-output", "price_output", (int, float), None, "not-negative", "price of a million completion tokens, for the cost estimate"),
)


@dataclass(frozen=True)
class FileConfig:
    """What `[tool.review-copies]` says; None where it says nothing."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    model: str | None = None
    base_url: str | None = None
    sandbox: bool | None = None
    device: str | None = None
    fail_on: str | None = None
    sandbox_budget: float | None = None
    sandbox_cache_dir: str | None = None
    sandbox_keep_warm: float | None = None
    llm: dict[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass(frozen=True)
class Settings:
    """Everything one run needs to know, resolved once by the command line."""

    change: ChangeSpec
    fmt: str
    output: str | None
    offline: bool
    model: str
    base_url: str | None
    api_key: str | None
    sandbox: bool
    device: str
    fail_on: str
    post_review: bool
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # The `llm-*` keys of the configuration file, checked for type (see LLM_OPTIONS).
    llm: dict[str, Any] = field(default_factory=dict)
    sandbox_budget: float = DEFAULT_SANDBOX_BUDGET
    sandbox_keep_warm: float = 0.0
    # `sandbox-cache-dir` as configured: None for the default folder, "" for no cache.
    sandbox_cache_dir: str | None = None
    # `--sandbox unsafe-local`: run probes even where no namespace isolates them.
    sandbox_unsafe_local: bool = False
    # The change may be a stranger's (GitHub Actions, --post-review): its configuration may
    # not route secrets, and running its code never removes a static finding.
    untrusted: bool = False
    # Terminal habits: colour "auto" (a terminal, unless NO_COLOR) / "always" / "never";
    # the rules' explanations after the findings; counts per rule instead of findings.
    color: str = "auto"
    explain: bool = False
    statistics: bool = False
    # `--fix`: apply the suggestions of the findings reported (never of refuted ones) to the
    # working tree, and report what is left.
    fix: bool = False
