"""Hostile pull requests and odd repositories (issue 15): a file name cannot make the report
speak for the attacker, every Python file is reviewed whatever git must do to its name,
and no mode writes into the reviewed repository."""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from tests.conftest import Repo, run_cli

BUGGY = """\
import torch


def normalize(x: torch.Tensor) -> torch.Tensor:
    x -= x.mean()
    return x / x.std()
"""
OFF = ("--offline", "--no-sandbox", "--fail-on", "none")

# Names git quotes in diffs, or that a shell or an Actions log would read specially.
NAMES = [
    "evil\n::error::pwned.py",
    "train v2.py",
    'train "v2".py',
    "back\\slash.py",
    "tab\tname.py",
    "ünïcødé_модель.py",
    "-dash.py",
    "--all.py",
    "sub dir/x y.py",
    "##[group]old.py",
]
# A runner obeys a line that starts (after blanks) with `::` or `##[`.
COMMAND_LINE = re.compile(r"^\s*(::|##\[)", re.MULTILINE)


def _changed(repo: Repo, name: str) -> None:
    repo.write("keep.py", "x = 1\n")
    repo.commit("base")
    repo.write(name, BUGGY)


def _modes(repo: Repo, tmp_path) -> list[tuple[str, ...]]:
    """The same change in every way contract §1 can name it: the working tree (untracked
    and staged), a commit range, a diff file, whole files."""
    path = str(repo.path)
    diff_file = tmp_path / "change.diff"
    diff_file.write_bytes(subprocess.run(["git", "-C", path, "diff", "HEAD~1", "HEAD"], capture_output=True, check=True).stdout)
    return [
        ("--repo", path, "--base", "HEAD~1", "--head", "HEAD"),
        ("--repo", path, "--diff", str(diff_file)),
        ("--repo", path, "--all"),
    ]


@pytest.mark.parametrize("name", NAMES, ids=lambda n: ascii(n))
def test_every_odd_name_is_reviewed_in_every_mode(repo: Repo, tmp_path, name: str) -> None:
    _changed(repo, name)
    untracked = run_cli("--repo", str(repo.path), *OFF, "--format", "json")
    assert [f["path"] for f in untracked.json["findings"]] == [name], untracked.err
    repo.git.git.add("-A")
    staged = run_cli("--repo", str(repo.path), *OFF, "--format", "json")
    assert [f["path"] for f in staged.json["findings"]] == [name]
    repo.commit("odd name")
    for args in _modes(repo, tmp_path):
        result = run_cli(*args, *OFF, "--format", "json")
        assert result.code == 0, (args, result.err)
        paths = [f["path"] for f in result.json["findings"]]
        assert paths == [name], (args, paths, result.json["stats"])
        assert result.json["stats"]["skipped_files"] == {}, args


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_a_file_name_cannot_write_a_workflow_command(repo: Repo, fmt: str) -> None:
    _changed(repo, "evil\n::error::pwned.py")
    repo.write("##[group]x\n::add-mask::secret.py", BUGGY)
    result = run_cli("--repo", str(repo.path), *OFF, "--format", fmt)
    assert result.code == 0
    assert "pwned.py" in result.out and "secret.py" in result.out  # reported, not hidden
    assert not COMMAND_LINE.search(result.out), [ln for ln in result.out.splitlines() if COMMAND_LINE.match(ln)]
    assert "evil\\n::error::pwned.py" in result.out  # the name shown on one line, as git quotes it


def test_the_github_format_still_writes_its_own_commands(repo: Repo) -> None:
    _changed(repo, "evil\n::error::pwned.py")
    out = run_cli("--repo", str(repo.path), *OFF, "--format", "github").out
    commands = [ln for ln in out.splitlines() if COMMAND_LINE.match(ln)]
    assert [c.split(" ", 1)[0] for c in commands if c.startswith("::warning")] == ["::warning"]
    assert all(re.match(r"::(warning|error|notice) ", c) for c in commands), commands
    assert any(c.startswith("::warning file=evil%0A%3A%3Aerror%3A%3Apwned.py,line=5,") for c in commands)


def test_markdown_shows_quoted_code_as_text(repo: Repo) -> None:
    """A message quotes the reviewed code; in a PR comment it must not mention a team,
    open a link or an image, or inject HTML."""
    repo.write("keep.py", "x = 1\n")
    repo.commit("base")
    repo.write("m.py", BUGGY.replace("x -= x.mean()", "x -= x.mean()  # see @org/admins [here](https://evil.example) <img src=x>"))
    repo.write("@org [a](b) <b>.py", BUGGY)
    out = run_cli("--repo", str(repo.path), *OFF, "--format", "markdown").out
    assert "RC102" in out
    outside_fences = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", out, flags=re.MULTILINE | re.DOTALL)  # nothing renders in a fence
    outside_code = re.sub(r"(`+).*?\1", "", outside_fences)
    assert "@org" not in outside_code.replace("@\u2060org", "")
    assert "](" not in outside_code.replace("\\](", "") and "<b>" not in outside_code and "<img" not in outside_code


def _make_index_stale(repo: Repo) -> None:
    """Touch a tracked file without changing it: `git status` or `git diff` would now
    refresh the index and write `.git/index` unless optional locks are off."""
    target = repo.path / "keep.py"
    later = time.time() + 5
    os.utime(target, (later, later))


def test_no_mode_writes_into_the_reviewed_repository(repo: Repo, tmp_path) -> None:
    _changed(repo, "m.py")
    repo.git.git.add("-A")
    repo.commit("change")
    repo.write("m.py", BUGGY + "\n# more\n")
    repo.write("new.py", BUGGY)
    modes = [("--repo", str(repo.path)), *_modes(repo, tmp_path), ("--repo", str(repo.path), str(repo.path / "m.py"))]
    for fmt in ("json", "text", "markdown", "sarif", "github"):
        for args in modes:
            _make_index_stale(repo)
            before = repo.snapshot()
            index_mtime = (repo.path / ".git" / "index").stat().st_mtime_ns
            result = run_cli(*args, *OFF, "--format", fmt)
            assert result.code == 0, (args, result.err)
            assert repo.snapshot() == before, (args, fmt)
            assert (repo.path / ".git" / "index").stat().st_mtime_ns == index_mtime, (args, fmt)


def _fuzzed_names(count: int, seed: int) -> list[str]:
    """Names made of what git quotes or a terminal or a runner reads specially, seeded."""
    import random

    rng = random.Random(seed)
    alphabet = ['"', "\\", "\t", "\n", " ", "'", "$", "`", "*", "?", "[", "]", "#", ":", "@", "<", ">", "|", ";", "&", "%",
                "é", "ß", "模", "\u200b", "\u2028", "\x1b", "\x7f", "\x01", "-", "a", "b", "_", "."]
    names: set[str] = set()
    while len(names) < count:
        stem = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        name = f"{stem}_{len(names)}.py"
        if "/" not in name and not name.startswith("."):
            names.add(name)
    return sorted(names)


FUZZ_SEED, FUZZ_COUNT = 20261203, 60


def test_fuzzed_names_are_each_reviewed_once_at_their_exact_path(repo: Repo, tmp_path) -> None:
    names = _fuzzed_names(FUZZ_COUNT, FUZZ_SEED)
    repo.write("keep.py", "x = 1\n")
    repo.commit("base")
    for name in names:
        repo.write(name, BUGGY)
    repo.commit("fuzzed names")
    for args in _modes(repo, tmp_path):
        result = run_cli(*args, *OFF, "--format", "json")
        assert result.code == 0, (args, result.err)
        assert sorted(f["path"] for f in result.json["findings"]) == names, args
        assert result.json["stats"]["skipped_files"] == {}, args
        for fmt in ("text", "markdown"):
            out = run_cli(*args, *OFF, "--format", fmt).out
            assert not COMMAND_LINE.search(out), (args, fmt)
