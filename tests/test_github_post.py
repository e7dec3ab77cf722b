"""`review-copies --post-review` end to end: a real git repository, a real pull_request
event payload, and a fake GitHub API over real HTTP."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.github_fake import BOT, FakeGitHub
from tests.github_repo import TRAIN_HEAD, Actions, PullRequestRepo, commit, fingerprint, make_pull_request

RC301_FP = fingerprint("train.py", "RC301", "    y = torch.tensor(\n        x\n    )")
RC321_FP = fingerprint("train.py", "RC321", "    return (w * 2).numpy()")


@pytest.fixture
def fake(httpserver) -> FakeGitHub:
    return FakeGitHub(httpserver)


@pytest.fixture
def pr(tmp_path: Path, fake: FakeGitHub) -> PullRequestRepo:
    pr = make_pull_request(tmp_path)
    fake.set_diff(str(pr.path), pr.base, pr.head)
    return pr


@pytest.fixture
def actions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake: FakeGitHub) -> Actions:
    return Actions(monkeypatch, tmp_path, fake.api_url)


def _by_rule(review_comments: list[dict]) -> dict[str, dict]:
    out = {}
    for c in review_comments:
        match = re.search(r"rule=(RC\d+)", c["body"])
        assert match, c["body"]
        out[match.group(1)] = c
    return out


def test_one_review_with_comments_on_the_right_lines(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    run = actions.run(pr)

    posts = fake.calls("POST", "/reviews")
    assert len(posts) == 1
    review = posts[0]
    assert review["event"] == "COMMENT" and review["commit_id"] == pr.head
    comments = _by_rule(review["comments"])
    assert set(comments) == {"RC301", "RC321"}, "legacy.py, fixed on main after the branch point, is not part of the pull request"
    multi = comments["RC301"]
    assert (multi["path"], multi["start_line"], multi["line"], multi["side"], multi["start_side"]) == ("train.py", 5, 7, "RIGHT", "RIGHT")
    assert "```suggestion\n    y = x.detach().clone()\n```" in multi["body"]
    assert f"<!-- review-copies:fp={RC301_FP} rule=RC301 -->" in multi["body"]
    single = comments["RC321"]
    assert (single["path"], single["line"], single["side"]) == ("train.py", 13, "RIGHT") and "start_line" not in single
    assert "```suggestion\n    return (w * 2).detach().cpu().numpy()\n```" in single["body"]
    assert f"fp={RC321_FP}" in single["body"]
    assert "numpy-bridge" in single["body"] and "sandbox not run" in single["body"]

    body = review["body"]
    assert "<!-- review-copies:review head=" + pr.head in body
    assert "| copy-construct | 1 |" in body and "| numpy-bridge | 1 |" in body and "2 not run" in body
    # The log, the job summary and the step outputs say the same.
    assert run.rc == 1 and "RC321" in run.stdout
    assert "Posted [a review]" in run.summary and "with 2 inline comments" in run.summary
    assert run.outputs["findings"] == "2" and run.outputs["errors"] == "1" and run.outputs["posted"] == "2"


def test_second_run_on_the_same_head_posts_nothing(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    first = actions.run(pr)
    second = actions.run(pr)

    assert len(fake.calls("POST", "/reviews")) == 1
    assert len(fake.comments) == 2
    assert second.rc == first.rc == 1, "the exit status still follows --fail-on"
    assert "Nothing new to post" in second.summary and second.outputs["posted"] == "0"


def test_after_a_new_commit_only_new_findings_are_posted_and_fixed_ones_resolved(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    actions.run(pr)
    fixed = TRAIN_HEAD.replace("(w * 2).numpy()", "(w * 2).detach().cpu().numpy()")
    pr.push({"train.py": fixed, "extra.py": "import torch\n\n\ndef h(t: torch.Tensor):\n    return torch.Tensor(t)\n"})
    fake.set_diff(str(pr.path), pr.base, pr.head)
    fake.outdate("train.py", 13)  # GitHub's doing, when the push changes line 13

    run = actions.run(pr)

    posts = fake.calls("POST", "/reviews")
    assert len(posts) == 2
    new = posts[1]["comments"]
    assert [(c["path"], c["line"]) for c in new] == [("extra.py", 5)] and "RC302" in new[0]["body"]
    assert "Not repeated: 1 finding already posted" in posts[1]["body"]
    resolved = [t for t in fake.threads.values() if t["isResolved"]]
    numpy_comment = next(c for c in fake.comments if "RC321" in c["body"])
    assert [t["id"] for t in resolved] == [f"PRRT_{numpy_comment['id']}"], "only the fixed finding's thread is resolved"
    assert "Resolved 1 earlier comment" in run.summary


def test_when_a_thread_cannot_be_resolved_the_comment_is_marked_outdated(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    actions.run(pr)
    fake.resolvable = False
    pr.push({"train.py": TRAIN_HEAD.replace("(w * 2).numpy()", "(w * 2).detach().cpu().numpy()")})
    fake.set_diff(str(pr.path), pr.base, pr.head)
    fake.outdate("train.py", 13)

    run = actions.run(pr)

    numpy_comment = next(c for c in fake.comments if "RC321" in c["body"])
    assert fake.threads[numpy_comment["id"]]["isMinimized"] and not fake.threads[numpy_comment["id"]]["isResolved"]
    assert sum(t["isMinimized"] for t in fake.threads.values()) == 1
    assert "Resolved 1 earlier comment" in run.summary
    # Done once: the next run leaves the hidden comment alone.
    actions.run(pr)
    mutations = [b["query"] for b in fake.calls("POST", "/graphql") if b["query"].startswith("mutation")]
    assert len(mutations) == 2, "one refused resolve, one minimize, and nothing on the third run"


def test_a_finding_merely_not_seen_this_time_is_not_resolved(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    """Only a change of the commented lines shows a fix; a narrower run (or a model that
    answers differently) is no reason to close a thread."""
    actions.run(pr)

    actions.run(pr, "legacy.py")

    assert not any(t["isResolved"] or t["isMinimized"] for t in fake.threads.values())


def test_a_thread_with_a_human_reply_is_never_resolved(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    actions.run(pr)
    numpy_comment = next(c for c in fake.comments if "RC321" in c["body"])
    fake.reply(numpy_comment["id"], "bob", "Intentional: this path never sees grad.")
    pr.push({"train.py": TRAIN_HEAD.replace("(w * 2).numpy()", "(w * 2).detach().cpu().numpy()")})
    fake.set_diff(str(pr.path), pr.base, pr.head)
    fake.outdate("train.py", 13)

    actions.run(pr)

    assert not any(t["isResolved"] or t["isMinimized"] for t in fake.threads.values())
    assert len(fake.calls("POST", "/reviews")) == 1, "nothing new to post"


def test_comments_already_on_the_pull_request_are_read_across_pages(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    fake.page_size = 1
    actions.run(pr)
    actions.run(pr)

    assert len(fake.calls("POST", "/reviews")) == 1
    pages = [p for m, p, _ in fake.requests if m == "GET" and p.endswith("/comments")]
    assert len(pages) >= 1 + 2, "the second run read every page of the comments"


def test_read_only_token_falls_back_to_annotations_and_the_job_summary(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    fake.writable = False
    actions.head_repo = "mallory/torchproj"

    run = actions.run(pr)

    assert fake.posted_reviews() == []
    assert run.rc == 1
    assert re.search(r"^::error file=train\.py,line=13,endLine=13,title=RC321 numpy-bridge::", run.stdout, re.MULTILINE)
    assert re.search(r"^::warning file=train\.py,line=5,endLine=7,title=RC301 copy-construct::", run.stdout, re.MULTILINE)
    assert "403 Resource not accessible by integration" in run.stderr and "fork" in run.stderr
    assert "Could not post a review" in run.summary and "`train.py:13` · numpy-bridge" in run.summary


def test_no_token_at_all_still_reviews(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    actions.token = ""
    run = actions.run(pr)

    assert fake.requests == []
    assert run.rc == 1 and "::error file=train.py" in run.stdout and "GITHUB_TOKEN is not set" in run.stderr


def test_a_422_on_one_comment_moves_it_into_the_body(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    fake.refuse.add(("train.py", 13))

    run = actions.run(pr)

    posted = fake.posted_reviews()
    assert len(posted) == 1
    inline = [c for c in fake.comments if not c["_pending"]]
    assert [(c["start_line"], c["line"]) for c in inline] == [(5, 7)]
    body = posted[0]["body"]
    assert "**`train.py:13`** · numpy-bridge · `RC321` (error), *GitHub refused to attach it to the diff*" in body
    assert RC321_FP in body
    assert not [r for r in fake.reviews if r["state"] == "PENDING"], "probe reviews are deleted"
    assert run.rc == 1
    # Listed in the body counts as posted: the next run adds nothing.
    actions.run(pr)
    assert len(fake.posted_reviews()) == 1


def test_5xx_and_429_are_retried(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    fake.fail("GET", "/comments", 502)
    fake.fail("POST", "/reviews", 429, {"Retry-After": "0"}, {"message": "API rate limit exceeded"})

    run = actions.run(pr)

    assert len(fake.posted_reviews()) == 1
    assert len(fake.calls("POST", "/reviews")) == 2
    assert run.outputs["posted"] == "2" and "cannot post" not in run.stderr


def test_a_review_that_landed_behind_a_502_is_not_posted_again(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    fake.fail("POST", "/reviews", 502, after=True)

    run = actions.run(pr)

    assert len(fake.posted_reviews()) == 1
    assert len(fake.calls("POST", "/reviews")) == 1, "the bot looked for its review before posting again"
    assert "Posted" in run.summary


def test_a_long_secondary_rate_limit_is_not_waited_out_nor_retried(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    fake.fail("POST", "/reviews", 403, {"Retry-After": "3600"}, {"message": "You have exceeded a secondary rate limit"}, times=5)

    run = actions.run(pr)

    assert len(fake.calls("POST", "/reviews")) == 1
    assert "rate limit" in run.stderr and "::error file=train.py" in run.stdout
    assert run.rc == 1


def test_github_down_does_not_crash(pr: PullRequestRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    closed = Actions(monkeypatch, tmp_path, "http://127.0.0.1:9")
    run = closed.run(pr, "--fail-on", "error")

    assert run.rc == 1 and "GitHub's API is not answering" in run.stderr
    assert "::error file=train.py" in run.stdout and "Could not post a review" in run.summary
    assert "internal error" not in run.stderr


def test_at_most_30_inline_comments_the_rest_in_the_body(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    lines = "".join(f"    a{i} = torch.tensor(x{i})\n" for i in range(35))
    pr.push({"many.py": f"import torch\n\n\ndef f({', '.join(f'x{i}: torch.Tensor' for i in range(35))}):\n{lines}"})
    fake.set_diff(str(pr.path), pr.base, pr.head)

    actions.run(pr)

    review = fake.calls("POST", "/reviews")[0]
    assert len(review["comments"]) == 30
    assert review["body"].count("*more than 30 inline comments in one review*") == 7
    assert len(review["body"]) < 65536


def test_findings_outside_the_diff_go_to_the_body(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    old = "import torch\n\n\ndef old(t: torch.Tensor):\n    return torch.tensor(t)\n" + "\n" * 10 + "\ndef new(x: torch.Tensor):\n    return x\n"
    pr.repo.git.checkout("main")
    pr.base = commit(pr.repo, {"wide.py": old}, "wide file")
    pr.repo.git.checkout("feature")
    pr.repo.git.merge("main", "--no-edit")
    pr.push({"wide.py": old.replace("    return x\n", "    return x + 1\n")})
    fake.set_diff(str(pr.path), pr.base, pr.head)

    actions.run(pr, "--all", "wide.py")

    review = fake.calls("POST", "/reviews")[0]
    assert review["comments"] == []
    assert "**`wide.py:5`** · copy-construct · `RC301` (warning), *outside the lines this pull request changes*" in review["body"]


def test_ghes_api_and_graphql_paths(httpserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeGitHub(httpserver, prefix="/api/v3")
    pr = make_pull_request(tmp_path)
    fake.set_diff(str(pr.path), pr.base, pr.head)
    actions = Actions(monkeypatch, tmp_path, fake.api_url)
    actions.run(pr)
    pr.push({"train.py": TRAIN_HEAD.replace("(w * 2).numpy()", "(w * 2).detach().cpu().numpy()")})
    fake.set_diff(str(pr.path), pr.base, pr.head)
    fake.outdate("train.py", 13)

    actions.run(pr)

    assert fake.calls("POST", "/api/graphql"), "GraphQL goes to /api/graphql on GitHub Enterprise Server"
    assert sum(t["isResolved"] for t in fake.threads.values()) == 1


def test_a_shallow_checkout_is_completed_by_fetching(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions, tmp_path: Path) -> None:
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "main", f"file://{pr.path}", str(shallow)], check=True)
    pr_in_shallow = PullRequestRepo(shallow, pr.repo, pr.base, pr.head, pr.merge_base)

    run = actions.run(pr_in_shallow)

    assert run.rc == 1 and len(fake.posted_reviews()) == 1
    assert {c["line"] for c in fake.comments} == {7, 13}


def test_a_checkout_without_the_commits_says_what_to_do(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions, tmp_path: Path) -> None:
    lone = tmp_path / "lone"
    subprocess.run(["git", "init", "-q", str(lone)], check=True)
    run = actions.run(PullRequestRepo(lone, pr.repo, pr.base, pr.head, pr.merge_base))

    assert run.rc == 2
    assert run.stderr.count("\n") == 1 and "fetch-depth: 0" in run.stderr and pr.base[:12] in run.stderr
    assert fake.requests == []


def test_not_a_pull_request_event(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions, tmp_path: Path) -> None:
    push_event = tmp_path / "push.json"
    push_event.write_text(json.dumps({"ref": "refs/heads/main", "after": pr.head}))

    run = actions.run(pr, event=push_event, event_name="push")

    assert run.rc == 2 and "--post-review needs a pull_request event; the push event names no pull request" in run.stderr
    assert fake.requests == []


def test_the_bot_identity_is_not_assumed(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    """A personal token posts as a person (`GET /user` says who): its marked comments are
    still recognised."""
    fake.user = "maintainer"
    actions.run(pr)
    assert {c["user"]["login"] for c in fake.comments} == {"maintainer"}
    actions.run(pr)
    assert len(fake.posted_reviews()) == 1


def test_a_marker_in_someone_elses_comment_does_not_silence_the_bot(fake: FakeGitHub, pr: PullRequestRepo, actions: Actions) -> None:
    """Anyone can paste the bot's hidden marker into a comment or a review of their own:
    only what the token itself posted counts as already posted (issue 18)."""
    actions.run(pr)
    posted = [dict(c) for c in fake.comments]
    forged_reviews = [dict(r) for r in fake.posted_reviews()]
    fake.comments.clear()
    fake.reviews.clear()
    for c in posted:
        fake.comments.append({**c, "user": {"login": "stranger", "type": "User"}})
    for r in forged_reviews:
        fake.reviews.append({**r, "user": {"login": "stranger", "type": "User"}})
    actions.run(pr)
    mine = [c for c in fake.comments if c["user"]["login"] == BOT]
    assert len(mine) == len(posted) and len(fake.posted_reviews()) == len(forged_reviews) + 1
