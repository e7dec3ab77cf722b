"""A streaming parser for unified diffs, as `git diff` and `diff -u` write them.

It works on bytes, one file at a time, so a change of 10,000 files is never held in
memory at once, and files in any encoding (or none) keep their exact line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from review_copies.model.errors import UsageError

_HUNK_HEADER = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_GIT_HEADER_PREFIXES = (
    b"old mode ",
    b"new mode ",
    b"deleted file mode ",
    b"new file mode ",
    b"similarity index ",
    b"dissimilarity index ",
    b"index ",
)
_ESCAPES = {b"n": b"\n", b"t": b"\t", b'"': b'"', b"\\": b"\\", b"a": b"\a", b"b": b"\b", b"f": b"\f", b"r": b"\r", b"v": b"\v"}


class MalformedDiff(UsageError):
    pass


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    added: tuple[int, ...]
    section: str = ""
    # The hunk body (each line with its ' ', '+' or '-' prefix), kept only when the new
    # file has to be rebuilt from the diff itself.
    body: tuple[bytes, ...] = ()

    @property
    def new_end(self) -> int:
        return self.new_start + max(self.new_count, 1) - 1


@dataclass(frozen=True)
class FileDiff:
    old_path: str | None
    new_path: str | None
    status: str  # added | deleted | modified | renamed | copied
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    hunks: tuple[Hunk, ...] = ()

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def is_symlink(self) -> bool:
        return (self.new_mode or "").startswith("120")

    @property
    def is_submodule(self) -> bool:
        return (self.new_mode or self.old_mode or "").startswith("160")


@dataclass
class _FileState:
    start_line: int
    git_old: str | None = None
    git_new: str | None = None
    minus: str | None = None
    plus: str | None = None
    seen_minus: bool = False
    seen_plus: bool = False
    rename_from: str | None = None
    rename_to: str | None = None
    copy: bool = False
    new_file: bool = False
    deleted: bool = False
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    hunks: list[Hunk] = field(default_factory=list)


def unquote_path(raw: bytes) -> bytes:
    """Undo git's C-style quoting of unusual path names ("a/t\\303\\251st.py")."""
    if not (raw.startswith(b'"') and raw.endswith(b'"') and len(raw) >= 2):
        return raw
    body, out, i = raw[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i : i + 1]
        if ch != b"\\":
            out += ch
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt]
            i += 2
        elif re.match(rb"[0-7]{3}", body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            raise ValueError("bad escape in quoted path")
    return bytes(out)


def _decode_path(raw: bytes) -> str:
    return unquote_path(raw).decode("utf-8", "surrogateescape")


def _header_path(raw: bytes) -> str | None:
    """The path of a '--- ' / '+++ ' line: drop a timestamp after a tab; /dev/null is None.
    Git ends a name with a space by a tab, after the closing quote when it quotes the name
    (`+++ "b/train \\"v2\\".py"<TAB>`): a quoted name ends at its closing quote."""
    raw = raw.rstrip(b"\r")
    if raw.startswith(b'"'):
        i = 1
        while i < len(raw) and raw[i : i + 1] != b'"':
            i += 2 if raw[i : i + 1] == b"\\" else 1
        return _decode_path(raw[: i + 1])
    if b"\t" in raw:
        raw = raw.split(b"\t", 1)[0]
    if raw == b"/dev/null":
        return None
    return _decode_path(raw)


def _split_git_header(rest: bytes) -> tuple[str, str] | None:
    """Split 'a/x b/x' of a 'diff --git' line. Unambiguous only when quoted or equal."""
    rest = rest.rstrip(b"\r")
    if rest.startswith(b'"'):
        end = rest.find(b'" ', 1)
        while end != -1 and rest[end - 1 : end] == b"\\":
            end = rest.find(b'" ', end + 1)
        if end == -1:
            return None
        return _decode_path(rest[: end + 1]), _decode_path(rest[end + 2 :])
    if rest.endswith(b'"'):
        start = rest.rfind(b' "')
        if start == -1:
            return None
        return _decode_path(rest[:start]), _decode_path(rest[start + 1 :])
    if (len(rest) - 1) % 2 == 0:
        half = (len(rest) - 1) // 2
        left, right = rest[:half], rest[half + 1 :]
        if rest[half : half + 1] == b" " and left[2:] == right[2:]:
            return _decode_path(left), _decode_path(right)
    return None


def _strip_prefix(old: str | None, new: str | None) -> tuple[str | None, str | None]:
    """Remove git's a/ and b/ prefixes (or any single leading component when both have one)."""
    def has(p: str | None, pre: str) -> bool:
        return p is None or p.startswith(pre)

    if has(old, "a/") and has(new, "b/") and (old or new):
        return (old[2:] if old else None), (new[2:] if new else None)
    return old, new


def _finish(state: _FileState, lineno: int) -> FileDiff:
    if state.seen_minus != state.seen_plus:
        raise MalformedDiff(f"malformed diff at line {lineno}: '---' and '+++' file headers must come in pairs")
    if state.seen_minus:
        old, new = _strip_prefix(state.minus, state.plus)
    else:
        old, new = _strip_prefix(state.git_old, state.git_new)
    if state.rename_from is not None or state.rename_to is not None:
        old = state.rename_from if state.rename_from is not None else old
        new = state.rename_to if state.rename_to is not None else new
    if state.new_file:
        old = None
    if state.deleted:
        new = None
    if old is None and new is None:
        raise MalformedDiff(f"malformed diff at line {state.start_line}: a file section names no file")
    if old is None:
        status = "added"
    elif new is None:
        status = "deleted"
    elif state.rename_from is not None:
        status = "copied" if state.copy else "renamed"
    else:
        status = "modified"
    return FileDiff(
        old_path=old,
        new_path=new,
        status=status,
        binary=state.binary,
        old_mode=state.old_mode,
        new_mode=state.new_mode,
        hunks=tuple(state.hunks),
    )


class _HunkReader:
    """Consumes the body of one hunk, checking it against the counts of its header."""

    def __init__(self, header: re.Match[bytes], keep_body: bool) -> None:
        self.old_start = int(header.group(1))
        self.old_count = int(header.group(2)) if header.group(2) is not None else 1
        self.new_start = int(header.group(3))
        self.new_count = int(header.group(4)) if header.group(4) is not None else 1
        self.section = header.group(5).strip().decode("utf-8", "replace")
        self.old_left = self.old_count
        self.new_left = self.new_count
        self.next_new = self.new_start
        self.added: list[int] = []
        self.keep_body = keep_body
        self.body: list[bytes] = []

    @property
    def open(self) -> bool:
        return self.old_left > 0 or self.new_left > 0

    def feed(self, line: bytes, lineno: int) -> None:
        tag = line[:1]
        if tag in (b" ", b""):
            self.old_left -= 1
            self.new_left -= 1
            self.next_new += 1
        elif tag == b"-":
            self.old_left -= 1
        elif tag == b"+":
            self.added.append(self.next_new)
            self.new_left -= 1
            self.next_new += 1
        else:
            raise MalformedDiff(f"malformed diff at line {lineno}: unexpected line inside a hunk")
        if self.old_left < 0 or self.new_left < 0:
            raise MalformedDiff(f"malformed diff at line {lineno}: hunk is longer than its header says")
        if self.keep_body:
            self.body.append(line)

    def hunk(self) -> Hunk:
        return Hunk(
            old_start=self.old_start,
            old_count=self.old_count,
            new_start=self.new_start,
            new_count=self.new_count,
            added=tuple(self.added),
            section=self.section,
            body=tuple(self.body),
        )


def iter_file_diffs(lines: Iterable[bytes], keep_body: bool = False) -> Iterator[FileDiff]:
    """Yield one FileDiff per file section of a unified diff, streaming.

    Raises MalformedDiff (exit 2) with the offending line number.
    """
    state: _FileState | None = None
    hunk: _HunkReader | None = None
    in_binary_patch = False
    saw_any_line = False
    lineno = 0
    pending_minus: bytes | None = None  # a '--- ' line outside a git header: the start of a plain diff

    for lineno, raw in enumerate(lines, 1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.strip():
            saw_any_line = True
        if hunk is not None and hunk.open:
            if line.startswith(b"\\"):
                continue
            hunk.feed(line, lineno)
            if not hunk.open:
                assert state is not None
                state.hunks.append(hunk.hunk())
            continue
        if line.startswith(b"\\"):
            continue  # "\ No newline at end of file" after the last line of a hunk
        if in_binary_patch:
            # Base85 data lines never hold a space; the next section's header does.
            if not (line.startswith(b"diff --git ") or line.startswith(b"--- ")):
                continue
            in_binary_patch = False
        if pending_minus is not None:
            if not line.startswith(b"+++ "):
                raise MalformedDiff(f"malformed diff at line {lineno}: '---' header not followed by '+++'")
            if state is not None and (state.seen_minus or state.hunks):
                yield _finish(state, lineno)
                state = None
            if state is None:
                state = _FileState(start_line=lineno - 1)
            state.minus, state.seen_minus = _header_path(pending_minus[4:]), True
            state.plus, state.seen_plus = _header_path(line[4:]), True
            pending_minus = None
            continue
        if line.startswith(b"diff --cc ") or line.startswith(b"diff --combined "):
            raise MalformedDiff(f"malformed diff at line {lineno}: combined (merge) diffs are not supported; diff against one parent")
        if line.startswith(b"diff --git "):
            if state is not None:
                yield _finish(state, lineno)
            state = _FileState(start_line=lineno)
            split = _split_git_header(line[len(b"diff --git ") :])
            if split is not None:
                state.git_old, state.git_new = split
            hunk = None
            continue
        if line.startswith(b"--- "):
            pending_minus = line
            continue
        if line.startswith(b"+++ "):
            raise MalformedDiff(f"malformed diff at line {lineno}: '+++' header without '---'")
        if line.startswith(b"@@"):
            if state is None or not (state.seen_plus or state.git_new or state.git_old):
                raise MalformedDiff(f"malformed diff at line {lineno}: hunk before any file header")
            match = _HUNK_HEADER.match(line.rstrip(b"\r"))
            if match is None:
                raise MalformedDiff(f"malformed diff at line {lineno}: bad hunk header")
            hunk = _HunkReader(match, keep_body)
            if not hunk.open:
                state.hunks.append(hunk.hunk())
            continue
        if state is not None and not state.seen_minus:
            _header_line(state, line)
            if line.startswith(b"GIT binary patch"):
                state.binary = True
                in_binary_patch = True
        # Anything else (a mail preamble, "Only in ..." lines) is not part of a file section.

    if hunk is not None and hunk.open:
        raise MalformedDiff(f"malformed diff at line {lineno}: truncated hunk (the input ended inside it)")
    if pending_minus is not None:
        raise MalformedDiff(f"malformed diff at line {lineno}: '---' header not followed by '+++'")
    if state is not None:
        yield _finish(state, lineno + 1)
    elif saw_any_line:
        raise MalformedDiff("malformed diff: no file sections found (expected 'diff --git' or '---'/'+++' headers)")


def _header_line(state: _FileState, line: bytes) -> None:
    """Record one git extended header line of the current file section."""
    text = line.rstrip(b"\r")
    if text.startswith(b"rename from ") or text.startswith(b"copy from "):
        state.rename_from = _decode_path(text.split(b" ", 2)[2])
        state.copy = text.startswith(b"copy")
    elif text.startswith(b"rename to ") or text.startswith(b"copy to "):
        state.rename_to = _decode_path(text.split(b" ", 2)[2])
    elif text.startswith(b"new file mode "):
        state.new_file = True
        state.new_mode = text.rsplit(b" ", 1)[1].decode()
    elif text.startswith(b"deleted file mode "):
        state.deleted = True
        state.old_mode = text.rsplit(b" ", 1)[1].decode()
    elif text.startswith(b"old mode "):
        state.old_mode = text.rsplit(b" ", 1)[1].decode()
    elif text.startswith(b"new mode "):
        state.new_mode = text.rsplit(b" ", 1)[1].decode()
    elif text.startswith(b"index "):
        parts = text.split(b" ")
        if len(parts) == 3:
            state.old_mode = state.old_mode or parts[2].decode()
            state.new_mode = state.new_mode or parts[2].decode()
    elif text.startswith(b"Binary files ") and text.endswith(b" differ"):
        state.binary = True
        names = text[len(b"Binary files ") : -len(b" differ")]
        if b" and " in names and state.git_old is None:
            left, right = names.split(b" and ", 1)
            state.git_old = None if left == b"/dev/null" else _decode_path(left)
            state.git_new = None if right == b"/dev/null" else _decode_path(right)
    elif text.startswith(_GIT_HEADER_PREFIXES):
        pass
