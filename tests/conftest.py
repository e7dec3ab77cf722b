"""Shared fixtures: real git repositories in temporary folders, and the real CLI."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from review_copies.cli import main

ROOT = Path(__file__).resolve().parent.parent


def kept_warm_workers(folder: Path) -> list[int]:
    """Pids of sandbox workers serving a socket under `folder`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.startswith(f"--serve={folder}".encode()) for arg in cmdline):
            pids.append(int(entry))
    return pids


@pytest.fixture(autouse=True, scope="session")
def _private_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tool keeps LLM answers and sandbox verdicts under $XDG_CACHE_HOME and a kept-warm
    worker's socket under $XDG_RUNTIME_DIR: the tests use folders of their own, never the
    user's. They run as in CI (no worker outlives a review) unless a test asks otherwise."""
    names = ("XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "CI")
    saved = {name: os.environ.get(name) for name in names}
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="rc-run-")  # short: a socket name has a length limit
    os.environ["CI"] = "true"
    yield
    for pid in kept_warm_workers(Path(os.environ["XDG_RUNTIME_DIR"])):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # a test that built its settings without CI kept one warm
    shutil.rmtree(os.environ["XDG_RUNTIME_DIR"], ignore_errors=True)
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def json(self) -> dict:
        return json.loads(self.out)


class Repo:
    """A throwaway git repository with helpers to write files and commit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.git = git.Repo.init(path, initial_branch="main")
        with self.git.config_writer() as cfg:
            cfg.set_value("user", "name", "Test")
            cfg.set_value("user", "email", "test@example.com")
            cfg.set_value("commit", "gpgsign", "false")

    def write(self, rel: str, content: str | bytes, dedent: bool = True) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(textwrap.dedent(content).lstrip("\n") if dedent else content, encoding="utf-8", newline="")
        return target

    def commit(self, message: str = "change", add: bool = True) -> str:
        if add:
            self.git.git.add("-A")
        self.git.git.commit("-m", message, "--allow-empty")
        return self.git.head.commit.hexsha

    def snapshot(self) -> dict[str, str]:
        """A hash of every file, .git included: the repository must stay byte-for-byte the same."""
        out = {}
        for path in sorted(self.path.rglob("*")):
            if path.is_file():
                out[str(path.relative_to(self.path))] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """The CLI in-process (fast), with the environment the user would have."""
    out, err = io.StringIO(), io.StringIO()
    old_cwd = os.getcwd()
    old_env = dict(os.environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.environ.pop("OPENAI_API_KEY", None)
        if env:
            os.environ.update(env)
        code = main(list(args), stdout=out, stderr=err)
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    return Result(code, out.getvalue(), err.getvalue())


def run_process(*args: str, cwd: Path | None = None, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Result:
    """The CLI as a real process, as a user or CI runs it."""
    full_env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    full_env["PYTHONPATH"] = str(ROOT)
    if env:
        full_env.update(env)
    proc = subprocess.run([sys.executable, "-m", "review_copies", *args], cwd=cwd, input=stdin, capture_output=True, env=full_env, timeout=300)
    return Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def run_process_measured(*args: str, cwd: Path | None = None) -> tuple[Result, float]:
    """`run_process`, with the peak memory (MiB) of that one process: `RUSAGE_CHILDREN` would
    be the largest of every child the test session ever waited for."""
    full_env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    full_env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "review_copies", *args], cwd=cwd, stdout=out, stderr=err, env=full_env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Result(proc.returncode, out.read().decode(), err.read().decode()), usage.ru_maxrss / 1024


@pytest.fixture
def cli() -> Iterator:
    yield run_cli
