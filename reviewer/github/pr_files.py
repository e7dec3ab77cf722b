"""The pull request's diff and head files as the API gives them, for a job that has no
checkout of the pull request's code (and must not have one: it holds write access)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from review_copies.github.actions_env import PullRequest
from review_copies.github.api import ApiError, GitHubClient
from review_copies.github.diff_positions import DiffMap, Range
from review_copies.review import fixes
from review_copies.source.diff import MalformedDiff, iter_file_diffs

MAX_FILE_BYTES = 2 * 1024 * 1024


def diff_map_from_files(files: Iterable[Any]) -> DiffMap:
    """`GET /pulls/{n}/files` entries -> hunk ranges; a file without a `patch` (too large,
    binary) has none, so nothing is commented on it."""
    out: dict[str, tuple[Range, ...]] = {}
    for entry in files:
        if not isinstance(entry, dict) or entry.get("status") == "removed":
            continue
        name, patch = entry.get("filename"), entry.get("patch")
        if not isinstance(name, str) or not isinstance(patch, str) or not patch:
            continue
        ranges = _patch_ranges(name, patch)
        if ranges:
            out[name] = ranges
    return DiffMap(out)


def _patch_ranges(name: str, patch: str) -> tuple[Range, ...]:
    header = [f"--- a/{name}\n".encode(), f"+++ b/{name}\n".encode()]
    body = [line.encode() + b"\n" for line in patch.split("\n")]
    try:
        diffs = list(iter_file_diffs([*header, *body]))
    except MalformedDiff:
        return ()
    return tuple(sorted((h.new_start, h.new_end) for d in diffs for h in d.hunks if h.new_count > 0))


def api_diff_map(client: GitHubClient, pr: PullRequest) -> DiffMap:
    return diff_map_from_files(client.paginate(f"{pr.api_path}/files"))


@dataclass
class ApiLines:
    """Lines of the head commit's files, fetched once each, only for files of the diff."""

    client: GitHubClient
    pr: PullRequest
    diff: DiffMap
    _cache: dict[str, Sequence[str] | None] = field(default_factory=dict)

    def __call__(self, path: str) -> Sequence[str] | None:
        if path not in self._cache:
            self._cache[path] = self._fetch(path) if path in self.diff.hunks else None
        return self._cache[path]

    def _fetch(self, path: str) -> Sequence[str] | None:
        where = f"repos/{self.pr.repository}/contents/{urllib.parse.quote(path)}"
        try:
            response = self.client.request("GET", where, params={"ref": self.pr.head_sha}, accept="application/vnd.github.raw")
        except ApiError:
            return None
        data = response.data
        if not isinstance(data, bytes) or len(data) > MAX_FILE_BYTES:
            return None
        try:
            return fixes.split_lines(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None
