"""The pre-commit hook, run by real pre-commit (`try-repo` on this checkout): it reviews what
pre-commit hands it on a commit, with --all-files (CI mode) and with --from-ref/--to-ref."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Repo

ROOT = Path(__file__).resolve().parents[1]
BUG = "import torch\n\n\ndef f(x: torch.Tensor):\n    return torch.tensor(x)\n"

pytestmark = pytest.mark.skipif(shutil.which("pre-commit", path=str(Path(sys.executable).parent)) is None and shutil.which("pre-commit") is None, reason="pre-commit is not installed")


def _pre_commit(repo: Repo, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRE_COMMIT", "GIT_", "OPENAI"))}
    # `language: system`: the hook runs the review-copies of this environment.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    exe = shutil.which("pre-commit", path=env["PATH"])
    assert exe is not None
    return subprocess.run([exe, "try-repo", str(ROOT), "review-copies", "--verbose", *args], cwd=repo.path, env=env, capture_output=True, text=True, timeout=600)


def test_commit_all_files_and_ref_range_are_each_reviewed(repo: Repo, tmp_path: Path) -> None:
    repo.write("pkg/ok.py", "import torch\n\n\ndef f(x: torch.Tensor):\n    return x * 2\n", dedent=False)
    base = repo.commit("base")
    # A commit: the staged change is reviewed, and the finding stops it.
    repo.write("pkg/m.py", BUG, dedent=False)
    repo.git.git.add("-A")
    staged = _pre_commit(repo, tmp_path)
    assert staged.returncode == 1, staged.stdout + staged.stderr
    assert "pkg/m.py:5:12: RC301 copy-construct" in staged.stdout
    head = repo.commit("the bug")
    # CI mode: nothing differs from HEAD; before, the hook passed without checking anything.
    all_files = _pre_commit(repo, tmp_path, "--all-files")
    assert all_files.returncode == 1 and "pkg/m.py:5:12: RC301" in all_files.stdout, all_files.stdout + all_files.stderr
    # A ref range (pre-push, CI on a branch): what the to-ref changed since the from-ref.
    ranged = _pre_commit(repo, tmp_path, "--from-ref", base, "--to-ref", head)
    assert ranged.returncode == 1 and "pkg/m.py:5:12: RC301" in ranged.stdout, ranged.stdout + ranged.stderr
    clean = _pre_commit(repo, tmp_path, "--from-ref", base, "--to-ref", base)
    assert clean.returncode == 0, clean.stdout + clean.stderr
