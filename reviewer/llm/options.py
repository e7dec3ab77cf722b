"""The LLM stage's settings: the command line's model and endpoint, and the `llm-*` keys
of `[tool.review-copies]`, checked once with a one-line message for each mistake."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_copies.model import cache_dirs
from review_copies.model.errors import UsageError
from review_copies.model.settings import LLM_OPTIONS, LLMOption

_DEFAULTS = {option.field: option.default for option in LLM_OPTIONS}

DEFAULT_ENDPOINT = "https://api.openai.com/v1"


@dataclass(frozen=True)
class LLMOptions:
    """The LLM stage's settings. Every field after `base_url` is one `llm-*` key of
    `[tool.review-copies]`; its default, type and bound are in `model.settings.LLM_OPTIONS`."""

    model: str
    api_key: str
    base_url: str | None = None
    # Prompt tokens for the whole review; hunks past it are listed as not reviewed.
    budget_tokens: int = _DEFAULTS["budget_tokens"]
    # Prompt tokens of one request: small enough for local models' context windows and
    # for the model to keep its attention on every hunk.
    request_tokens: int = _DEFAULTS["request_tokens"]
    max_output_tokens: int = _DEFAULTS["max_output_tokens"]
    concurrency: int = _DEFAULTS["concurrency"]
    timeout: float = _DEFAULTS["timeout"]
    retries: int = _DEFAULTS["retries"]
    # First wait before a retry, doubled each time (Retry-After overrides it).
    backoff: float = _DEFAULTS["backoff"]
    cache_dir: Path | None = None
    price_input: float | None = None
    price_output: float | None = None

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_ENDPOINT

    @property
    def local(self) -> bool:
        """A server on this machine (llama.cpp, Ollama, vLLM on loopback): often one slot,
        and slow; an abandoned request keeps it busy."""
        host = (urllib.parse.urlsplit(self.endpoint).hostname or "").lower()
        return host in ("localhost", "::1") or host.startswith("127.")

    def local_with_hosted_defaults(self) -> bool:
        return self.local and self.timeout == _DEFAULTS["timeout"]


def _cache_dir(table: dict[str, Any], repo_root: Path | None, env: dict[str, str]) -> Path | None:
    """Where answers are cached: never inside the reviewed repository."""
    return cache_dirs.resolve_cache_dir(table.get("llm-cache-dir"), "llm-cache-dir", "llm", repo_root, env)


_BOUND_WORDS = {"positive": "must be greater than 0", "zero-or-more": "must be 0 or more", "not-negative": "must not be negative"}


def _checked(option: LLMOption, value: Any) -> Any:
    bounded = value is not None and option.bound
    if bounded and (value <= 0 if option.bound == "positive" else value < 0):
        raise UsageError(f"bad configuration: '{option.key}' {_BOUND_WORDS[option.bound]}")
    if value is not None and option.most is not None and value > option.most:
        # A review must end: endless retries against a server that keeps failing would not.
        raise UsageError(f"bad configuration: '{option.key}' must be at most {option.most:g}")
    if value is None or option.kinds == (str,):
        return value
    return float(value) if float in option.kinds else int(value)


def build_options(
    model: str,
    api_key: str,
    base_url: str | None,
    table: dict[str, Any],
    repo_root: Path | None,
    env: dict[str, str],
) -> LLMOptions:
    """The options from the `llm-*` keys of the configuration (already type-checked by the
    configuration reader), each checked against its bound."""
    values = {option.field: _checked(option, table.get(option.key, option.default)) for option in LLM_OPTIONS if option.field != "cache_dir"}
    return LLMOptions(model=model, api_key=api_key, base_url=base_url, cache_dir=_cache_dir(table, repo_root, env), **values)
