"""Where answers already paid for are kept (the LLM's, the sandbox's verdicts): under the
user's cache folder, or where the configuration says, and never inside the reviewed
repository (the tool never writes there)."""

from __future__ import annotations

import os
from pathlib import Path

from review_copies.model.errors import UsageError


def default_cache_dir(env: dict[str, str], kind: str) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "review-copies" / kind


def resolve_cache_dir(raw: str | None, key: str, kind: str, repo_root: Path | None, env: dict[str, str]) -> Path | None:
    """`raw` is the configuration's value for `key`: None for the default, "" for no cache."""
    if raw == "":
        return None
    if raw is None:
        path = default_cache_dir(env, kind)
    else:
        path = Path(os.path.expandvars(os.path.expanduser(raw)))
        if not path.is_absolute():
            raise UsageError(f"bad configuration: '{key}' must be an absolute path (got '{raw}')")
    if repo_root is not None and _inside(path, repo_root):
        if raw is None:
            return None  # a home inside the repository: rather no cache than files in the repo
        raise UsageError(f"bad configuration: '{key}' ({raw}) lies inside the reviewed repository")
    return path


def _inside(path: Path, root: Path) -> bool:
    resolved, top = path.resolve(), root.resolve()
    return resolved == top or top in resolved.parents
