"""Hidden markers in what the bot posts, so that a later run knows what is already there.

Each inline comment ends with `<!-- review-copies:fp=<fingerprint> rule=<rule> -->`; a
review body starts with `<!-- review-copies:review head=<sha> run=<run> -->` and ends with
`<!-- review-copies:fps=<fp>,<fp>,... -->` for the findings it lists in its text.
Fingerprints hash path, rule and the normalised code, not the line, so they survive line
shifts, rebases and force-pushes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from review_copies.model.findings import Finding
from review_copies.output.markdown import MENTION

PREFIX = "review-copies:"
_FP = r"[0-9a-f]{16}"
_FINDING = re.compile(rf"<!-- review-copies:fp=({_FP}) rule=([A-Za-z0-9_.-]+) -->")
_LISTED = re.compile(r"<!-- review-copies:fps=([0-9a-f,]*) -->")
_REVIEW = re.compile(r"<!-- review-copies:review head=([0-9a-f]+) run=([A-Za-z0-9_.-]+) -->")
_PROBE = "<!-- review-copies:probe -->"


def finding_marker(f: Finding) -> str:
    return f"<!-- {PREFIX}fp={f.fingerprint} rule={f.rule} -->"


def listed_marker(fingerprints: Iterable[str]) -> str:
    return f"<!-- {PREFIX}fps={','.join(fingerprints)} -->"


def review_marker(head_sha: str, run_key: str) -> str:
    return f"<!-- {PREFIX}review head={head_sha} run={run_key} -->"


def probe_marker() -> str:
    return _PROBE


def comment_fingerprint(body: str) -> str | None:
    match = _FINDING.search(body or "")
    return match.group(1) if match else None


def body_fingerprints(body: str) -> set[str]:
    found: set[str] = set()
    for match in _LISTED.finditer(body or ""):
        found.update(fp for fp in match.group(1).split(",") if re.fullmatch(_FP, fp))
    return found


def review_run(body: str) -> tuple[str, str] | None:
    """(head sha, run key) of a review body the bot wrote, or None."""
    match = _REVIEW.search(body or "")
    return (match.group(1), match.group(2)) if match else None


def is_probe(body: str) -> bool:
    return _PROBE in (body or "")


def defuse(text: str) -> str:
    """Text from the model or from a report, made safe to post: it can neither forge a
    marker (an HTML comment) nor notify anyone (@mentions)."""
    text = text.replace("<!--", "&lt;!--")
    return MENTION.sub("@\u200b", text)
