"""What earlier runs left on the pull request: the fingerprints already posted, the bot's
own comments, which of them have replies, and reviews a crashed run left pending. Only
what the bot itself wrote counts: anyone can paste a marker into a comment of their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from review_copies.github import markers
from review_copies.github.actions_env import PullRequest
from review_copies.github.api import GitHubClient


@dataclass(frozen=True)
class BotComment:
    id: int
    node_id: str
    fingerprint: str
    path: str
    author: str


@dataclass
class History:
    # Posted anywhere: in an inline comment or in the list of a review body.
    fingerprints: set[str] = field(default_factory=set)
    comments: list[BotComment] = field(default_factory=list)
    # Comments someone else replied to: never resolved or hidden by the bot.
    replied: set[int] = field(default_factory=set)
    pending_reviews: list[int] = field(default_factory=list)
    # Run keys of the bot's reviews (recognises a POST that succeeded but timed out).
    runs: set[str] = field(default_factory=set)


def read_history(client: GitHubClient, pr: PullRequest, bot: str) -> History:
    """`bot`: the login the token posts as; markers in anyone else's text are ignored."""
    history = History()
    _read_comments(history, list(client.paginate(f"{pr.api_path}/comments")), bot)
    for review in client.paginate(f"{pr.api_path}/reviews"):
        if isinstance(review, dict) and _login(review) == bot:
            _read_review(history, review)
    return history


def _login(item: dict[str, Any]) -> str:
    user = item.get("user")
    return str(user.get("login", "")) if isinstance(user, dict) else ""


def _read_comments(history: History, comments: list[Any], bot: str) -> None:
    roots: dict[int, str] = {}
    for c in comments:
        if not isinstance(c, dict) or not isinstance(c.get("id"), int):
            continue
        roots.setdefault(c["id"], _login(c))
        if c.get("in_reply_to_id") or _login(c) != bot:
            continue
        fp = markers.comment_fingerprint(str(c.get("body") or ""))
        if fp is None:
            continue
        history.fingerprints.add(fp)
        history.comments.append(BotComment(c["id"], str(c.get("node_id") or ""), fp, str(c.get("path") or ""), _login(c)))
    for c in comments:
        if isinstance(c, dict) and c.get("in_reply_to_id"):
            root = c["in_reply_to_id"]
            if _login(c) != roots.get(root):
                history.replied.add(root)


def _read_review(history: History, review: Any) -> None:
    if not isinstance(review, dict):
        return
    body = str(review.get("body") or "")
    run = markers.review_run(body)
    if run is not None:
        history.runs.add(run[1])
        history.fingerprints |= markers.body_fingerprints(body)
    if review.get("state") == "PENDING" and (run is not None or markers.is_probe(body)) and isinstance(review.get("id"), int):
        history.pending_reviews.append(review["id"])
