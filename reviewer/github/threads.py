"""Resolve the bot's own review threads whose finding the author has fixed.

A thread is resolved only when all of these hold: its first comment carries the bot's
marker, this run no longer finds that fingerprint, GitHub marks the thread outdated (the
commented lines changed, so the finding's absence is not just a model answering
differently), nobody else wrote in it, and it is not resolved yet. REST has no way to
resolve a thread: this is GraphQL (`resolveReviewThread`, falling back to
`minimizeComment` with classifier OUTDATED).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from review_copies.github.actions_env import PullRequest
from review_copies.github.api import ApiError, GitHubClient
from review_copies.github.history import BotComment, History

THREADS = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id
          isResolved
          isOutdated
          comments(first: 100) { nodes { databaseId isMinimized author { login } } }
        }
      }
    }
  }
}
"""
RESOLVE = "mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { id isResolved } } }"
MINIMIZE = "mutation($id: ID!) { minimizeComment(input: {subjectId: $id, classifier: OUTDATED}) { minimizedComment { isMinimized } } }"
MAX_PAGES = 50


@dataclass(frozen=True)
class Thread:
    id: str
    resolved: bool
    outdated: bool
    root_id: int
    root_minimized: bool
    authors: frozenset[str]


def stale(history: History, current: set[str]) -> list[BotComment]:
    return [c for c in history.comments if c.fingerprint not in current and c.id not in history.replied]


def resolve_fixed(client: GitHubClient, pr: PullRequest, history: History, current: set[str]) -> tuple[int, list[str]]:
    """Resolve what no longer applies; returns how many, and problems worth a mention."""
    candidates = stale(history, current)
    if not candidates:
        return 0, []
    try:
        threads = {t.root_id: t for t in read_threads(client, pr)}
    except ApiError as error:
        return 0, [f"could not read review threads ({error.describe()})"]
    resolved, problems = 0, []
    for comment in candidates:
        thread = threads.get(comment.id)
        if thread is None or thread.resolved or thread.root_minimized or not thread.outdated or len(thread.authors) > 1:
            continue
        problem = _close(client, thread, comment)
        if problem is None:
            resolved += 1
        else:
            problems.append(problem)
    return resolved, problems


def _close(client: GitHubClient, thread: Thread, comment: BotComment) -> str | None:
    try:
        client.graphql(RESOLVE, {"id": thread.id})
        return None
    except ApiError as error:
        if not comment.node_id:
            return f"could not resolve a fixed finding's thread ({error.describe()})"
    try:
        client.graphql(MINIMIZE, {"id": comment.node_id})
        return None
    except ApiError as error:
        return f"could not resolve or hide a fixed finding's comment ({error.describe()})"


def read_threads(client: GitHubClient, pr: PullRequest) -> Iterator[Thread]:
    owner, name = pr.repository.split("/", 1)
    cursor = None
    for _ in range(MAX_PAGES):
        data = client.graphql(THREADS, {"owner": owner, "name": name, "number": pr.number, "cursor": cursor})
        page = (((data.get("repository") or {}).get("pullRequest") or {}).get("reviewThreads")) or {}
        for node in page.get("nodes") or []:
            thread = _thread(node)
            if thread is not None:
                yield thread
        info = page.get("pageInfo") or {}
        if not info.get("hasNextPage") or not info.get("endCursor"):
            return
        cursor = info["endCursor"]


def _thread(node: object) -> Thread | None:
    if not isinstance(node, dict) or not isinstance(node.get("id"), str):
        return None
    comments = [c for c in ((node.get("comments") or {}).get("nodes") or []) if isinstance(c, dict)]
    if not comments or not isinstance(comments[0].get("databaseId"), int):
        return None
    authors = frozenset(str((c.get("author") or {}).get("login", "")) for c in comments)
    return Thread(
        id=node["id"],
        resolved=bool(node.get("isResolved")),
        outdated=bool(node.get("isOutdated")),
        root_id=comments[0]["databaseId"],
        root_minimized=bool(comments[0].get("isMinimized")),
        authors=authors,
    )
