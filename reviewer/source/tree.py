"""The rest of the repository, as the new version sees it: which Python files mention a
word, and their text. The sandbox reads callers of a reviewed function from here.

`git grep` does the scanning (it is C, and it reads blobs of a commit without a checkout),
so a repository of thousands of files costs one process per word, not one read per file.
Nothing here writes to the repository.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from review_copies.source.plumbing import GIT_CONFIG, GIT_ENV, read_inside

# A word in more files than this says nothing about where a function is called.
MAX_FILES = 200
MAX_FILE_BYTES = 1 << 20
_GREP_SECONDS = 20.0


class RepoFiles(Protocol):
    def mentioning(self, word: str) -> list[str]:
        """Python files (repository-relative, sorted) whose text contains `word`."""

    def read(self, path: str) -> str | None:
        """The text of a Python file, or None when it cannot be had."""

    def blob(self, path: str) -> str | None:
        """The file's git object id when its content is fixed by it (a commit's), else None."""


def _decode(data: bytes | None) -> str | None:
    if data is None or len(data) > MAX_FILE_BYTES or b"\0" in data:
        return None
    return data.decode("utf-8", "replace")


def _grep(git_dir: str, cwd: str, args: list[str]) -> list[str]:
    """Names printed by `git grep -z -l`; no match (exit 1) is an empty list, and any
    failure (a shallow clone without the blobs, a timeout) is treated the same."""
    env = {**os.environ, **GIT_ENV}
    try:
        proc = subprocess.run(
            ["git", "--git-dir", git_dir, *GIT_CONFIG, "grep", "-z", "-l", "-F", "-I", *args],
            cwd=cwd, env=env, capture_output=True, timeout=_GREP_SECONDS, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode not in (0, 1):
        return []
    return [n.decode("utf-8", "surrogateescape") for n in proc.stdout.split(b"\0") if n]


@functools.lru_cache(maxsize=4)
def _blobs(git_dir: str, commit: str) -> dict[str, str]:
    """Every Python file of a commit with its object id."""
    try:
        proc = subprocess.run(
            ["git", "--git-dir", git_dir, *GIT_CONFIG, "ls-tree", "-r", "-z", "--full-tree", commit],
            env={**os.environ, **GIT_ENV}, capture_output=True, timeout=_GREP_SECONDS, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, str] = {}
    for entry in proc.stdout.split(b"\0"):
        meta, _, name = entry.partition(b"\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == b"blob" and name.endswith(b".py"):
            found[name.decode("utf-8", "surrogateescape")] = parts[2].decode()
    return found


@dataclass(frozen=True)
class RevisionFiles:
    """The files of a commit, read from git's object store."""

    git_dir: str
    commit: str

    def mentioning(self, word: str) -> list[str]:
        names = _grep(self.git_dir, self.git_dir, ["-e", word, self.commit, "--", "*.py"])
        prefix = f"{self.commit}:"
        return sorted({n[len(prefix):] if n.startswith(prefix) else n for n in names})[:MAX_FILES]

    def blob(self, path: str) -> str | None:
        """The object id of a file at this commit (one `git ls-tree` per commit): what the
        index caches facts by, so a warm review reads no file's text."""
        return _blobs(self.git_dir, self.commit).get(path)

    def read(self, path: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "--git-dir", self.git_dir, "cat-file", "blob", f"{self.commit}:{path}"],
                env={**os.environ, **GIT_ENV}, capture_output=True, timeout=_GREP_SECONDS, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return _decode(proc.stdout) if proc.returncode == 0 else None


@dataclass(frozen=True)
class WorkingFiles:
    """The files of the working tree: tracked and untracked, not ignored."""

    git_dir: str
    root: Path

    def mentioning(self, word: str) -> list[str]:
        names = _grep(self.git_dir, str(self.root), ["--untracked", "-e", word, "--", "*.py"])
        return sorted(set(names))[:MAX_FILES]

    def read(self, path: str) -> str | None:
        return _decode(read_inside(self.root, path))

    def blob(self, path: str) -> str | None:
        return None  # the working tree's text may differ from any object: it is hashed instead


@functools.lru_cache(maxsize=4)
def _walk(roots: tuple[Path, ...]) -> list[Path]:
    """The Python files under `roots`, walked once per process (at most 5,000)."""
    out: list[Path] = []
    for top in roots:
        if top.is_file():
            out.append(top)
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            out.extend(Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py"))
            if len(out) > 5000:
                return out
    return out


# Every question of the index scans the folder: its texts are kept, up to this many
# characters in all, so a review of a whole installed package reads each file once. A text
# is kept with the file's size and modification time, and read again when either changes.
_KEPT_BUDGET = 96 << 20
_kept: dict[Path, tuple[tuple[int, int], str | None]] = {}
_kept_size = 0


def _kept_text(path: Path) -> str | None:
    global _kept_size
    try:
        stat = path.stat()
    except OSError:
        return None
    stamp = (stat.st_size, stat.st_mtime_ns)
    kept = _kept.get(path)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    text = FolderFiles._text(path)
    if kept is None and _kept_size + len(text or "") <= _KEPT_BUDGET:
        _kept_size += len(text or "")
    if kept is not None or _kept_size <= _KEPT_BUDGET:
        _kept[path] = (stamp, text)
    return text


@dataclass(frozen=True)
class FolderFiles:
    """Plain folders outside git (`--all` over an installed package): walked, bounded."""

    roots: tuple[Path, ...]
    cwd: Path

    def _files(self) -> list[Path]:
        return _walk(self.roots)

    def mentioning(self, word: str) -> list[str]:
        found = []
        for path in self._files():
            text = _kept_text(path)
            if text is not None and word in text:
                found.append(self._relative(path))
        return sorted(found)[:MAX_FILES]

    def _relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.cwd.resolve()).as_posix()
        except ValueError:
            return path.resolve().as_posix()

    @staticmethod
    def _text(path: Path) -> str | None:
        if path.is_symlink() or not path.is_file():
            return None
        try:
            return _decode(path.read_bytes())
        except OSError:
            return None

    def read(self, path: str) -> str | None:
        full = Path(path)
        return self._text(full if full.is_absolute() else self.cwd / full)

    def blob(self, path: str) -> str | None:
        return None
