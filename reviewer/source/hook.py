"""What a pre-commit hook run hands the reviewer, as a change to review.

pre-commit calls the hook with file names, in three situations that need three reviews:
a commit (the staged change of those files: the working tree against HEAD, since pre-commit
stashes what is not staged), `--from-ref A --to-ref B` (pre-push, CI: it sets
PRE_COMMIT_FROM_REF/TO_REF; review what B changed since A), and `--all-files` / `--files`
(the files as they are: nothing differs from HEAD, so a change review would check nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import git

from review_copies.model.errors import UsageError
from review_copies.model.settings import ChangeSpec
from review_copies.source.changes import open_repo, pathspecs
from review_copies.source.plumbing import GIT_CONFIG, GIT_ENV


def pre_commit_change(req: ChangeSpec, env: Mapping[str, str]) -> ChangeSpec:
    if req.base or req.head or req.diff is not None:
        raise UsageError("--pre-commit takes the change from pre-commit; drop --base, --head and --diff")
    # PRE_COMMIT_SOURCE/ORIGIN: the names pre-commit used before 2.2.
    from_ref = env.get("PRE_COMMIT_FROM_REF") or env.get("PRE_COMMIT_SOURCE")
    to_ref = env.get("PRE_COMMIT_TO_REF") or env.get("PRE_COMMIT_ORIGIN")
    if from_ref and to_ref:
        return replace(req, base=from_ref, head=to_ref)
    if req.all or not req.paths:
        return req
    repo = open_repo(req.repo)
    return req if _changed(repo, pathspecs(repo, req.paths)) else replace(req, all=True)


def _changed(repo: git.Repo, specs: list[str]) -> bool:
    try:
        repo.git.execute(["git", *GIT_CONFIG, "diff", "--quiet", "HEAD", "--", *specs], env=GIT_ENV)
    except git.GitCommandError:
        return True  # differences (exit 1), or no HEAD yet: the first commit is all change
    return False
