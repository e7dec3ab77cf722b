"""Real git repositories shaped like a pull request, the Actions environment around them,
and a way to run `review-copies --post-review` in it, for the GitHub tests."""

from __future__ import annotations

import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import git
import pytest

from review_copies.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "github"
REPOSITORY = "octo/torchproj"

LEGACY = """import torch


def legacy(t: torch.Tensor):
    return torch.tensor(t)
"""
LEGACY_FIXED = """import torch


def legacy(t: torch.Tensor):
    return t.detach().clone()
"""
TRAIN_BASE = """import torch


def scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2
"""
# The pull request: a multi-line torch.tensor(x) (lines 5-7) and .numpy() on a tensor
# that requires grad (line 13).
TRAIN_HEAD = """import torch


def scale(x: torch.Tensor) -> torch.Tensor:
    y = torch.tensor(
        x
    )
    return y * 2


def predict():
    w = torch.randn(3, requires_grad=True)
    return (w * 2).numpy()
"""


def fingerprint(path: str, rule: str, code: str) -> str:
    """The contract's fingerprint, computed independently of the code under test."""
    normalised = re.sub(r"\s+", " ", code).strip()
    return hashlib.sha256(f"{path}\0{rule}\0{normalised}".encode()).hexdigest()[:16]


def commit(repo: git.Repo, files: dict[str, str], message: str) -> str:
    root = Path(repo.working_tree_dir or ".")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    repo.index.add(list(files))
    return repo.index.commit(message).hexsha


@dataclass
class PullRequestRepo:
    path: Path
    repo: git.Repo
    base: str  # the base branch's tip, which moved after the branch point
    head: str
    merge_base: str

    def push(self, files: dict[str, str], message: str = "more work") -> str:
        self.repo.git.checkout("feature")
        self.head = commit(self.repo, files, message)
        return self.head


def make_pull_request(root: Path) -> PullRequestRepo:
    """main: legacy.py with a torch.tensor(t) bug; the branch point; then main fixes it.
    feature: adds TRAIN_HEAD. Only a merge-base diff keeps legacy.py out of the review."""
    path = root / "checkout"
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cfg:
        cfg.set_value("user", "name", "Alice")
        cfg.set_value("user", "email", "alice@example.com")
    point = commit(repo, {"legacy.py": LEGACY, "train.py": TRAIN_BASE}, "base")
    repo.git.checkout("-b", "feature")
    head = commit(repo, {"train.py": TRAIN_HEAD}, "snapshot activations")
    repo.git.checkout("main")
    base = commit(repo, {"legacy.py": LEGACY_FIXED}, "fix legacy on main")
    repo.git.checkout("feature")
    return PullRequestRepo(path, repo, base, head, point)


def write_event(path: Path, pr: PullRequestRepo, head_repo: str = REPOSITORY, number: int = 7) -> Path:
    text = (FIXTURES / "pull_request.synchronize.json").read_text()
    text = text.replace("HEAD_SHA", pr.head).replace("BASE_SHA", pr.base).replace("HEAD_REPO", head_repo)
    event = json.loads(text)
    event["number"] = event["pull_request"]["number"] = number
    path.write_text(json.dumps(event))
    return path


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    summary: str
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class Actions:
    """The environment of an Actions job, pointed at a fake GitHub."""

    monkeypatch: pytest.MonkeyPatch
    tmp: Path
    api_url: str
    token: str = "ghs_writer"
    runs: int = 0
    head_repo: str = REPOSITORY

    def run(self, pr: PullRequestRepo, *args: str, event: Path | None = None, event_name: str = "pull_request") -> Run:
        self.runs += 1
        event = event or write_event(self.tmp / f"event-{self.runs}.json", pr, self.head_repo)
        summary, outputs = self.tmp / f"summary-{self.runs}.md", self.tmp / f"output-{self.runs}.txt"
        env = {
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event_name,
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_REPOSITORY": REPOSITORY,
            "GITHUB_API_URL": self.api_url,
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_RUN_ID": f"9000{self.runs}",
            "GITHUB_RUN_ATTEMPT": "1",
            "REVIEW_COPIES_GITHUB_BACKOFF": "0.01",
        }
        for key, value in env.items():
            self.monkeypatch.setenv(key, value)
        if self.token:
            self.monkeypatch.setenv("GITHUB_TOKEN", self.token)
        else:
            self.monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        for key in ("OPENAI_API_KEY", "GITHUB_GRAPHQL_URL"):
            self.monkeypatch.delenv(key, raising=False)
        self.monkeypatch.chdir(pr.path)
        out, err = io.StringIO(), io.StringIO()
        rc = main(["--post-review", "--offline", "--no-sandbox", *args], stdout=out, stderr=err)
        text = summary.read_text() if summary.exists() else ""
        pairs = [line.split("=", 1) for line in outputs.read_text().splitlines()] if outputs.exists() else []
        return Run(rc, out.getvalue(), err.getvalue(), text, dict(pairs))
