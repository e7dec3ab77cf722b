"""Make sure the checkout holds what the review needs: the pull request's base and head
commits and enough history between them to find their merge base.

`actions/checkout` fetches one commit (the merge commit) by default. What is missing is
fetched once; the token travels in the environment of that one git process, never in the
repository's configuration, so nothing of it stays on disk.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import git

from review_copies.github.actions_env import ActionsEnv, PullRequest
from review_copies.model.errors import UsageError

_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
FETCH_TIMEOUT = 600
ADVICE = "check out the pull request with actions/checkout and `fetch-depth: 0`"


def ensure_commits(repo: git.Repo, pr: PullRequest, actions: ActionsEnv) -> None:
    commits = (pr.base_sha, pr.head_sha)
    if _ready(repo, commits):
        return
    problems = []
    for auth in _auth_variants(actions):
        problem = _fetch(repo, commits, _remote(repo, pr, actions), auth)
        if problem is None and _ready(repo, commits):
            return
        problems.append(problem or "the merge base is still missing")
    missing = [sha[:12] for sha in commits if not _has(repo, sha)]
    what = f"lacks commit {', '.join(missing)}" if missing else "lacks the history between base and head"
    raise UsageError(f"the checkout {what} and fetching it failed ({problems[-1]}): {ADVICE}")


def _ready(repo: git.Repo, commits: Sequence[str]) -> bool:
    if not all(_has(repo, sha) for sha in commits):
        return False
    try:
        repo.git.execute(["git", "merge-base", *commits], env=_GIT_ENV)
        return True
    except git.GitCommandError:
        return False


def _has(repo: git.Repo, sha: str) -> bool:
    try:
        repo.git.execute(["git", "cat-file", "-e", f"{sha}^{{commit}}"], env=_GIT_ENV)
        return True
    except git.GitCommandError:
        return False


def _remote(repo: git.Repo, pr: PullRequest, actions: ActionsEnv) -> str:
    names = [r.name for r in repo.remotes]
    return "origin" if "origin" in names else f"{actions.server_url}/{pr.repository}.git"


def _auth_variants(actions: ActionsEnv) -> list[dict[str, str]]:
    """First as the checkout left things (its persisted credential, or anonymous for a public
    repository); then with our token. Not both at once: two Authorization headers make
    GitHub answer 400."""
    variants: list[dict[str, str]] = [{}]
    if actions.token:
        basic = base64.b64encode(f"x-access-token:{actions.token}".encode()).decode()
        variants.append(
            {
                "GIT_CONFIG_COUNT": "1",
                "GIT_CONFIG_KEY_0": f"http.{actions.server_url}/.extraheader",
                "GIT_CONFIG_VALUE_0": f"AUTHORIZATION: basic {basic}",
            }
        )
    return variants


def _fetch(repo: git.Repo, commits: Sequence[str], remote: str, auth: dict[str, str]) -> str | None:
    shallow = repo.git.execute(["git", "rev-parse", "--is-shallow-repository"], env=_GIT_ENV).strip() == "true"
    args = ["git", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head"]
    if shallow:
        args.append("--unshallow")
    try:
        repo.git.execute([*args, "--", remote, *commits], env={**_GIT_ENV, **auth}, kill_after_timeout=FETCH_TIMEOUT)
        return None
    except git.GitCommandError as exc:
        lines = [ln for ln in str(exc.stderr or "").replace("stderr:", "").splitlines() if ln.strip().strip("'")]
        return " ".join(lines[-1].split()).strip("'") if lines else f"git fetch exit status {exc.status}"
