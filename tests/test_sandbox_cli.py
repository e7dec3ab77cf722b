"""The sandbox through the real command line, on a git repository made for the test."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from review_copies import config
from review_copies.app import review_changeset, write_report
from review_copies.cli import build_parser, main, resolve_settings
from review_copies.output import RenderContext
from review_copies.rules import all_rules
from review_copies.source.changes import build_changeset

ROOT = Path(__file__).resolve().parent.parent

LOOK_ALIKE = """\
import torch
def f(x: torch.Tensor):
    return torch.tensor(x)
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rules' own invalid examples, one per file."""
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q")
    for rule in all_rules():
        for i, case in enumerate(rule.INVALID):
            (repo / f"{rule.code.lower()}_{i}.py").write_text(case.source)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "examples")
    return repo


def _run(repo: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--repo", str(repo), "--all", "--offline", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def report(repo: Path) -> dict:
    code, out, err = _run(repo, "--format", "json", "--device", "cpu")
    assert code == 1, err
    return json.loads(out)


def test_every_rule_example_is_verified(report: dict) -> None:
    by_rule: dict[str, list[str]] = {}
    for f in report["findings"]:
        by_rule.setdefault(f["rule"], []).append(f["verification"]["status"])
        assert f["verification"]["device"] == "cpu" or f["verification"]["status"] == "not-run"
        assert f["verification"]["evidence"]
    statuses = [s for v in by_rule.values() for s in v]
    # Every rule's invalid example is a true positive: none may be refuted (dropped), and most are confirmed.
    assert by_rule["RC301"] == ["confirmed"] * 6
    assert by_rule["RC302"] == ["confirmed"] * 3
    # The second RC321 example's fix leaves `y.cpu().numpy()`, which still raises with grad;
    # the `"cuda" if use_gpu else "cpu"` example and the one of `generate()`'s token ids on a
    # module moved with `.cuda()` raise only on a GPU, which a CPU run cannot reach:
    # inconclusive, never refuted.
    assert sorted(by_rule["RC321"]) == ["confirmed", "confirmed", "inconclusive", "inconclusive", "inconclusive"]
    runnable = [s for s in statuses if s != "not-run"]
    assert statuses.count("confirmed") >= 0.7 * len(runnable)
    # Writes into a NumPy array bypass torch's dispatcher: the one example of them is not confirmed.
    assert [d["path"] for d in report["dropped"]] == ["rc105_1.py"]
    assert report["stats"]["sandbox_runs"] >= len(statuses)


def test_stats_say_how_isolation_was_done(report: dict) -> None:
    stats = report["stats"]
    assert stats["sandbox_network"] == "namespace" or stats["sandbox_network"].startswith("not isolated: ")
    assert stats["sandbox_devices"] == "cpu"


def test_a_refuted_finding_is_dropped_with_the_reason(repo: Path, tmp_path: Path) -> None:
    # torch.as_tensor(x) is x: the fix turns a copy into an alias (a wrong suggestion).
    target = repo / "alias_fix.py"
    target.write_text(LOOK_ALIKE)
    try:
        from review_copies.model.findings import Category, Finding, Severity, Suggestion
        from review_copies.model.report import Report
        from review_copies.sandbox.verify.stage import SandboxStage

        f = Finding("alias_fix.py", 3, 3, Category.COPY_CONSTRUCT, "RC301", Severity.WARNING, "m",
                    suggestion=Suggestion(3, 3, "    return torch.as_tensor(x)\n"))

        class Static:
            def __init__(self) -> None:
                self.texts = {"alias_fix.py": LOOK_ALIKE}

        out = SandboxStage("cpu", io.StringIO(), cache_dir=None)(Report(findings=[f]), Static())
    finally:
        target.unlink()
    assert out.findings == []
    (dropped,) = out.dropped
    assert dropped.finding.verification.status.value == "refuted"
    assert dropped.reason.startswith("sandbox refuted: ")
    assert "shares memory with input `x`" in dropped.reason
    assert out.stats.sandbox_runs == 1


def test_on_a_pull_request_a_refutation_never_removes_a_static_finding() -> None:
    """The reviewed code runs in the observer's process and could lie to it (issue 18): on
    an untrusted change the same refutation leaves the finding, shown as not confirmed."""
    from review_copies.model.findings import Category, Finding, Severity, Status, Suggestion
    from review_copies.model.report import Report
    from review_copies.sandbox.verify.stage import SandboxStage

    f = Finding("alias_fix.py", 3, 3, Category.COPY_CONSTRUCT, "RC301", Severity.WARNING, "m",
                suggestion=Suggestion(3, 3, "    return torch.as_tensor(x)\n"))

    class Static:
        def __init__(self) -> None:
            self.texts = {"alias_fix.py": LOOK_ALIKE}

    out = SandboxStage("cpu", io.StringIO(), cache_dir=None, untrusted=True)(Report(findings=[f]), Static())
    assert out.dropped == []
    (kept,) = out.findings
    assert kept.verification.status is Status.INCONCLUSIVE
    assert kept.verification.evidence.startswith("not confirmed: the run showed no effect (") and "shares memory with input `x`" in kept.verification.evidence


def test_no_sandbox_gives_not_run(repo: Path) -> None:
    _code, out, _ = _run(repo, "--format", "json", "--no-sandbox")
    data = json.loads(out)
    assert {f["verification"]["status"] for f in data["findings"]} == {"not-run"}
    assert data["stats"]["sandbox_runs"] == 0


def test_text_markdown_sarif_and_github_show_the_verdict(repo: Path) -> None:
    args = build_parser().parse_args(["--repo", str(repo), "--all", "--offline", "--device", "cpu", str(repo / "rc302_0.py")])
    settings = resolve_settings(args, config.FileConfig(), {})
    changeset = build_changeset(settings.change)
    report, rules = review_changeset(settings, changeset, io.StringIO())
    markers = {
        "text": "sandbox confirmed on cpu: ",
        "markdown": "✅ sandbox confirmed on cpu",
        "github": "sandbox confirmed on cpu: ",
        "sarif": '"status": "confirmed"',
    }
    for fmt, marker in markers.items():
        out = io.StringIO()
        write_report(replace(settings, fmt=fmt), report, RenderContext(rules=rules, description=changeset.description), out)
        text = out.getvalue()
        assert marker in text, fmt
        assert "shares memory with input `x`" in text.replace("\n  ", " "), fmt


def test_the_reviewer_process_never_imports_torch(repo: Path) -> None:
    script = (
        "import io, sys; sys.path.insert(0, sys.argv[1]); from review_copies.cli import main; "
        "args = ['--repo', sys.argv[2], '--all', '--offline', '--format', 'json', sys.argv[2] + '/rc301_0.py']; "
        "code = main(args, stdout=io.StringIO(), stderr=io.StringIO()); "
        "print(code, 'torch' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", script, str(ROOT), str(repo)], capture_output=True, text=True, timeout=240)
    assert out.stdout.split() == ["1", "False", "False"], out.stderr[-2000:]
