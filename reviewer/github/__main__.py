"""`python -m review_copies.github post-report REPORT --pull-request-file FILE`

The privileged half of the fork-safe setup: run from a `workflow_run` job, it posts the
review that the unprivileged `pull_request` job saved with `--format json`, without
checking out or running anything of the pull request.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, NoReturn

from review_copies.github.actions_env import load_event, parse_pull_request, read_env
from review_copies.github.api import ApiError, GitHubClient, RetryPolicy
from review_copies.github.delivery import Job, deliver
from review_copies.github.pr_files import ApiLines, api_diff_map
from review_copies.github.saved_report import load_report, rederive, workflow_run_head
from review_copies.model.errors import UsageError
from review_copies.rules import all_rules

POST_REPORT = "python -m review_copies.github"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=POST_REPORT, description="Post a review saved by an unprivileged job (the fork-safe setup).")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    post = commands.add_parser("post-report", help="post a saved --format json report on its pull request")
    post.add_argument("report", help="the JSON report the pull_request job saved")
    post.add_argument("--pull-request-file", required=True, metavar="FILE", help="a file holding the pull request's number, saved by the same job")
    return parser


def read_number(path: str) -> int:
    try:
        text = Path(path).read_text(encoding="ascii", errors="replace")[:32].strip()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if not text.isdigit() or not 0 < int(text) < 10**9:
        raise UsageError(f"{path} does not hold a pull request number")
    return int(text)


def post_report(report_path: str, number_path: str, stdout: IO[str], stderr: IO[str]) -> int:
    actions = read_env(os.environ)
    head_sha, head_repo = workflow_run_head(load_event(actions))
    number = read_number(number_path)
    if not actions.token:
        raise UsageError("GITHUB_TOKEN is not set: the posting job needs it, with `pull-requests: write`")
    client = GitHubClient(actions.api_url, actions.token, actions.graphql_url, RetryPolicy.from_env(os.environ))
    try:
        pr = parse_pull_request(client.request("GET", f"repos/{actions.repository}/pulls/{number}").data or {}, actions.repository)
        diff = api_diff_map(client, pr)
    except ApiError as error:
        raise UsageError(f"cannot read pull request #{number}: {error.describe()}") from None
    # The number comes from the untrusted job: it must name the pull request that job ran on.
    if pr.head_sha != head_sha or (head_repo is not None and pr.head_repository != head_repo):
        here, there = f"{pr.head_sha[:12]} of {pr.head_repository}", f"{head_sha[:12]} of {head_repo}"
        raise UsageError(f"pull request #{number} is at {here}, not at {there}, where the review ran")
    saved, malformed = load_report(report_path)
    lines = ApiLines(client, pr, diff)
    report, _ = rederive(saved, lines)
    if malformed:
        stderr.write(f"{POST_REPORT}: warning: {malformed} malformed entr{'ies' if malformed != 1 else 'y'} of the saved report left out\n")
    description = f"#{pr.number} at {pr.head_sha[:12]} (a report saved by the pull request's own workflow run)"
    job = Job(actions=actions, pr=pr, report=report, rules=all_rules(), description=description, diff=diff, read_lines=lines)
    outcome = deliver(job, client, stdout, stderr)
    return 1 if outcome.failure else 0


def main(argv: Sequence[str] | None = None, stdout: IO[str] | None = None, stderr: IO[str] | None = None) -> int:
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        return post_report(args.report, args.pull_request_file, stdout, stderr)
    except UsageError as exc:
        stderr.write(f"{POST_REPORT}: error: {exc}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
