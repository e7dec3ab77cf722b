"""The LLM stage's settings: the command line's model and endpoint, and the `llm-*` keys
of `[tool.review-copies]`, checked once with a one-line message for each mistake."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_copies.model.errors import UsageError

DEFAULT_ENDPOINT = "https://api.openai.com/v1"


@dataclass(frozen=True)
class LLMOptions:
    model: str
    api_key: str
    base_url: str | None = None
    # Prompt tokens for the whole review; hunks past it are listed as not reviewed.
    budget_tokens: int = 60_000
    # Prompt tokens of one request: small enough for local models' context windows and
    # for the model to keep its attention on every hunk.
    request_tokens: int = 12_000
    max_output_tokens: int = 2_000
    concurrency: int = 4
    timeout: float = 60.0
    retries: int = 3
    # First wait before a retry, doubled each time (Retry-After overrides it).
    backoff: float = 1.0
    cache_dir: Path | None = None
    price_input: float | None = None
    price_output: float | None = None

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_ENDPOINT


def default_cache_dir(env: dict[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "review-copies" / "llm"


def _positive(table: dict[str, Any], key: str, default: float) -> Any:
    value = table.get(key, default)
    if value <= 0:
        raise UsageError(f"bad configuration: '{key}' must be greater than 0")
    return value


def _cache_dir(table: dict[str, Any], repo_root: Path | None, env: dict[str, str]) -> Path | None:
    """Where answers are cached: never inside the reviewed repository."""
    raw = table.get("llm-cache-dir")
    if raw == "":
        return None
    if raw is None:
        path = default_cache_dir(env)
    else:
        path = Path(os.path.expandvars(os.path.expanduser(raw)))
        if not path.is_absolute():
            raise UsageError(f"bad configuration: 'llm-cache-dir' must be an absolute path (got '{raw}')")
    if repo_root is not None and _inside(path, repo_root):
        if raw is None:
            return None  # a home inside the repository: rather no cache than files in the repo
        raise UsageError(f"bad configuration: 'llm-cache-dir' ({raw}) lies inside the reviewed repository")
    return path


def _inside(path: Path, root: Path) -> bool:
    resolved, top = path.resolve(), root.resolve()
    return resolved == top or top in resolved.parents


def build_options(
    model: str,
    api_key: str,
    base_url: str | None,
    table: dict[str, Any],
    repo_root: Path | None,
    env: dict[str, str],
) -> LLMOptions:
    defaults = LLMOptions(model=model, api_key=api_key)
    request_tokens = int(_positive(table, "llm-request-tokens", defaults.request_tokens))
    budget = int(_positive(table, "llm-budget-tokens", defaults.budget_tokens))
    retries = table.get("llm-retries", defaults.retries)
    if retries < 0:
        raise UsageError("bad configuration: 'llm-retries' must be 0 or more")
    backoff = table.get("llm-backoff", defaults.backoff)
    if backoff < 0:
        raise UsageError("bad configuration: 'llm-backoff' must be 0 or more")
    prices = {key: table.get(key) for key in ("price-per-million-input", "price-per-million-output")}
    for key, value in prices.items():
        if value is not None and value < 0:
            raise UsageError(f"bad configuration: '{key}' must not be negative")
    return LLMOptions(
        model=model,
        api_key=api_key,
        base_url=base_url,
        budget_tokens=budget,
        request_tokens=request_tokens,
        max_output_tokens=int(_positive(table, "llm-max-output-tokens", defaults.max_output_tokens)),
        concurrency=int(_positive(table, "llm-concurrency", defaults.concurrency)),
        timeout=float(_positive(table, "llm-timeout", defaults.timeout)),
        retries=int(retries),
        backoff=float(backoff),
        cache_dir=_cache_dir(table, repo_root, env),
        price_input=prices["price-per-million-input"],
        price_output=prices["price-per-million-output"],
    )
