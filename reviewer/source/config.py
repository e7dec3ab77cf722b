"""`[tool.review-copies]` in the reviewed repository's pyproject.toml, merged with flags."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from review_copies.model.errors import UsageError

DEVICES = ("auto", "cpu", "cuda")
FAIL_ON = ("none", "info", "warning", "error")


@dataclass(frozen=True)
class FileConfig:
    """What the configuration file says; None where it says nothing."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    model: str | None = None
    base_url: str | None = None
    sandbox: bool | None = None
    device: str | None = None
    fail_on: str | None = None
    llm: dict[str, Any] = field(default_factory=dict)
    source: str = ""


_LIST_KEYS = ("select", "ignore", "exclude")
_STR_KEYS = {"model": None, "base-url": None, "device": DEVICES, "fail-on": FAIL_ON}
# Tuning of the LLM stage (token budget, concurrency, prices): see reviewer.llm.
LLM_KEYS = {
    "llm-budget-tokens": int,
    "llm-request-tokens": int,
    "llm-max-output-tokens": int,
    "llm-concurrency": int,
    "llm-timeout": (int, float),
    "llm-retries": int,
    "llm-backoff": (int, float),
    "llm-cache-dir": str,
    "price-per-million-input": (int, float),
    "price-per-million-output": (int, float),
}


def load(root: Path | None) -> FileConfig:
    if root is None:
        return FileConfig()
    path = root / "pyproject.toml"
    if not path.is_file():
        return FileConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"bad configuration: {path} is not valid TOML ({exc})") from None
    table = data.get("tool", {}).get("review-copies")
    if table is None:
        return FileConfig(source=str(path))
    if not isinstance(table, dict):
        raise UsageError(f"bad configuration: [tool.review-copies] in {path} must be a table")
    return parse_table(table, str(path))


def parse_table(table: dict[str, Any], source: str) -> FileConfig:
    from review_copies.rules import known_selector

    where = f"[tool.review-copies] in {source}"
    unknown = sorted(set(table) - set(_LIST_KEYS) - set(_STR_KEYS) - {"sandbox"} - set(LLM_KEYS))
    if unknown:
        raise UsageError(f"bad configuration: unknown key '{unknown[0]}' in {where}")
    lists: dict[str, tuple[str, ...]] = {}
    for key in _LIST_KEYS:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"bad configuration: '{key}' in {where} must be a list of strings")
        if key != "exclude":
            for selector in value:
                if not known_selector(selector):
                    raise UsageError(f"bad configuration: '{key}' in {where} names '{selector}', which is no category or rule")
        lists[key] = tuple(value)
    strings: dict[str, str | None] = {}
    for key, allowed in _STR_KEYS.items():
        value = table.get(key)
        if value is not None and not isinstance(value, str):
            raise UsageError(f"bad configuration: '{key}' in {where} must be a string")
        if value is not None and allowed is not None and value not in allowed:
            raise UsageError(f"bad configuration: '{key}' in {where} must be one of {', '.join(allowed)}")
        strings[key] = value
    sandbox = table.get("sandbox")
    if sandbox is not None and not isinstance(sandbox, bool):
        raise UsageError(f"bad configuration: 'sandbox' in {where} must be true or false")
    llm: dict[str, Any] = {}
    for key, kind in LLM_KEYS.items():
        if key in table:
            value = table[key]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise UsageError(f"bad configuration: '{key}' in {where} has the wrong type")
            llm[key] = value
    return FileConfig(
        select=lists["select"],
        ignore=lists["ignore"],
        exclude=lists["exclude"],
        model=strings["model"],
        base_url=strings["base-url"],
        sandbox=sandbox,
        device=strings["device"],
        fail_on=strings["fail-on"],
        llm=llm,
        source=source,
    )
