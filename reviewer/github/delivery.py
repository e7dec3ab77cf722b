"""From a finished review to the pull request: skip what is already posted, resolve what
was fixed, post the rest as one review, and fall back to annotations when GitHub will not
take it. The job summary and the step outputs are written in every case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO

from review_copies.github.actions_env import ActionsEnv, PullRequest
from review_copies.github.api import ApiError, GitHubClient
from review_copies.github.bodies import ReviewSummary, review_body
from review_copies.github.diff_positions import DiffMap, Inline, LineReader, positions
from review_copies.github.history import read_history
from review_copies.github.reviews_api import MAX_INLINE, OVER_LIMIT, Posted, publish
from review_copies.github.runner_outputs import annotations, append_summary, step_outputs, summary_markdown, write_outputs
from review_copies.github.threads import resolve_fixed
from review_copies.model.findings import Finding, Status
from review_copies.model.report import Report
from review_copies.model.settings import PROG
from review_copies.output.context import RenderContext

FORK_HELP = "a pull request from a fork gets a read-only token under `pull_request`: see “Pull requests from forks” in the README"
PERMISSION_HELP = "give the workflow `permissions: pull-requests: write`"


@dataclass(frozen=True)
class Job:
    actions: ActionsEnv
    pr: PullRequest
    report: Report
    rules: tuple
    description: str
    diff: DiffMap
    read_lines: LineReader
    # The report on standard output already is annotations (--format github).
    annotations_printed: bool = False


@dataclass
class Delivered:
    posted: Posted | None = None
    new: int = 0
    already: int = 0
    resolved: int = 0
    failure: str = ""
    problems: list[str] = field(default_factory=list)


def deliver(job: Job, client: GitHubClient | None, stdout: IO[str], stderr: IO[str]) -> Delivered:
    outcome = Delivered()
    if client is None:
        outcome.failure = "GITHUB_TOKEN is not set"
    else:
        try:
            _review(job, client, outcome)
        except ApiError as error:
            outcome.failure = why_not_posted(error, job.pr)
    if outcome.failure:
        stderr.write(f"{PROG}: cannot post the review: {outcome.failure}; writing annotations and the job summary instead\n")
        if not job.annotations_printed:
            stdout.write(annotations(job.report))
            stdout.flush()
    _finish(job, outcome)
    for problem in outcome.problems:
        stderr.write(f"{PROG}: warning: {problem}\n")
    return outcome


def priority(f: Finding) -> tuple[int, bool, str, int]:
    """Which findings get the 30 inline places first: severe, then sandbox-confirmed."""
    return (-f.severity.rank, f.verification.status is not Status.CONFIRMED, f.path, f.line)


def _review(job: Job, client: GitHubClient, outcome: Delivered) -> None:
    history = read_history(client, job.pr, client.login())
    current = {f.fingerprint for f in job.report.findings}
    outcome.resolved, problems = resolve_fixed(client, job.pr, history, current)
    outcome.problems += problems
    new = sorted((f for f in job.report.findings if f.fingerprint not in history.fingerprints), key=priority)
    outcome.new, outcome.already = len(new), len(job.report.findings) - len(new)
    if not new:
        return
    placement = positions(new, job.diff, job.read_lines)
    inline = placement.inline[:MAX_INLINE]
    listed = placement.body + [(spot.finding, OVER_LIMIT) for spot in placement.inline[MAX_INLINE:]]

    def make_body(spots: Sequence[Inline], entries: Sequence[tuple[Finding, str]]) -> str:
        summary = ReviewSummary(
            head_sha=job.pr.head_sha,
            run_key=job.actions.run_key,
            new=new,
            inline=list(spots),
            listed=list(entries),
            report=job.report,
            already_posted=outcome.already,
            resolved=outcome.resolved,
            description=job.description,
        )
        return review_body(summary)

    outcome.posted = publish(client, job.pr, job.actions.run_key, inline, listed, make_body, history.pending_reviews)


def why_not_posted(error: ApiError, pr: PullRequest) -> str:
    if error.permission_denied:
        return f"the token may not review this pull request ({error.describe()}); {FORK_HELP if pr.from_fork else PERMISSION_HELP}"
    if error.rate_limited:
        return f"GitHub's rate limit stopped it ({error.describe()})"
    if error.transient:
        return f"GitHub's API is not answering ({error.describe()})"
    return error.describe()


def _status_line(job: Job, outcome: Delivered) -> str:
    ref = f"[#{job.pr.number}]({job.pr.html_url})" if job.pr.html_url else f"#{job.pr.number}"
    if outcome.failure:
        return f"**Could not post a review on {ref}**: {outcome.failure}. The findings are below and in the annotations."
    posted = outcome.posted
    if posted is not None:
        listed = f", {len(posted.listed)} listed in its body" if posted.listed else ""
        link = f"[a review]({posted.html_url})" if posted.html_url else "a review"
        return f"Posted {link} on {ref} with {len(posted.inline)} inline comment{'s' if len(posted.inline) != 1 else ''}{listed}."
    if outcome.already:
        return f"Nothing new to post on {ref}: the {outcome.already} finding{'s are' if outcome.already != 1 else ' is'} already there."
    return f"Nothing to post on {ref}."


def _finish(job: Job, outcome: Delivered) -> None:
    preface = [_status_line(job, outcome)]
    if outcome.resolved:
        preface.append(f"Resolved {outcome.resolved} earlier comment{'s' if outcome.resolved != 1 else ''} whose finding was fixed.")
    ctx = RenderContext(rules=job.rules, description=job.description)
    problem = append_summary(job.actions.step_summary, summary_markdown(job.report, ctx, preface))
    if problem:
        outcome.problems.append(problem)
    posted = outcome.posted
    outputs = step_outputs(job.report, posted=len(posted.inline) if posted else 0, review_url=posted.html_url if posted else "")
    problem = write_outputs(job.actions.step_output, outputs)
    if problem:
        outcome.problems.append(problem)
