"""A worker kept warm between reviews: the first review starts it detached, serving a Unix
socket; the next reviews within its idle time connect to it and skip the torch import.

The socket lives in a folder only this user can enter (`$XDG_RUNTIME_DIR/review-copies`,
else `/tmp/review-copies-<uid>`, created 0700 and refused when someone else owns it or
others may enter), under a name that changes with the interpreter, torch, the sandbox's
code and the isolation asked for: a new release never talks to an old worker. The worker
serves only where no probe can reach the socket (probes run as another uid, or their
mount namespace covers the folder), and ends after its idle time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from review_copies.sandbox.verify.cache import code_fingerprint, torch_version

# How long a new worker may take to claim its socket (it does so before importing torch).
CLAIM_SECONDS = 5.0
# A worker that would not serve here (probes could reach its socket) is not tried again
# for this long: every review would otherwise wait CLAIM_SECONDS for nothing.
REFUSAL_SECONDS = 24 * 3600.0
# Starts the worker in a session of its own and returns: the worker outlives this review.
_DETACH = (
    "import subprocess, sys; "
    "subprocess.Popen(sys.argv[1:], start_new_session=True, stdin=subprocess.DEVNULL, "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)"
)


def runtime_dir() -> Path | None:
    """This user's private folder for the socket, or None when none can be trusted."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(base) / "review-copies" if base and os.path.isdir(base) else Path(tempfile.gettempdir()) / f"review-copies-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder


def socket_path(folder: Path, python: str, isolation: str, env: dict[str, str]) -> Path:
    parts = [os.path.realpath(python), torch_version(python), code_fingerprint(), isolation, repr(sorted(env.items()))]
    key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return folder / f"worker-{key}.sock"


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def connect(python: str, argv: list[str], env: dict[str, str], isolation: str, idle: float) -> tuple[socket.socket, bool] | None:
    """A connection to the kept-warm worker, and whether it was already running; it is
    started (the command `argv`, in `env`) when none serves. None: no trustworthy folder, or the worker
    would not serve here (the caller starts one of its own)."""
    folder = runtime_dir()
    if folder is None:
        return None
    path = socket_path(folder, python, isolation, {k: v for k, v in env.items() if k not in ("HOME", "TMPDIR")})
    if len(str(path)) > 100:  # the kernel's limit for a socket name
        return None
    sock = _connect(path)
    if sock is not None:
        return sock, True
    refused = path.with_suffix(".refused")
    with contextlib.suppress(OSError):
        if time.time() - refused.stat().st_mtime < REFUSAL_SECONDS:
            return None
    with _locked(path.with_suffix(".lock")):
        sock = _connect(path)  # another review may have started one meanwhile
        if sock is not None:
            return sock, True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a worker that ended without removing its name
        home = tempfile.mkdtemp(prefix="review-copies-worker-")
        os.chmod(home, 0o711)
        worker_env = {**env, "HOME": home, "TMPDIR": home}
        command = [python, "-I", "-c", _DETACH, *argv, f"--serve={path}", f"--idle={idle:g}"]
        try:
            subprocess.run(command, env=worker_env, cwd=home, check=True, timeout=30, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None
        deadline = time.monotonic() + CLAIM_SECONDS
        while time.monotonic() < deadline:
            sock = _connect(path)
            if sock is not None:
                return sock, False
            time.sleep(0.02)
        with contextlib.suppress(OSError):
            refused.touch(0o600)
    return None
