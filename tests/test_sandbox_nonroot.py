"""The sandbox where a hosted runner puts it: a non-root user on a host that gives it no
namespaces (GitHub's ubuntu-24.04 images block unprivileged user namespaces). The review runs
as uid 65534 in a chroot, where the kernel refuses user namespaces as it does there; the
pull request's code would read the API key, write into the checkout and call a loopback
socket. It must not run at all, and the report must say why."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from review_copies.sandbox.isolate import blocked_ancestor

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "chroot", "setpriv")),
    reason="needs root to build the non-root, namespace-less setting (unshare, chroot, setpriv)",
)

PAYLOAD = """
import os
import socket
import torch


def f(x: torch.Tensor):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "pwned.txt"), "w") as fh:
        fh.write(os.environ.get("OPENAI_API_KEY", "none"))
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    return torch.tensor(x)
"""


def test_without_namespaces_a_non_root_review_runs_nothing_of_the_pull_request(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    base = Path(tempfile.mkdtemp(prefix="rc-nonroot-", dir="/tmp"))
    try:
        repo = base / "repo"
        repo.mkdir()
        (repo / "m.py").write_text(textwrap.dedent(PAYLOAD).lstrip().replace("PORT", str(port)))
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "pr"], check=True)
        for path in [base, *base.rglob("*")]:
            os.lchown(path, NOBODY, NOBODY)
        new_root = tmp_path / "root"
        new_root.mkdir()
        # Directories the interpreter lies behind (a 0700 /root with pyenv in it): an empty
        # tmpfs over them in the chroot, with just the interpreter's subtree bound back.
        exposed = {b for p in (os.path.realpath(sys.executable), sys.prefix, sys.base_prefix, str(ROOT)) if (b := blocked_ancestor(os.path.realpath(p)))}
        mounts = "".join(f"mount -t tmpfs tmpfs {new_root}{a}; mkdir -p {new_root}{c}; mount --rbind {c} {new_root}{c}; " for a, c in sorted(exposed))
        env = f"HOME={base} XDG_CACHE_HOME={base}/cache OPENAI_API_KEY=sk-nonroot-secret PATH=/usr/bin:/bin PYTHONPATH={ROOT}"
        review = f"cd {repo} && {sys.executable} -m review_copies --all --offline --format json --fail-on none --output {base}/report.json"
        script = (
            f"mount --make-rprivate / && mount --rbind / {new_root} && {mounts}"
            f"exec chroot {new_root} setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups env {env} sh -c '{review}'"
        )
        done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads((base / "report.json").read_text())
        assert [f["rule"] for f in report["findings"]] == ["RC301"]
        verification = report["findings"][0]["verification"]
        assert verification["status"] == "not-run" and "no namespaces" in verification["evidence"], verification
        assert "--sandbox unsafe-local" in verification["evidence"]
        assert "the sandbox is unavailable" in done.stderr
        assert not (repo / "pwned.txt").exists()
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
        shutil.rmtree(base, ignore_errors=True)
