"""What the sandbox costs a review: its time budget (flag and configuration key), verdicts
answered from the on-disk cache on a second run, and probes run side by side deciding as
they do one at a time."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from review_copies.model.findings import Finding
from review_copies.model.report import Report
from review_copies.sandbox.verify.stage import SandboxStage
from tests.conftest import Repo, run_cli
from tests.sandbox_helpers import finding, worker

BEFORE = """
import torch


def scale(x):
    return x * 2
"""

# Three findings, each confirmed by the sandbox.
AFTER = """
import torch


def scale(x):
    x.mul_(2)
    return x * 2


def as_tensor(t: torch.Tensor):
    return torch.tensor(t)


def total_loss(model, loader, optimizer):
    total = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    return total
"""


@pytest.fixture
def change(repo: Repo) -> Repo:
    repo.write("train.py", BEFORE)
    repo.commit("before")
    repo.write("train.py", AFTER)
    repo.commit("after")
    return repo


def _review(repo: Repo, *args: str, cache: Path | None = None) -> tuple[int, dict, str]:
    env = {"XDG_CACHE_HOME": str(cache)} if cache is not None else None
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--format", "json", "--device", "cpu", *args, env=env)
    assert result.code in (0, 1), result.err
    return result.code, result.json, result.err


def _verdicts(report: dict) -> list[tuple[int, str, str]]:
    return [(f["line"], f["verification"]["status"], f["verification"]["evidence"]) for f in report["findings"]]


def test_a_second_review_answers_from_the_cache_without_running_a_probe(change: Repo, tmp_path: Path) -> None:
    _, first, _ = _review(change, cache=tmp_path / "cache")
    assert [status for _, status, _ in _verdicts(first)] == ["confirmed"] * 3
    assert first["stats"]["sandbox_runs"] >= 3 and first["stats"]["sandbox_cache_hits"] == 0
    _, second, _ = _review(change, cache=tmp_path / "cache")
    assert _verdicts(second) == _verdicts(first)
    assert second["stats"]["sandbox_runs"] == 0 and second["stats"]["sandbox_cache_hits"] == 3
    assert second["stats"]["sandbox_network"] == "not started: every verdict came from the cache"


def test_an_empty_cache_dir_turns_the_cache_off(change: Repo, tmp_path: Path) -> None:
    change.write("pyproject.toml", '[tool.review-copies]\nsandbox-cache-dir = ""\n')
    change.commit("no cache")
    _review(change, "--base", "HEAD~2", cache=tmp_path / "cache")
    _, again, _ = _review(change, "--base", "HEAD~2", cache=tmp_path / "cache")
    assert again["stats"]["sandbox_cache_hits"] == 0 and again["stats"]["sandbox_runs"] >= 3
    assert not (tmp_path / "cache" / "review-copies" / "sandbox").exists()


def test_a_cache_inside_the_reviewed_repository_is_refused(change: Repo) -> None:
    change.write("pyproject.toml", f'[tool.review-copies]\nsandbox-cache-dir = "{change.path / "cache"}"\n')
    result = run_cli("--repo", str(change.path), "--offline")
    assert result.code == 2
    assert result.err.strip() == f"review-copies: error: bad configuration: 'sandbox-cache-dir' ({change.path / 'cache'}) lies inside the reviewed repository"


def test_findings_past_the_budget_are_shown_unverified_with_the_reason(change: Repo) -> None:
    code, report, err = _review(change, "--sandbox-budget", "0.001")
    assert code == 1  # still shown, still counted for --fail-on
    assert [status for _, status, _ in _verdicts(report)] == ["not-run"] * 3
    for _, _, evidence in _verdicts(report):
        assert "the review's sandbox budget of 0.001 s ran out" in evidence
        assert "--sandbox-budget" in evidence
    assert report["stats"]["sandbox_over_budget"] == 3
    assert "the sandbox budget of 0.001 s ran out: 3 finding(s) are shown without a verdict" in err


def test_the_budget_is_a_configuration_key_too(change: Repo) -> None:
    change.write("pyproject.toml", "[tool.review-copies]\nsandbox-budget = 0.001\n")
    change.commit("tight budget")
    _, report, _ = _review(change, "--base", "HEAD~2")
    assert report["stats"]["sandbox_over_budget"] == 3


@pytest.mark.parametrize(("args", "config", "message"), [
    (("--sandbox-budget", "-1"), None, "argument --sandbox-budget: must be a number of seconds greater than 0: '-1'"),
    (("--sandbox-budget", "soon"), None, "argument --sandbox-budget: not a number of seconds: 'soon'"),
    ((), 'sandbox-budget = "30"', "bad configuration: 'sandbox-budget' in [tool.review-copies] in {pyproject} must be a number of seconds greater than 0"),
    ((), "sandbox-budget = 0", "bad configuration: 'sandbox-budget' in [tool.review-copies] in {pyproject} must be a number of seconds greater than 0"),
    ((), "sandbox-cache-dir = 3", "bad configuration: 'sandbox-cache-dir' in [tool.review-copies] in {pyproject} must be a string"),
])
def test_a_bad_budget_or_cache_setting_is_one_line_and_exit_2(repo: Repo, args: tuple[str, ...], config: str | None, message: str) -> None:
    if config is not None:
        repo.write("pyproject.toml", f"[tool.review-copies]\n{config}\n")
    result = run_cli("--repo", str(repo.path), "--offline", *args)
    assert result.code == 2
    assert result.err == f"review-copies: error: {message.format(pyproject=repo.path / 'pyproject.toml')}\n"


def test_probes_side_by_side_decide_as_they_do_one_at_a_time() -> None:
    cases = [
        ("import torch\ndef f(x):\n    x.add_(1)\n    return x * 2\n", 3, "alias-mutation", "x = x + 1"),
        ("import torch\ndef f(t: torch.Tensor):\n    return torch.tensor(t)\n", 3, "copy-construct", "return t.detach().clone()"),
        ("import torch\ndef f(x):\n    y = x.clone()\n    y -= y.mean()\n    return y\n", 4, "alias-mutation", "y = y - y.mean()"),
        ("import torch\ndef f(x):\n    y = x.exp()\n    y.add_(1)\n    return y\n", 4, "inplace-autograd", "y = y + 1"),
    ]
    findings: list[Finding] = []
    texts: dict[str, str] = {}
    for i, (code, line, category, fix) in enumerate(cases):
        f, text = finding(code, line, category, fix, rule="RC301" if category == "copy-construct" else "X999", path=f"m{i}.py")
        findings.append(f)
        texts[f.path] = text
    report = Report(findings=findings)
    one = SandboxStage("cpu", io.StringIO(), sandbox=worker(), budget=None, parallel=1).verify(report, texts)
    four = SandboxStage("cpu", io.StringIO(), sandbox=worker(), budget=None, parallel=4).verify(report, texts)
    seen = [(f.path, f.verification) for f in one.findings + [d.finding for d in one.dropped]]
    assert seen == [(f.path, f.verification) for f in four.findings + [d.finding for d in four.dropped]]
    assert [v.status.value for _, v in seen] == ["confirmed", "confirmed", "inconclusive", "confirmed"]
