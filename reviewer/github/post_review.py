"""`review-copies --post-review` (contract section 1): review the pull request of the
Actions event from the merge base of its base and head, and post the findings."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import IO

import git

from review_copies.app import exit_status, review_changeset, write_report
from review_copies.github.actions_env import PullRequest, load_event, pull_request_from_event, read_env
from review_copies.github.api import GitHubClient, RetryPolicy
from review_copies.github.checkout import ensure_commits
from review_copies.github.delivery import Job, deliver
from review_copies.github.diff_positions import diff_map
from review_copies.model.errors import UsageError
from review_copies.model.settings import ChangeSpec, Settings
from review_copies.output import RenderContext
from review_copies.review import fixes
from review_copies.source.changes import Change, RevisionSource, build_changeset, merge_base, open_repo


@dataclass
class GitLines:
    """Lines of files at one commit, read from git objects (never the working tree)."""

    repo: git.Repo
    commit: str
    _cache: dict[str, list[str] | None] = field(default_factory=dict)

    def __call__(self, path: str) -> Sequence[str] | None:
        if path not in self._cache:
            data = RevisionSource(self.repo, self.commit).read(Change(path=path, old_path=path, status="modified"))
            try:
                self._cache[path] = fixes.split_lines(data.decode("utf-8")) if data is not None else None
            except UnicodeDecodeError:
                self._cache[path] = None
        return self._cache[path]


def describe(pr: PullRequest, base_point: str) -> str:
    against = f" with `{pr.base_ref}`" if pr.base_ref else ""
    return f"#{pr.number} at {pr.head_sha[:12]}, against its merge base {base_point[:12]}{against}"


def post_review(settings: Settings, stdout: IO[str], stderr: IO[str]) -> int:
    req = settings.change
    if req.diff is not None or req.base or req.head:
        raise UsageError("--post-review takes base and head from the pull request event; drop --diff, --base and --head")
    actions = read_env(os.environ)
    pr = pull_request_from_event(actions, load_event(actions))
    repo = open_repo(req.repo)
    ensure_commits(repo, pr, actions)
    root = str(repo.working_tree_dir or repo.git_dir)
    change = replace(req, repo=root, base=pr.base_sha, head=pr.head_sha)
    changeset = build_changeset(change)
    report, rules = review_changeset(replace(settings, change=change), changeset, stderr)
    write_report(settings, report, RenderContext(rules=rules, description=changeset.description, explain=settings.explain), stdout)
    # The whole diff, not only the reviewed paths: it is what GitHub lets us comment on.
    diff = diff_map(build_changeset(ChangeSpec(repo=root, base=pr.base_sha, head=pr.head_sha)).changes)
    client = GitHubClient(actions.api_url, actions.token, actions.graphql_url, RetryPolicy.from_env(os.environ)) if actions.token else None
    job = Job(
        actions=actions,
        pr=pr,
        report=report,
        rules=rules,
        description=describe(pr, merge_base(repo, pr.base_sha, pr.head_sha)),
        diff=diff,
        read_lines=GitLines(repo, pr.head_sha),
        annotations_printed=settings.fmt == "github" and not settings.output,
    )
    deliver(job, client, stdout, stderr)
    return exit_status(report, settings.fail_on)
