"""Bad input: a clear one-line error, exit 2, no traceback, nothing changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Repo, run_process
from tests.test_change_modes import BASE, BUGGY

OFF = ("--offline", "--no-sandbox")


def _one_line_error(result, *needles: str) -> None:
    assert result.code == 2, (result.code, result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("review-copies: error: ")
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in lines[0]


def test_not_a_repository(tmp_path: Path) -> None:
    _one_line_error(run_process("--repo", str(tmp_path), *OFF), "not a git repository")


def test_repo_path_that_does_not_exist(tmp_path: Path) -> None:
    _one_line_error(run_process("--repo", str(tmp_path / "nope"), *OFF), "not a directory")


def test_unknown_revision(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit()
    before = repo.snapshot()
    _one_line_error(run_process("--repo", str(repo.path), "--base", "no-such-branch", *OFF), "unknown revision: no-such-branch")
    _one_line_error(run_process("--repo", str(repo.path), "--base", "HEAD", "--head", "deadbeef", *OFF), "unknown revision: deadbeef")
    assert repo.snapshot() == before


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,4 @@\n import torch\n+x = 1\n", "truncated hunk"),
        ("--- a/m.py\n+++ b/m.py\n@@ bogus @@\n", "bad hunk header"),
        ("--- a/m.py\n+++ b/m.py\n@@ -1,1 +1,1 @@\n*what\n", "unexpected line inside a hunk"),
        ("@@ -1 +1 @@\n-a\n+b\n", "hunk before any file header"),
        ("this is not a diff at all\n", "no file sections"),
        ("--- a/m.py\nnot plus\n", "not followed by '+++'"),
    ],
)
def test_malformed_diff(tmp_path: Path, text: str, needle: str) -> None:
    patch = tmp_path / "bad.diff"
    patch.write_text(text)
    _one_line_error(run_process("--diff", str(patch), *OFF, cwd=tmp_path), "malformed diff", needle)
    _one_line_error(run_process("--diff", "-", *OFF, cwd=tmp_path, stdin=text.encode()), "malformed diff")


def test_diff_that_is_a_binary_file(tmp_path: Path) -> None:
    blob = tmp_path / "model.pt"
    blob.write_bytes(b"PK\x03\x04\x00\x00torch\x00\xff")
    _one_line_error(run_process("--diff", str(blob), *OFF, cwd=tmp_path), "binary file")


def test_missing_diff_file(tmp_path: Path) -> None:
    _one_line_error(run_process("--diff", str(tmp_path / "none.diff"), *OFF, cwd=tmp_path), "no such file")


def test_bad_flags(tmp_path: Path) -> None:
    _one_line_error(run_process("--format", "xml", *OFF, cwd=tmp_path), "invalid choice")
    _one_line_error(run_process("--frobnicate", cwd=tmp_path), "unrecognized arguments")


def test_diff_combined_with_base_is_a_usage_error(repo: Repo, tmp_path: Path) -> None:
    repo.write("m.py", BASE)
    repo.commit()
    (tmp_path / "p.diff").write_text("")
    _one_line_error(run_process("--diff", str(tmp_path / "p.diff"), "--base", "HEAD", *OFF, cwd=repo.path), "--diff cannot be combined")


def test_path_outside_the_repository(repo: Repo, tmp_path: Path) -> None:
    repo.write("m.py", BASE)
    repo.commit()
    outside = tmp_path / "elsewhere.py"
    outside.write_text(BUGGY)
    _one_line_error(run_process(str(outside), "--repo", str(repo.path), *OFF, cwd=repo.path), "outside the repository")


def test_bad_configuration(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.write("pyproject.toml", "[tool.review-copies]\nfail-on = 'sometimes'\n")
    repo.commit()
    _one_line_error(run_process("--repo", str(repo.path), *OFF), "bad configuration", "fail-on")
    repo.write("pyproject.toml", "[tool.review-copies]\nselekt = ['alias-mutation']\n")
    _one_line_error(run_process("--repo", str(repo.path), *OFF), "unknown key 'selekt'")
    repo.write("pyproject.toml", "[tool.review-copies\n")
    _one_line_error(run_process("--repo", str(repo.path), *OFF), "not valid TOML")
    repo.write("pyproject.toml", "[tool.review-copies]\nselect = ['alias-mutations']\n")
    _one_line_error(run_process("--repo", str(repo.path), *OFF), "no category or rule")


def test_output_to_an_unwritable_place(repo: Repo, tmp_path: Path) -> None:
    repo.write("m.py", BASE)
    repo.commit()
    _one_line_error(run_process("--repo", str(repo.path), "--output", str(tmp_path / "no" / "dir" / "r.json"), *OFF), "cannot write")


def test_an_empty_change_is_fine(repo: Repo) -> None:
    repo.write("m.py", BASE)
    repo.commit()
    result = run_process("--repo", str(repo.path), *OFF)
    assert result.code == 0 and "no findings" in result.out


FINE = "import torch\n\n\ndef g(x: torch.Tensor):\n    return torch.tensor(x)\n"


def _nested(depth: int, open_: str = "(", close: str = ")") -> str:
    return f"import torch\n\n\ndef f(x: torch.Tensor):\n    y = {open_ * depth}x{close * depth}\n    return torch.tensor(x)\n"


def test_code_nested_past_what_python_accepts_is_skipped_with_a_note(repo: Repo) -> None:
    """3,000 nested parentheses crashed the reviewer (SIGSEGV in libcst's native parser) and
    a 20,000-term sum kept it busy for minutes; Python itself refuses both. Each is skipped
    with a note, and the other files are reviewed."""
    repo.write("deep.py", _nested(3000))
    repo.write("long.py", "import torch\n\n\ndef f(x: torch.Tensor):\n    y = " + " + ".join(["x"] * 20000) + "\n    return torch.tensor(x)\n")
    repo.write("fine.py", FINE)
    repo.commit()
    result = run_process("--repo", str(repo.path), "--all", "--format", "json", "--fail-on", "none", *OFF)
    assert result.code == 0, result.err[-2000:]
    report = json.loads(result.out)
    assert [(f["path"], f["rule"]) for f in report["findings"]] == [("fine.py", "RC301")]
    notes = {n["path"]: n["message"] for n in report["notes"]}
    assert "too many nested parentheses" in notes["deep.py"] and "skipped" in notes["deep.py"]
    assert "nested too deeply for Python itself" in notes["long.py"]


def test_one_statement_too_deep_for_the_analysis_hides_nothing_else(repo: Repo) -> None:
    """150 levels: Python accepts it, the analysis (which recurses along the tree) would not.
    Only that statement is left out, and the file's other finding is still reported."""
    repo.write("m.py", _nested(150, "[", "]"))  # lists nest in the tree; parentheses do not
    repo.commit()
    result = run_process("--repo", str(repo.path), "--all", "--format", "json", "--fail-on", "none", *OFF)
    report = json.loads(result.out)
    assert [(f["path"], f["line"], f["rule"]) for f in report["findings"]] == [("m.py", 6, "RC301")]
    assert [n["message"] for n in report["notes"]] == ["line 5: a statement nested 152 levels deep is left out of the analysis"]
