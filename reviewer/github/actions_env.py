"""The GitHub Actions environment and the pull request named by its event payload."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from review_copies.model.errors import UsageError

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_SERVER_URL = "https://github.com"
_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class ActionsEnv:
    api_url: str
    graphql_url: str | None
    server_url: str
    token: str | None
    repository: str | None
    event_name: str
    event_path: str | None
    step_summary: str | None
    step_output: str | None
    run_id: str
    run_attempt: str

    @property
    def run_key(self) -> str:
        """Names this run in the review body, so a POST that timed out can be recognised."""
        return f"{self.run_id}.{self.run_attempt}"


def read_env(env: Mapping[str, str]) -> ActionsEnv:
    return ActionsEnv(
        api_url=(env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"),
        graphql_url=env.get("GITHUB_GRAPHQL_URL") or None,
        server_url=(env.get("GITHUB_SERVER_URL") or DEFAULT_SERVER_URL).rstrip("/"),
        token=env.get("GITHUB_TOKEN") or None,
        repository=env.get("GITHUB_REPOSITORY") or None,
        event_name=env.get("GITHUB_EVENT_NAME", ""),
        event_path=env.get("GITHUB_EVENT_PATH") or None,
        step_summary=env.get("GITHUB_STEP_SUMMARY") or None,
        step_output=env.get("GITHUB_OUTPUT") or None,
        run_id=env.get("GITHUB_RUN_ID", "local"),
        run_attempt=env.get("GITHUB_RUN_ATTEMPT", "1"),
    )


@dataclass(frozen=True)
class PullRequest:
    repository: str  # owner/name of the base repository, where the review goes
    number: int
    base_sha: str
    head_sha: str
    head_repository: str | None  # None when the fork was deleted
    head_ref: str
    html_url: str
    base_ref: str = ""

    @property
    def from_fork(self) -> bool:
        return self.head_repository != self.repository

    @property
    def api_path(self) -> str:
        return f"repos/{self.repository}/pulls/{self.number}"


def load_event(actions: ActionsEnv) -> dict[str, Any]:
    if not actions.event_path:
        raise UsageError("--post-review runs inside GitHub Actions: GITHUB_EVENT_PATH is not set")
    path = Path(actions.event_path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read the event payload {path}: {exc.strerror}") from None
    except ValueError:
        raise UsageError(f"the event payload {path} is not valid JSON") from None
    if not isinstance(payload, dict):
        raise UsageError(f"the event payload {path} is not a JSON object")
    return payload


def pull_request_from_event(actions: ActionsEnv, payload: Mapping[str, Any]) -> PullRequest:
    pr = payload.get("pull_request")
    if not isinstance(pr, dict):
        event = actions.event_name or "this"
        raise UsageError(f"--post-review needs a pull_request event; the {event} event names no pull request")
    repository = actions.repository or _get(payload, "repository", "full_name")
    return parse_pull_request(pr, repository)


def parse_pull_request(pr: Mapping[str, Any], repository: Any) -> PullRequest:
    """A pull request object as the REST API and the pull_request event both give it."""
    base_sha, head_sha = _get(pr, "base", "sha"), _get(pr, "head", "sha")
    number = pr.get("number")
    if not isinstance(repository, str) or not _REPOSITORY.match(repository):
        raise UsageError("cannot tell the repository: set GITHUB_REPOSITORY to owner/name")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise UsageError("the event's pull request has no number")
    for name, sha in (("base", base_sha), ("head", head_sha)):
        if not isinstance(sha, str) or not _SHA.match(sha):
            raise UsageError(f"the event's pull request has no valid {name}.sha")
    head_repo = _get(pr, "head", "repo", "full_name")
    return PullRequest(
        repository=repository,
        number=number,
        base_sha=base_sha,
        head_sha=head_sha,
        head_repository=head_repo if isinstance(head_repo, str) else None,
        head_ref=str(_get(pr, "head", "ref") or ""),
        html_url=str(pr.get("html_url") or ""),
        base_ref=str(_get(pr, "base", "ref") or ""),
    )


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
