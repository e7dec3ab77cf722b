"""Where a finding may be commented: only on lines of the pull request's diff.

A review is all-or-nothing on GitHub: one comment on a line outside the diff fails the
whole request with 422. GitHub accepts a comment on any new-side line of a hunk (added or
context), with `start_line` and `line` in the same hunk, so each finding is placed on a
range inside one hunk or listed in the review body instead.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from review_copies.model.findings import Finding, Suggestion
from review_copies.source.changes import Change

Range = tuple[int, int]
# The lines of the head version of a file (each with its line ending), or None.
LineReader = Callable[[str], Sequence[str] | None]

OUTSIDE_DIFF = "outside the lines this pull request changes"


@dataclass(frozen=True)
class DiffMap:
    """New-file line ranges of every hunk, per path."""

    hunks: dict[str, tuple[Range, ...]]

    def hunk_at(self, path: str, line: int) -> Range | None:
        ranges = self.hunks.get(path, ())
        i = bisect.bisect_right(ranges, (line, float("inf"))) - 1
        if i >= 0 and ranges[i][0] <= line <= ranges[i][1]:
            return ranges[i]
        return None

    def covers(self, path: str, start: int, end: int) -> bool:
        hunk = self.hunk_at(path, start)
        return hunk is not None and start <= end <= hunk[1]


def diff_map(changes: Iterable[Change]) -> DiffMap:
    out: dict[str, tuple[Range, ...]] = {}
    for change in changes:
        if change.status == "deleted" or change.binary:
            continue
        ranges = sorted((h.new_start, h.new_end) for h in change.hunks if h.new_count > 0)
        if ranges:
            out[change.path] = tuple(ranges)
    return DiffMap(out)


@dataclass(frozen=True)
class Inline:
    """A finding placed on lines start..line of the new file (start None: one line)."""

    finding: Finding
    line: int
    start_line: int | None = None
    # The fix is offered as a committable suggestion block on exactly these lines.
    committable: bool = False


@dataclass(frozen=True)
class Placement:
    inline: list[Inline]
    # Findings that cannot be anchored, with the reason, for the review body.
    body: list[tuple[Finding, str]]


def positions(findings: Sequence[Finding], diff: DiffMap, read_lines: LineReader) -> Placement:
    inline: list[Inline] = []
    body: list[tuple[Finding, str]] = []
    claimed: set[tuple[str, int]] = set()  # lines already under a committable suggestion
    for finding in findings:
        spot = _committable(finding, diff, read_lines, claimed) or _plain(finding, diff)
        if spot is None:
            body.append((finding, OUTSIDE_DIFF))
            continue
        if spot.committable:
            claimed.update((finding.path, n) for n in range(spot.start_line or spot.line, spot.line + 1))
        inline.append(spot)
    return Placement(inline, body)


def _span(start: int, end: int) -> tuple[int | None, int]:
    return (start if start < end else None), end


def _plain(f: Finding, diff: DiffMap) -> Inline | None:
    """The finding's own lines, clamped to the hunk its first line is in."""
    hunk = diff.hunk_at(f.path, f.line)
    if hunk is None:
        # A multi-line finding whose later lines are in the diff: anchor there.
        hunk = next((diff.hunk_at(f.path, n) for n in range(f.line + 1, f.end_line + 1) if diff.hunk_at(f.path, n)), None)
        if hunk is None:
            return None
    start, end = max(f.line, hunk[0]), min(max(f.end_line, f.line), hunk[1])
    first, last = _span(start, end)
    return Inline(f, line=last, start_line=first)


def _committable(f: Finding, diff: DiffMap, read_lines: LineReader, claimed: set[tuple[str, int]]) -> Inline | None:
    s = f.suggestion
    if s is None or not suggestion_applies(f.path, s, read_lines):
        return None
    if not diff.covers(f.path, s.start_line, s.end_line):
        return None
    if s.end_line < f.line or s.start_line > max(f.end_line, f.line):
        return None  # it fixes other lines than the finding's: the comment would mislead
    if any((f.path, n) in claimed for n in range(s.start_line, s.end_line + 1)):
        return None  # GitHub cannot apply two suggestions on one line in a batch
    first, last = _span(s.start_line, s.end_line)
    return Inline(f, line=last, start_line=first, committable=True)


def suggestion_applies(path: str, s: Suggestion, read_lines: LineReader) -> bool:
    """The replacement can be committed as is on lines start..end of the head file: they
    exist, they are the lines the fix was made for, and it changes them."""
    if s.start_line < 1 or s.end_line < s.start_line:
        return False
    lines = read_lines(path)
    if lines is None or s.end_line > len(lines):
        return False
    current = "".join(lines[s.start_line - 1 : s.end_line])
    if s.original and current != s.original:
        return False
    if "\r" in s.replacement and "\r" not in current:
        return False
    return _without_final_newline(s.replacement) != _without_final_newline(current)


def _without_final_newline(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text
