"""What to review: the change, file by file, read with gitpython (or from a diff file).

Every mode of the command line ends up here as a `ChangeSet`: a stream of `Change`s
(paths, hunks, which new-file lines changed) and a way to read the new version of a
file. Nothing here writes to the repository: git runs with optional locks off, external
diff drivers and textconv off, so even the index's stat cache is left alone.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Protocol

import git

from review_copies.model.errors import UsageError
from review_copies.model.settings import ChangeSpec
from review_copies.source.diff import FileDiff, Hunk, iter_file_diffs
from review_copies.source.plumbing import GIT_CONFIG, GIT_ENV, read_inside
from review_copies.source.tree import FolderFiles, RepoFiles, RevisionFiles, WorkingFiles

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_DIFF_FLAGS = ("--no-color", "--no-ext-diff", "--no-textconv", "-M", "-C", "--src-prefix=a/", "--dst-prefix=b/", "-U3")


@dataclass(frozen=True)
class Change:
    """One file of the change, as the new version sees it."""

    path: str
    old_path: str | None
    status: str
    hunks: tuple[Hunk, ...] = ()
    binary: bool = False
    symlink: bool = False
    submodule: bool = False
    whole_file: bool = False

    @property
    def changed_lines(self) -> frozenset[int] | None:
        """New-file lines added or modified; None means every line (whole-file review)."""
        if self.whole_file:
            return None
        return frozenset(line for h in self.hunks for line in h.added)

    @property
    def is_python(self) -> bool:
        return self.path.endswith(".py")


class Source(Protocol):
    def read(self, change: Change) -> bytes | None:
        """The bytes of the new version of the file, or None when it cannot be had."""


@dataclass
class ChangeSet:
    root: Path | None
    description: str
    changes: Iterator[Change]
    source: Source
    # The repository, when there is one (the config file and GitHub mode need it).
    repo: git.Repo | None = None
    # The rest of the new version's files (the sandbox builds inputs from callers there).
    files: RepoFiles | None = None
    # The version each file had before the change (rules compare a function before and after).
    base: Source | None = None


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class WorkingTreeSource:
    root: Path

    def read(self, change: Change) -> bytes | None:
        return read_inside(self.root, change.path)


@dataclass(frozen=True)
class RevisionSource:
    """Blobs at a commit, through git's persistent `cat-file --batch` process (one lookup
    per file, no tree walking in Python)."""

    repo: git.Repo
    commit: str

    def read(self, change: Change) -> bytes | None:
        if change.symlink or change.submodule:
            return None
        if "\n" in change.path:  # cat-file --batch reads one name per line: ask for this one alone
            try:
                return self.repo.git.execute(["git", *GIT_CONFIG, "cat-file", "blob", f"{self.commit}:{change.path}"], env=GIT_ENV, stdout_as_string=False, strip_newline_in_stdout=False)
            except git.GitError:
                return None
        try:
            _, kind, _, data = self.repo.git.get_object_data(f"{self.commit}:{change.path}")
        except (ValueError, git.GitError):
            return None
        return data if kind == b"blob" else None


@dataclass(frozen=True)
class BaseRevisionSource:
    """The version before the change: the file under its old name at the base commit."""

    repo: git.Repo
    commit: str

    def read(self, change: Change) -> bytes | None:
        if change.old_path is None or change.status == "added":
            return None
        return RevisionSource(self.repo, self.commit).read(Change(change.old_path, change.old_path, "unchanged"))


@dataclass(frozen=True)
class DiffSource:
    """The new file for a change read from a diff: the working tree if it already holds the
    new version, else the old version in the working tree with the hunks applied, else (a new
    file) the diff's own lines."""

    root: Path | None

    def read(self, change: Change) -> bytes | None:
        if self.root is not None:
            current = read_inside(self.root, change.path)
            if current is not None and _holds_new_side(current, change.hunks):
                return current
            if change.old_path is not None:
                old = read_inside(self.root, change.old_path)
                if old is not None:
                    patched = _apply(old, change.hunks)
                    if patched is not None:
                        return patched
        if change.old_path is None:
            return _apply(b"", change.hunks)
        return None


@dataclass(frozen=True)
class DiffBaseSource:
    """The version before a diff: the working tree's old file when it still holds it, else
    the new file with the hunks taken back out."""

    root: Path | None

    def read(self, change: Change) -> bytes | None:
        if change.old_path is None or self.root is None:
            return None
        current = read_inside(self.root, change.old_path)
        if current is None:
            return None
        if _holds_new_side(current, change.hunks):
            return _unapply(current, change.hunks)
        return current


def _split(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _holds_new_side(data: bytes, hunks: Sequence[Hunk]) -> bool:
    lines = _split(data)
    for hunk in hunks:
        expected = [ln[1:] for ln in hunk.body if ln[:1] in (b" ", b"+", b"")]
        start = hunk.new_start - 1 if hunk.new_count else hunk.new_start
        if lines[start : start + len(expected)] != expected:
            return False
    return True


def _apply(old: bytes, hunks: Sequence[Hunk]) -> bytes | None:
    lines, out, pos = _split(old), [], 0
    for hunk in hunks:
        start = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        if start < pos or start > len(lines):
            return None
        out.extend(lines[pos:start])
        pos = start
        for body_line in hunk.body:
            tag, text = body_line[:1], body_line[1:]
            if tag in (b" ", b"", b"-"):
                if pos >= len(lines) or lines[pos] != text:
                    return None
                pos += 1
                if tag != b"-":
                    out.append(text)
            elif tag == b"+":
                out.append(text)
    out.extend(lines[pos:])
    return b"".join(line + b"\n" for line in out)


def _unapply(new: bytes, hunks: Sequence[Hunk]) -> bytes | None:
    """The old file from the new one: each hunk's added lines out, its removed lines back."""
    reverse = []
    for hunk in hunks:
        body = tuple((b"-" if line[:1] == b"+" else b"+" if line[:1] == b"-" else line[:1]) + line[1:] for line in hunk.body)
        reverse.append(replace(hunk, old_start=hunk.new_start, old_count=hunk.new_count, new_start=hunk.old_start, new_count=hunk.old_count, body=body))
    return _apply(new, reverse)


# ----------------------------------------------------------------------------- git


def open_repo(repo_dir: str | None) -> git.Repo:
    start = Path(repo_dir) if repo_dir else Path.cwd()
    if repo_dir and not start.is_dir():
        raise UsageError(f"not a directory: {repo_dir}")
    try:
        return git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"not a git repository: {start}") from None
    except git.GitError as exc:
        raise UsageError(f"cannot open git repository {start}: {exc}") from None


def find_repo(start: Path) -> git.Repo | None:
    try:
        return git.Repo(start, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitError):
        return None


def resolve_commit(repo: git.Repo, rev: str) -> str:
    if rev.startswith("-"):
        raise UsageError(f"unknown revision: {rev}")
    try:
        return repo.git.execute(["git", *GIT_CONFIG, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], env=GIT_ENV).strip()
    except git.GitCommandError:
        raise UsageError(f"unknown revision: {rev}") from None


def has_commits(repo: git.Repo) -> bool:
    try:
        repo.git.execute(["git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}"], env=GIT_ENV)
        return True
    except git.GitCommandError:
        return False


def merge_base(repo: git.Repo, base: str, head: str) -> str:
    try:
        return repo.git.execute(["git", *GIT_CONFIG, "merge-base", base, head], env=GIT_ENV).strip()
    except git.GitCommandError:
        raise UsageError(f"no merge base between {base[:12]} and {head[:12]}: the histories are unrelated") from None


def _git_lines(repo: git.Repo, args: Sequence[str]) -> Iterator[bytes]:
    """Stream a git command's standard output line by line."""
    proc = repo.git.execute(["git", *GIT_CONFIG, *args], as_process=True, env=GIT_ENV)
    assert not isinstance(proc, (str, bytes, tuple)) and proc is not None
    stream: BinaryIO = proc.proc.stdout  # type: ignore[union-attr]
    try:
        yield from stream
    finally:
        try:
            proc.wait()
        except git.GitCommandError as exc:
            detail = " ".join(str(exc.stderr or "").split()) or f"exit status {exc.status}"
            raise UsageError(f"git {args[0]} failed: {detail}") from None


def _zero_separated(repo: git.Repo, args: Sequence[str]) -> Iterator[str]:
    pending = b""
    for chunk in _git_lines(repo, args):
        pending += chunk
        *names, pending = pending.split(b"\0")
        for name in names:
            if name:
                yield name.decode("utf-8", "surrogateescape")
    if pending:
        yield pending.decode("utf-8", "surrogateescape")


def _to_change(diff: FileDiff, whole_file: bool = False) -> Change:
    return Change(
        path=diff.path,
        old_path=diff.old_path,
        status=diff.status,
        hunks=diff.hunks,
        binary=diff.binary,
        symlink=diff.is_symlink,
        submodule=diff.is_submodule,
        whole_file=whole_file,
    )


def _diff_changes(repo: git.Repo, revs: Sequence[str], pathspecs: Sequence[str], whole_file: bool) -> Iterator[Change]:
    # Plumbing, not `git diff`: the porcelain refreshes `.git/index` on disk whenever a file's
    # stat data is stale, even with optional locks off, and the reviewed repository is not ours
    # to write. `diff-index` compares the working tree without touching the index.
    command = ["diff-tree", "-r", "-p"] if len(revs) == 2 else ["diff-index", "-p"]
    args = [*command, *_DIFF_FLAGS, *revs, "--", *pathspecs]
    for diff in iter_file_diffs(_git_lines(repo, args)):
        yield _to_change(diff, whole_file)


def _untracked(repo: git.Repo, pathspecs: Sequence[str]) -> Iterator[Change]:
    """Files git does not track nor ignore: they are all new, every line added."""
    root = Path(repo.working_tree_dir or ".")
    for rel in _zero_separated(repo, ["ls-files", "-z", "--others", "--exclude-standard", "--", *pathspecs]):
        full = root / rel
        symlink = full.is_symlink()
        yield Change(path=rel, old_path=None, status="added", symlink=symlink, whole_file=True)


def _tree_files(repo: git.Repo, rev: str | None, pathspecs: Sequence[str]) -> Iterator[Change]:
    if rev is None:
        names = _zero_separated(repo, ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *pathspecs])
        root = Path(repo.working_tree_dir or ".")
        seen: set[str] = set()
        for rel in names:
            if rel in seen:
                continue
            seen.add(rel)
            full = root / rel
            if not full.exists() and not full.is_symlink():
                continue  # deleted in the working tree but still in the index
            yield Change(path=rel, old_path=rel, status="unchanged", symlink=full.is_symlink(), whole_file=True)
        return
    for entry in _zero_separated(repo, ["ls-tree", "-r", "-z", "--full-tree", rev, "--", *pathspecs]):
        meta, _, rel = entry.partition("\t")
        mode = meta.split(" ", 1)[0]
        yield Change(path=rel, old_path=rel, status="unchanged", symlink=mode == "120000", submodule=mode == "160000", whole_file=True)


# ------------------------------------------------------------------------- building


def build_changeset(req: ChangeSpec, stdin: BinaryIO | None = None) -> ChangeSet:
    if req.diff is not None:
        if req.base or req.head:
            raise UsageError("--diff cannot be combined with --base/--head")
        return _from_diff_file(req, stdin)
    if req.all and not req.base and not req.head and req.repo is None:
        repo = find_repo(Path.cwd())
        if repo is None or (req.paths and any(_outside_git(repo, Path(p)) for p in req.paths)):
            # Folders git does not know (outside any repository, or ignored like an installed
            # package in a virtual environment) are walked as they are.
            return _plain_directories(req.paths or (".",))
    repo = open_repo(req.repo)
    if req.base or req.head:
        return _from_revisions(repo, req)
    return _from_working_tree(repo, req)


def _outside_git(repo: git.Repo, path: Path) -> bool:
    root = Path(repo.working_tree_dir or ".").resolve()
    try:
        rel = path.resolve().relative_to(root)
    except ValueError:
        return True
    if str(rel) == ".":
        return False
    try:
        repo.git.execute(["git", *GIT_CONFIG, "check-ignore", "-q", "--", rel.as_posix()], env=GIT_ENV)
        return True
    except git.GitCommandError:
        return False


def pathspecs(repo: git.Repo, paths: Sequence[str]) -> list[str]:
    if repo.working_tree_dir is None:
        if paths:
            raise UsageError("PATH filters need a repository with a working tree")
        return []
    root = Path(repo.working_tree_dir).resolve()
    specs = []
    for raw in paths:
        full = Path(raw).resolve()
        if not full.exists():
            raise UsageError(f"no such file or directory: {raw}")
        try:
            rel = full.relative_to(root)
        except ValueError:
            raise UsageError(f"path is outside the repository {root}: {raw}") from None
        specs.append(f":(top,literal){rel.as_posix()}" if str(rel) != "." else ":(top)")
    return specs


def _working_root(repo: git.Repo) -> Path:
    if repo.working_tree_dir is None:
        raise UsageError(f"the repository {repo.git_dir} is bare: give --base and --head")
    return Path(repo.working_tree_dir)


def _from_working_tree(repo: git.Repo, req: ChangeSpec) -> ChangeSet:
    root = _working_root(repo)
    specs = pathspecs(repo, req.paths)
    if req.all:
        return ChangeSet(root, "whole files of the working tree", _tree_files(repo, None, specs), WorkingTreeSource(root), repo, _working_files(repo, root))
    against = "HEAD" if has_commits(repo) else EMPTY_TREE

    def stream() -> Iterator[Change]:
        yield from _diff_changes(repo, [against], specs, whole_file=False)
        yield from _untracked(repo, specs)

    what = "the working tree against HEAD" if against == "HEAD" else "the working tree (no commits yet)"
    base = BaseRevisionSource(repo, resolve_commit(repo, "HEAD")) if against == "HEAD" else None
    return ChangeSet(root, what, stream(), WorkingTreeSource(root), repo, _working_files(repo, root), base)


def _from_revisions(repo: git.Repo, req: ChangeSpec) -> ChangeSet:
    specs = pathspecs(repo, req.paths) if req.paths else []
    head = resolve_commit(repo, req.head) if req.head else None
    if req.base is None:
        assert head is not None
        if req.all:
            return ChangeSet(_root_or_none(repo), f"whole files at {req.head}", _tree_files(repo, head, specs), RevisionSource(repo, head), repo, RevisionFiles(repo.git_dir, head))
        parents = repo.commit(head).parents
        base_point = parents[0].hexsha if parents else EMPTY_TREE
        desc = f"{req.head} against its first parent"
        base = BaseRevisionSource(repo, base_point) if parents else None
        return ChangeSet(_root_or_none(repo), desc, _diff_changes(repo, [base_point, head], specs, False), RevisionSource(repo, head), repo, RevisionFiles(repo.git_dir, head), base)
    base = resolve_commit(repo, req.base)
    if head is None:
        root = _working_root(repo)
        if not has_commits(repo):
            raise UsageError("unknown revision: HEAD (the repository has no commits)")
        point = merge_base(repo, base, resolve_commit(repo, "HEAD"))

        def stream() -> Iterator[Change]:
            yield from _diff_changes(repo, [point], specs, req.all)
            yield from _untracked(repo, specs)

        desc = f"the working tree against {req.base} (merge base {point[:12]})"
        return ChangeSet(root, desc, stream(), WorkingTreeSource(root), repo, _working_files(repo, root), BaseRevisionSource(repo, point))
    point = merge_base(repo, base, head)
    desc = f"{req.head} against {req.base} (merge base {point[:12]})"
    changes = _diff_changes(repo, [point, head], specs, req.all)
    return ChangeSet(_root_or_none(repo), desc, changes, RevisionSource(repo, head), repo, RevisionFiles(repo.git_dir, head), BaseRevisionSource(repo, point))


def _working_files(repo: git.Repo, root: Path) -> WorkingFiles:
    return WorkingFiles(repo.git_dir, root)


def _root_or_none(repo: git.Repo) -> Path | None:
    return Path(repo.working_tree_dir) if repo.working_tree_dir else None


def _from_diff_file(req: ChangeSpec, stdin: BinaryIO | None) -> ChangeSet:
    repo = open_repo(req.repo) if req.repo else find_repo(Path.cwd())
    root = _root_or_none(repo) if repo else Path.cwd()
    stream = _open_diff(req.diff or "-", stdin)
    filters = [_relative_filter(p, root) for p in req.paths]

    def changes() -> Iterator[Change]:
        for diff in iter_file_diffs(stream, keep_body=True):
            change = _to_change(diff, whole_file=req.all)
            if not filters or any(change.path == f or change.path.startswith(f + "/") or f == "" for f in filters):
                yield change

    name = "standard input" if req.diff == "-" else req.diff
    # The working tree stands for the new version's other files (the diff holds only its own).
    files = _working_files(repo, root) if repo is not None and root is not None else None
    return ChangeSet(root, f"the diff in {name}", changes(), DiffSource(root), repo, files, DiffBaseSource(root))


def _relative_filter(raw: str, root: Path | None) -> str:
    base = root or Path.cwd()
    try:
        rel = Path(raw).resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        raise UsageError(f"path is outside the repository {base}: {raw}") from None
    return "" if rel == "." else rel


def _open_diff(name: str, stdin: BinaryIO | None) -> Iterable[bytes]:
    if name == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        return _checked_text(stream, "standard input")
    path = Path(name)
    if not path.is_file():
        raise UsageError(f"cannot read diff: no such file: {name}")
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UsageError(f"cannot read diff {name}: {exc.strerror}") from None
    return _checked_text(handle, name)


def _checked_text(stream: Iterable[bytes], name: str) -> Iterator[bytes]:
    """A diff file is text: NUL bytes mean a binary file was given, not a diff."""
    for line in stream:
        if b"\0" in line:
            raise UsageError(f"cannot read diff {name}: it is a binary file, not a unified diff")
        yield line


def _plain_directories(paths: Sequence[str]) -> ChangeSet:
    """--all over folders that are not in a git repository (e.g. an installed package)."""
    cwd = Path.cwd()
    for raw in paths:
        if not Path(raw).exists():
            raise UsageError(f"no such file or directory: {raw}")

    def walk() -> Iterator[Change]:
        for raw in paths:
            top = Path(raw)
            if top.is_file():
                yield Change(path=_display(top, cwd), old_path=None, status="unchanged", whole_file=True, symlink=top.is_symlink())
                continue
            for dirpath, dirnames, filenames in os.walk(top):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
                for filename in sorted(filenames):
                    full = Path(dirpath) / filename
                    yield Change(path=_display(full, cwd), old_path=None, status="unchanged", whole_file=True, symlink=full.is_symlink())

    return ChangeSet(None, "whole files (no repository)", walk(), _PlainSource(cwd), files=FolderFiles(tuple(Path(p) for p in paths), cwd))


def _display(path: Path, cwd: Path) -> str:
    try:
        return path.resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


@dataclass(frozen=True)
class _PlainSource:
    cwd: Path

    def read(self, change: Change) -> bytes | None:
        path = Path(change.path)
        full = path if path.is_absolute() else self.cwd / path
        if full.is_symlink() or not full.is_file():
            return None
        try:
            return full.read_bytes()
        except OSError:
            return None
