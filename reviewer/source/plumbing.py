"""How this package runs git and reads files: never writing to the repository (optional
locks off, no pager, no prompts, no external diff drivers), never following a path out of it."""

from __future__ import annotations

from pathlib import Path

GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C"}
GIT_CONFIG = (
    "-c", "core.quotepath=off",
    "-c", "core.fsmonitor=false",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.relative=false",
    "-c", "color.ui=never",
)


def read_inside(root: Path, rel: str) -> bytes | None:
    """Read root/rel, refusing anything that resolves outside root (symlinks, '..')."""
    path = root / rel
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if real != root.resolve() and root.resolve() not in real.parents:
        return None
    if path.is_symlink() or not real.is_file():
        return None
    try:
        return real.read_bytes()
    except OSError:
        return None
