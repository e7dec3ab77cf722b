"""Post one review (`event: COMMENT`) with its inline comments, and get it through.

- A POST that creates content is never retried blindly: after a 5xx or a dropped
  connection the bot first looks for its own review (by the run key in the body), since
  the POST may have landed; rate limits are waited out only as long as GitHub asks, a few
  times at most.
- A 422 rejects the whole review without saying which comment is wrong. The comments are
  then tried in halves as PENDING reviews (deleted right away) to find the ones GitHub
  refuses; those move into the review body and the rest are posted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from review_copies.github import markers
from review_copies.github.actions_env import PullRequest
from review_copies.github.api import ApiError, GitHubClient, Response
from review_copies.github.bodies import comment_body
from review_copies.github.diff_positions import Inline
from review_copies.model.findings import Finding

MAX_INLINE = 30
MAX_POST_RETRIES = 2
# Probing costs two content-creating requests each; GitHub allows about 80 a minute.
MAX_PROBES = 20
REJECTED = "GitHub refused to attach it to the diff"
OVER_LIMIT = f"more than {MAX_INLINE} inline comments in one review"

BodyMaker = Callable[[Sequence[Inline], Sequence[tuple[Finding, str]]], str]


@dataclass(frozen=True)
class Posted:
    review_id: int | None
    html_url: str
    inline: list[Inline]
    listed: list[tuple[Finding, str]]


def comment_payload(spot: Inline) -> dict[str, Any]:
    out: dict[str, Any] = {"path": spot.finding.path, "line": spot.line, "side": "RIGHT", "body": comment_body(spot)}
    if spot.start_line is not None:
        out["start_line"] = spot.start_line
        out["start_side"] = "RIGHT"
    return out


def publish(
    client: GitHubClient,
    pr: PullRequest,
    run_key: str,
    inline: Sequence[Inline],
    listed: Sequence[tuple[Finding, str]],
    make_body: BodyMaker,
    pending: Sequence[int] = (),
) -> Posted:
    for review_id in pending:
        _delete_pending(client, pr, review_id)
    inline, listed = list(inline), list(listed)
    try:
        return _post(client, pr, run_key, inline, listed, make_body)
    except ApiError as error:
        if not error.unprocessable or not inline:
            raise
    accepted, refused = find_refused(client, pr, inline)
    listed += [(spot.finding, REJECTED) for spot in refused]
    try:
        return _post(client, pr, run_key, accepted, listed, make_body)
    except ApiError as error:
        if not error.unprocessable or not accepted:
            raise
    # GitHub still refuses, for a reason the probes did not show: post the body alone.
    return _post(client, pr, run_key, [], listed + [(spot.finding, REJECTED) for spot in accepted], make_body)


def _post(client: GitHubClient, pr: PullRequest, run_key: str, inline: list[Inline], listed: list[tuple[Finding, str]], make_body: BodyMaker) -> Posted:
    payload = {
        "commit_id": pr.head_sha,
        "event": "COMMENT",
        "body": make_body(inline, listed),
        "comments": [comment_payload(spot) for spot in inline],
    }
    data = create_review(client, pr, run_key, payload).data
    data = data if isinstance(data, dict) else {}
    review_id = data.get("id") if isinstance(data.get("id"), int) else None
    return Posted(review_id, str(data.get("html_url") or ""), inline, listed)


def create_review(client: GitHubClient, pr: PullRequest, run_key: str, payload: dict[str, Any]) -> Response:
    attempt = 0
    while True:
        try:
            return client.request("POST", f"{pr.api_path}/reviews", body=payload, retry=False)
        except ApiError as error:
            attempt += 1
            if error.status is None or (error.status >= 500):
                landed = _find_own_review(client, pr, run_key)
                if landed is not None:
                    return Response(200, {}, landed)
            # A limit on content creation is tried once more at most, after the wait GitHub
            # asks for: repeated tries are what gets a token blocked.
            retries = 1 if error.rate_limited else MAX_POST_RETRIES
            wait = client.wait_before_retry(error, attempt) if attempt <= retries else None
            if wait is None:
                raise
            client.sleep(wait)


def _find_own_review(client: GitHubClient, pr: PullRequest, run_key: str) -> dict[str, Any] | None:
    try:
        for review in client.paginate(f"{pr.api_path}/reviews"):
            run = markers.review_run(str(review.get("body") or "")) if isinstance(review, dict) else None
            if run is not None and run[1] == run_key and review.get("state") != "PENDING":
                return review
    except ApiError:
        return None
    return None


# ------------------------------------------------------------------- 422 probing


def find_refused(client: GitHubClient, pr: PullRequest, inline: Sequence[Inline]) -> tuple[list[Inline], list[Inline]]:
    """Split the comments into those GitHub accepts and those it refuses. The whole set is
    known to fail, so the search starts with its halves; untested ones (the probe budget
    ran out) count as refused, since the body always takes them."""
    accepted: list[Inline] = []
    refused: list[Inline] = []
    budget = [MAX_PROBES]

    def search(group: list[Inline], known_bad: bool) -> None:
        if not group:
            return
        if not known_bad:
            if budget[0] <= 0:
                refused.extend(group)
                return
            budget[0] -= 1
            if _probe(client, pr, group):
                accepted.extend(group)
                return
        if len(group) == 1:
            refused.extend(group)
            return
        mid = len(group) // 2
        search(group[:mid], False)
        search(group[mid:], False)

    search(list(inline), True)
    order = {id(spot): i for i, spot in enumerate(inline)}
    return sorted(accepted, key=lambda s: order[id(s)]), sorted(refused, key=lambda s: order[id(s)])


def _probe(client: GitHubClient, pr: PullRequest, group: list[Inline]) -> bool:
    """Would GitHub take these comments? A PENDING review (no `event`) answers without
    anyone seeing it; it is deleted at once."""
    payload = {"commit_id": pr.head_sha, "body": markers.probe_marker(), "comments": [comment_payload(s) for s in group]}
    try:
        response = client.request("POST", f"{pr.api_path}/reviews", body=payload, retry=False)
    except ApiError as error:
        if error.unprocessable:
            return False
        raise
    data = response.data if isinstance(response.data, dict) else {}
    if isinstance(data.get("id"), int):
        _delete_pending(client, pr, data["id"])
    return True


def _delete_pending(client: GitHubClient, pr: PullRequest, review_id: int) -> None:
    try:
        client.request("DELETE", f"{pr.api_path}/reviews/{review_id}")
    except ApiError as error:
        if error.status != 404:
            raise
