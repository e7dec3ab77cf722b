"""`[tool.review-copies]` in the reviewed repository's pyproject.toml, checked once: every
mistake is a one-line error (exit 2). The keys and their types are declared in
`model.settings`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from review_copies.model.errors import UsageError
from review_copies.model.settings import DEVICES, FAIL_ON, LLM_OPTIONS, ChangeSpec, FileConfig
from review_copies.rules import known_selector
from review_copies.source.changes import find_repo

_LIST_KEYS = ("select", "ignore", "exclude")
_STR_KEYS = {"model": None, "base-url": None, "device": DEVICES, "fail-on": FAIL_ON}
_LLM_KEYS = {option.key: option for option in LLM_OPTIONS}


def config_root(change: ChangeSpec) -> Path | None:
    """Where pyproject.toml is looked for: the reviewed repository's root."""
    start = Path(change.repo) if change.repo else Path.cwd()
    if not start.is_dir():
        return None
    repo = find_repo(start)
    if repo is not None and repo.working_tree_dir:
        return Path(repo.working_tree_dir)
    return start


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
    where = f"[tool.review-copies] in {source}"
    unknown = sorted(set(table) - set(_LIST_KEYS) - set(_STR_KEYS) - {"sandbox", "sandbox-budget", "sandbox-cache-dir", "sandbox-keep-warm"} - set(_LLM_KEYS))
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
    budget = table.get("sandbox-budget")
    if budget is not None and (not isinstance(budget, (int, float)) or isinstance(budget, bool) or budget <= 0):
        raise UsageError(f"bad configuration: 'sandbox-budget' in {where} must be a number of seconds greater than 0")
    keep_warm = table.get("sandbox-keep-warm")
    if keep_warm is not None and (not isinstance(keep_warm, (int, float)) or isinstance(keep_warm, bool) or keep_warm < 0):
        raise UsageError(f"bad configuration: 'sandbox-keep-warm' in {where} must be a number of seconds, 0 or more")
    cache_dir = table.get("sandbox-cache-dir")
    if cache_dir is not None and not isinstance(cache_dir, str):
        raise UsageError(f"bad configuration: 'sandbox-cache-dir' in {where} must be a string")
    llm: dict[str, Any] = {}
    for key, option in _LLM_KEYS.items():
        if key in table:
            value = table[key]
            if not isinstance(value, option.kinds) or isinstance(value, bool):
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
        sandbox_budget=float(budget) if budget is not None else None,
        sandbox_cache_dir=cache_dir,
        sandbox_keep_warm=float(keep_warm) if keep_warm is not None else None,
        llm=llm,
        source=source,
    )
