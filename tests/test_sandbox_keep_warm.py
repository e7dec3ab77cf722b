"""A worker kept warm between reviews: the next review reuses it (no torch import), it
ends after its idle time, and its socket is never where another user or a probe can
reach it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from review_copies.sandbox import isolate
from review_copies.sandbox.protocol import Capabilities
from review_copies.sandbox.verify import warm
from tests.conftest import Repo, kept_warm_workers, run_cli

BEFORE = "import torch\n\n\ndef f(x):\n    return x * 2\n"
AFTER = "import torch\n\n\ndef f(x):\n    x.mul_(2)\n    return x * 2\n"


def _review(repo: Repo, cache: Path) -> dict:
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--format", "json", "--device", "cpu",
                     env={"XDG_CACHE_HOME": str(cache)})
    assert result.code == 1, result.err
    return result.json


def test_the_next_review_reuses_the_kept_warm_worker_which_then_ends(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="rc-run-"))  # no other test's worker
    repo.write("pyproject.toml", "[tool.review-copies]\nsandbox-keep-warm = 4\n")
    repo.write("m.py", BEFORE)
    repo.commit("before")
    repo.write("m.py", AFTER)
    repo.commit("after")
    folder = Path(os.environ["XDG_RUNTIME_DIR"]) / "review-copies"
    try:
        first = _review(repo, tmp_path / "one")  # separate caches: the second run must probe again
        second = _review(repo, tmp_path / "two")
        assert first["stats"]["sandbox_worker"].startswith("started in ")
        assert second["stats"]["sandbox_worker"] == "kept warm by an earlier review"
        assert second["stats"]["sandbox_runs"] >= 1
        assert [f["verification"] for f in second["findings"]] == [f["verification"] for f in first["findings"]]
        assert first["findings"][0]["verification"]["status"] == "confirmed"
        assert len(kept_warm_workers(folder)) == 1
        socket_files = list(folder.glob("worker-*.sock"))
        assert len(socket_files) == 1 and oct(socket_files[0].stat().st_mode & 0o777) == "0o600"
        deadline = time.monotonic() + 20
        while kept_warm_workers(folder) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert kept_warm_workers(folder) == [], "the worker outlived its idle time"
        assert list(folder.glob("worker-*.sock")) == []
    finally:
        for pid in kept_warm_workers(folder):
            os.kill(pid, 9)
        shutil.rmtree(folder.parent, ignore_errors=True)


def test_a_folder_others_may_enter_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "review-copies").mkdir(mode=0o755)
    os.chmod(tmp_path / "review-copies", 0o755)
    assert warm.runtime_dir() is None
    os.chmod(tmp_path / "review-copies", 0o700)
    assert warm.runtime_dir() == tmp_path / "review-copies"


def test_a_worker_serves_only_where_no_probe_can_reach_its_socket() -> None:
    # Namespaces mask /tmp with an empty tmpfs; a folder elsewhere stays visible, read-only
    # but connectable, to a probe running as the same user.
    masked = Capabilities(namespaces=True, readonly_fs=True, fresh_proc=True)
    # A folder the namespace masks here (/tmp, unless this checkout or the interpreter
    # lives under it: what the probe must read is never masked).
    covered = [d for d in isolate.MASKED_DIRS if isolate._maskable(d, isolate._important_paths())]
    assert covered, "no folder of MASKED_DIRS can be masked on this machine"
    assert isolate.hidden_from_probes(masked, f"{covered[0]}/review-copies-0/worker.sock")
    assert not isolate.hidden_from_probes(masked, "/srv/sockets/worker.sock")
    # Probes running as their own uid cannot enter the 0700 folder wherever it is.
    assert isolate.hidden_from_probes(Capabilities(uid_drop=True, probe_uid=1_900_000_001), "/srv/sockets/worker.sock")
    # No namespaces and no other uid: nothing hides it.
    assert not isolate.hidden_from_probes(Capabilities(), "/tmp/review-copies-0/worker.sock")
