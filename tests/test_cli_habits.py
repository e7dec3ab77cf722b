"""The habits a ruff user brings: rules to look up, --select/--ignore, --statistics, --fix,
colour and width that follow the terminal, explanations only on request, progress on stderr."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from review_copies.cli import main
from review_copies.model.findings import Category, Finding, Severity, Suggestion
from review_copies.model.report import Report
from review_copies.output import progress as progress_module
from review_copies.review.apply import apply_fixes
from review_copies.rules import all_rules
from tests.conftest import Repo, run_cli

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "demo"
OFF = ("--offline", "--no-sandbox", "--fail-on", "none")


@pytest.fixture
def demo(repo: Repo) -> Repo:
    """The bundled demo as an uncommitted change of a working tree."""
    new = (DEMO / "train.py").read_text()
    repo.write("examples/demo/train.py", new, dedent=False)
    repo.git.git.apply("-R", str(DEMO / "change.diff"))
    repo.commit()
    repo.write("examples/demo/train.py", new, dedent=False)
    return repo


def test_rules_lists_every_rule_and_rule_explains_one() -> None:
    listing = run_cli("rules")
    assert listing.code == 0
    codes = [line.split()[0] for line in listing.out.splitlines()[1:]]
    assert codes == [r.code for r in all_rules()]
    page = run_cli("rule", "rc301")
    assert page.code == 0 and page.out.startswith("RC301 copy-construct-from-tensor (copy-construct, warning)")
    assert "Why is this bad?:" in page.out and "Use instead:" in page.out
    missing = run_cli("rule", "RC999")
    assert missing.code == 2 and missing.err.count("\n") == 1 and "no rule 'RC999'" in missing.err


def test_select_and_ignore_flags_override_the_configuration(demo: Repo) -> None:
    demo.write("pyproject.toml", '[tool.review-copies]\nselect = ["numpy-bridge"]\n')
    rules = lambda *flags: sorted({f["rule"] for f in run_cli("--repo", str(demo.path), "--format", "json", *OFF, *flags).json["findings"]})  # noqa: E731
    assert rules() == ["RC321"]
    assert rules("--select", "RC301,graph-retention") == ["RC251", "RC301"]
    assert rules("--select", "alias-mutation", "--select", "RC201") == ["RC102", "RC201"]
    everything = rules("--select", "RC101,RC102,RC151,RC201,RC251,RC301,RC321")
    assert rules("--select", "RC101,RC102,RC151,RC201,RC251,RC301,RC321", "--ignore", "stale-snapshot,RC321") == [r for r in everything if r not in ("RC151", "RC321")]
    bad = run_cli("--repo", str(demo.path), *OFF, "--ignore", "RC9")
    assert bad.code == 2 and "'RC9' is no category or rule" in bad.err and bad.err.count("\n") == 1


def test_statistics_counts_findings_per_rule(demo: Repo) -> None:
    result = run_cli("--repo", str(demo.path), "--statistics", *OFF)
    rows = [line.split("\t") for line in result.out.splitlines()]
    assert sorted(row[1] for row in rows) == ["RC102", "RC151", "RC201", "RC251", "RC301", "RC321"]
    assert all(row[0] == "1" and row[2].startswith("[*] ") for row in rows)
    assert run_cli("--repo", str(demo.path), "--statistics", "--format", "json", *OFF).code == 2


def test_fix_applies_the_suggestions_and_leaves_nothing_to_report(demo: Repo) -> None:
    before = (demo.path / "examples/demo/train.py").read_text()
    result = run_cli("--repo", str(demo.path), "--fix", *OFF)
    assert result.code == 0
    assert "fixed 6 findings in 1 file" in result.err
    after = (demo.path / "examples/demo/train.py").read_text()
    assert after != before
    assert "        h = h + 0.1\n" in after and "    flat = x.view(-1).clone()\n" in after
    assert "    return logits.softmax(dim=-1).detach().cpu().numpy()\n" in after
    # What is fixed is not reported again, and a second review finds nothing left.
    assert "no findings" in result.out
    again = run_cli("--repo", str(demo.path), "--format", "json", *OFF)
    assert again.json["findings"] == []
    compile(after, "train.py", "exec")


def test_fix_leaves_lines_that_changed_since_and_refuses_other_trees(demo: Repo, tmp_path: Path) -> None:
    report = run_cli("--repo", str(demo.path), "--format", "json", *OFF).json
    assert report["findings"]
    diff = tmp_path / "c.diff"
    diff.write_text((DEMO / "change.diff").read_text())
    refused = run_cli("--repo", str(demo.path), "--diff", str(diff), "--fix", *OFF)
    assert refused.code == 2 and "--fix changes the working tree" in refused.err
    assert demo.git.git.status("--porcelain").strip() == "M examples/demo/train.py"
    # A line edited after the review is left alone, and an overlapping second fix too.
    target = demo.path / "m.py"
    target.write_text("import torch\nx = torch.zeros(3)\ny = torch.tensor(x)\n")
    stale = Finding("m.py", 2, 2, Category.COPY_CONSTRUCT, "RC301", Severity.WARNING, "m", suggestion=Suggestion(2, 2, "x = 1\n", original="x = torch.ones(3)\n"))
    good = Finding("m.py", 3, 3, Category.COPY_CONSTRUCT, "RC301", Severity.WARNING, "m", suggestion=Suggestion(3, 3, "y = x.detach().clone()\n", original="y = torch.tensor(x)\n"))
    overlap = Finding("m.py", 3, 3, Category.REDUNDANT_COPY, "RC341", Severity.INFO, "m", suggestion=Suggestion(3, 3, "y = x\n", original="y = torch.tensor(x)\n"))
    outside = Finding("../m.py", 1, 1, Category.COPY_CONSTRUCT, "RC301", Severity.WARNING, "m", suggestion=Suggestion(1, 1, "pass\n"))
    result = apply_fixes(Report(findings=[stale, good, overlap, outside]), demo.path)
    assert target.read_text() == "import torch\nx = torch.zeros(3)\ny = x.detach().clone()\n"
    assert [f.rule for f in result.fixed] == ["RC301"] and result.report.findings == [stale, overlap, outside]
    assert sorted(why for _, why in result.skipped) == ["its lines overlap another fix", "the file is outside the repository", "the lines changed since the review"]


def test_text_wraps_to_the_terminal_and_shows_the_source_with_a_caret(demo: Repo) -> None:
    for columns in (80, 120):
        out = run_cli("--repo", str(demo.path), *OFF, env={"COLUMNS": str(columns)}).out
        prose = [line for line in out.splitlines() if line.startswith("  ") and not line.startswith(("    ", "  suggestion"))]
        assert prose and max(len(line) for line in prose) <= columns
        assert any(len(line) > columns - 20 for line in prose), "wrapped much narrower than the terminal"
    out = run_cli("--repo", str(demo.path), *OFF, env={"COLUMNS": "100"}).out
    block = out[out.index("examples/demo/train.py:34:9: RC301") :].splitlines()[1:5]
    assert block == ["   |", "34 |     x = torch.tensor(x)", "   |         ^^^^^^^^^^^^^^^", "   |"]


def test_color_flag_and_no_color(demo: Repo) -> None:
    args = ("--repo", str(demo.path), *OFF)
    assert "\033[" in run_cli(*args, "--color", "always", env={"NO_COLOR": "1"}).out
    assert "\033[" not in run_cli(*args, "--color", "never", env={"FORCE_COLOR": "1"}).out
    assert "\033[" not in run_cli(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).out
    assert "\033[" not in run_cli(*args, "--color", "always", "--format", "json").out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_erased_at_the_end(demo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "QUIET_FOR", 0.0)
    monkeypatch.setattr(progress_module, "EVERY", 0.0)
    out, err = io.StringIO(), _Terminal()
    assert main(["--repo", str(demo.path), "--all", *OFF], stdout=out, stderr=err) == 0
    assert "file reviewed" in err.getvalue() and err.getvalue().endswith("\r\033[K")
    # Off a terminal (CI logs, pipes): no progress line at all.
    plain = io.StringIO()
    main(["--repo", str(demo.path), "--all", *OFF], stdout=io.StringIO(), stderr=plain)
    assert "reviewed (" not in plain.getvalue()


def test_the_same_review_gives_the_same_json(demo: Repo) -> None:
    def run() -> str:
        report = run_cli("--repo", str(demo.path), "--format", "json", *OFF).json
        report["stats"] = {k: v for k, v in report["stats"].items() if "seconds" not in k}
        return json.dumps(report, sort_keys=True)

    first = run()
    assert all(run() == first for _ in range(2))
