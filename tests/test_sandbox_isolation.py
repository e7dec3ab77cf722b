"""The sandbox seen from outside: what a hostile probe can reach, and that it is stopped.

Each hostile probe is the body of a function a finding points at. It reports what it
could reach by raising an error, whose text ends up in the verdict's evidence. The
reviewer is a separate process started with the secrets in its environment, as in CI.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from review_copies.model.findings import Status
from review_copies.model.report import Report
from review_copies.sandbox.protocol import Limits
from review_copies.sandbox.verify.client import Sandbox
from review_copies.sandbox.verify.stage import SandboxStage
from review_copies.sandbox.verify.verifier import Verifier
from tests.sandbox_helpers import finding, worker

SECRET = "sk-sandbox-test-4f1c9e"
ROOT = Path(__file__).resolve().parent.parent

LEAK = f'''
import os
def leak(x):
    found = [k for k in ("OPENAI_API_KEY", "GITHUB_TOKEN") if os.environ.get(k)]
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{{pid}}/environ", "rb") as fh:
                    if b"{SECRET}" in fh.read():
                        found.append("/proc/" + pid)
            except OSError:
                pass
    raise RuntimeError("found=" + (",".join(found) or "nothing") + " ppid=" + str(os.getppid()))
'''

CONNECT = '''
import socket
def call_home(x):
    outcome = []
    for family, address in ((socket.AF_INET, ("127.0.0.1", __PORT__)), (socket.AF_UNIX, __UNIX__)):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(2)
        try:
            s.connect(address)
            outcome.append("connected")
        except OSError as exc:
            outcome.append(type(exc).__name__)
        finally:
            s.close()
    raise RuntimeError("connect=" + ",".join(outcome))
'''

WRITE = '''
import os
def scribble(x):
    results = []
    for path in __TARGETS__:
        try:
            with open(path, "w") as fh:
                fh.write("escaped")
            results.append("wrote")
        except OSError as exc:
            results.append(type(exc).__name__)
    with open("inside.txt", "w") as fh:
        fh.write("fine")
    results.append("inside=" + str(os.path.exists("inside.txt")))
    raise RuntimeError("write=" + ",".join(results))
'''

READ = '''
def peek(x):
    results = []
    for path in __TARGETS__:
        try:
            with open(path, "rb") as fh:
                results.append("readable" if fh.read() else "empty")
        except OSError as exc:
            results.append(type(exc).__name__)
    raise RuntimeError("read=" + ",".join(results))
'''

KEYRING = '''
import ctypes
def keys(x):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    found = libc.syscall(250, 10, ctypes.c_int(-3), b"user", b"rc-test-key", 0)
    if found < 0:
        raise RuntimeError("keyring=no key errno=" + str(ctypes.get_errno()))
    buf = ctypes.create_string_buffer(128)
    n = libc.syscall(250, 11, ctypes.c_long(found), buf, ctypes.c_size_t(128))
    raise RuntimeError("keyring=" + (buf.raw[:n].decode() if n > 0 else "unreadable"))
'''

REVIEWER = '''
import io, json, sys
sys.path.insert(0, sys.argv[1])
from review_copies.model.findings import Category, Finding, Severity
from review_copies.sandbox.verify.verifier import Verifier
from review_copies.sandbox.verify.client import Sandbox
from review_copies.sandbox.protocol import Limits, encode
cases = json.loads(sys.argv[2])
import ctypes, os
if os.uname().machine == "x86_64":
    # A secret in the reviewer's session keyring, as `keyctl add user ... @s` leaves one.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    secret = os.environ["OPENAI_API_KEY"].encode()
    out_key = libc.syscall(248, b"user", b"rc-test-key", secret, ctypes.c_size_t(len(secret)), ctypes.c_int(-3))
out = {}
with Sandbox(Limits(wall_seconds=90, cpu_seconds=10)) as sb:
    out["isolation"] = encode(sb.info.isolation)
    out["caps"] = encode(sb.info.caps)
    verifier = Verifier(sb, "cpu", io.StringIO())
    for name, (code, line) in cases.items():
        f = Finding("hostile.py", line, line, Category.ALIAS_MUTATION, "X999", Severity.WARNING, "m")
        v = verifier.verification(f, code, ["cpu"])
        out[name] = [v.status.value, v.evidence]
print(json.dumps(out))
'''


class Listener:
    """A TCP and a UNIX listener of the test process, counting connections."""

    def __init__(self, unix_path: Path) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(str(unix_path))
        self.unix.listen(8)
        self.accepted = 0
        self._stop = False
        self._threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in (self.tcp, self.unix)]
        for t in self._threads:
            t.start()

    @property
    def port(self) -> int:
        return self.tcp.getsockname()[1]

    def _accept(self, s: socket.socket) -> None:
        s.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = s.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                continue

    def close(self) -> None:
        self._stop = True
        for t in self._threads:
            t.join(timeout=2)
        self.tcp.close()
        self.unix.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory):
    """Runs the hostile probes from a reviewer process whose environment holds secrets."""
    tmp = tmp_path_factory.mktemp("hostile")
    # A checkout outside /tmp (which probes never see anyway): a Jenkins-style workspace
    # under /var/lib where this user may write there (nothing but the reviewer's working
    # directory says it is private), else the home directory, as on a laptop.
    checkout = Path(tempfile.mkdtemp(prefix="rc-checkout-", dir="/var/lib" if os.access("/var/lib", os.W_OK) else Path.home()))
    # A directory at the top of the tree that no list names (a CI system's /build, an
    # image's /app), where this user may create one.
    top = Path(tempfile.mkdtemp(prefix="rc-top-", dir="/")) if os.access("/", os.W_OK) else checkout
    for folder in (checkout, top):
        folder.chmod(0o755)  # as checkouts are; at 0700 a probe's own uid could not read them anyway
    (top / "secret.txt").write_text(SECRET)
    (checkout / ".git").mkdir()
    (checkout / ".git" / "config").write_text(f"[http]\n\textraheader = AUTHORIZATION: basic {SECRET}\n")
    (checkout / "train.py").write_text("import torch\n")
    listener = Listener(tmp / "host.sock")
    targets = [str(tmp / "escaped.txt"), str(ROOT / "escaped-into-repo.txt"), "/escaped-at-root.txt", "/dev/shm/rc-escaped-shm"]
    cases = {
        "leak": (LEAK, 3),
        "connect": (CONNECT.replace("__PORT__", str(listener.port)).replace("__UNIX__", repr(str(tmp / "host.sock"))), 3),
        "write": (WRITE.replace("__TARGETS__", repr(targets)), 3),
        "keyring": (KEYRING, 4),
        # The reviewed checkout and what lies beside the reviewer's own files.
        "read": (READ.replace("__TARGETS__", repr([str(checkout / ".git" / "config"), str(checkout / "train.py"), str(ROOT / "pyproject.toml"), str(top / "secret.txt")])), 2),
    }
    cases = {k: (textwrap.dedent(code).lstrip("\n"), line) for k, (code, line) in cases.items()}
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "GITHUB_TOKEN": SECRET}
    try:
        # The reviewer runs from the checkout, as in a CI job.
        proc = subprocess.run([sys.executable, "-c", REVIEWER, str(ROOT), json.dumps(cases)], env=env, capture_output=True, text=True, timeout=240, cwd=checkout)
    finally:
        listener.close()
        shutil.rmtree(checkout, ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    result["accepted"] = listener.accepted
    result["targets"] = targets
    yield result
    for t in targets:
        Path(t).unlink(missing_ok=True)


def test_probe_cannot_read_the_reviewers_secrets(hostile) -> None:
    status, evidence = hostile["leak"]
    assert status == "inconclusive"
    assert "found=nothing" in evidence
    assert SECRET not in evidence


def test_probe_cannot_reach_host_sockets(hostile) -> None:
    status, evidence = hostile["connect"]
    assert status == "inconclusive"
    assert "connect=" in evidence and "connected" not in evidence
    assert hostile["accepted"] == 0


def test_probe_cannot_write_outside_its_temp_dir(hostile) -> None:
    _status, evidence = hostile["write"]
    assert "write=" in evidence, evidence
    assert "wrote" not in evidence
    assert "inside=True" in evidence
    for target in hostile["targets"]:
        assert not Path(target).exists(), target


def test_probe_cannot_read_the_checkout_or_the_reviewers_files(hostile) -> None:
    _status, evidence = hostile["read"]
    assert "read=" in evidence, evidence
    assert "readable" not in evidence and SECRET not in evidence, evidence


def test_probe_cannot_read_the_reviewers_session_keyring(hostile) -> None:
    _status, evidence = hostile["keyring"]
    assert "keyring=" in evidence, evidence
    assert SECRET not in evidence, evidence


def test_isolation_is_reported(hostile) -> None:
    iso = hostile["isolation"]
    if hostile["caps"].get("namespaces"):
        assert iso["network"] == "namespace"
        assert iso["processes"] == "pid namespace"
    else:
        assert iso["network"].startswith("not isolated: ")


# ------------------------------------------------------------------ limits

FORK_BOMB = """
import os
def spread(x):
    while True:
        try:
            if os.fork() == 0:
                os.setsid()
        except OSError:
            pass
"""

HOG = """
import torch
def hog(x):
    chunks = []
    while True:
        chunks.append(torch.empty(1 << 27))
"""

SPIN = """
def spin(x):
    while True:
        pass
"""

GOOD = """
import torch
def norm(x):
    y = x.float()
    y -= y.mean()
    return y
"""


def _probe_processes(uid: int | None) -> list[int]:
    if uid is None:
        return []
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid_line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
        if str(uid) in uid_line.split():
            found.append(int(pid))
    return found


def test_runaway_probes_are_stopped_and_the_review_goes_on() -> None:
    sb = worker()
    saved = sb.limits
    # The wall-clock limit is far above the CPU limit: on a loaded machine a probe gets a
    # fraction of a core, and only CPU time (not elapsed time) decides which limit stops it.
    sb.limits = Limits(wall_seconds=90, cpu_seconds=2, memory_bytes=3 << 30)
    try:
        report = Report()
        for code, line, category in ((FORK_BOMB, 4, "alias-mutation"), (HOG, 5, "alias-mutation"), (SPIN, 3, "alias-mutation")):
            f, _text = finding(code, line, category, path=f"hostile{line}{len(code)}.py")
            report.findings.append(f)
        good, _good_text = finding(GOOD, 3, "alias-mutation", fix="y = x.float().clone()")
        report.findings.append(good)
        texts = {f.path: text for f, text in zip(report.findings, [textwrap.dedent(c).lstrip("\n") for c in (FORK_BOMB, HOG, SPIN, GOOD)])}
        out = SandboxStage("cpu", io.StringIO(), sandbox=sb, budget=None, parallel=1).verify(report, texts)
    finally:
        sb.limits = saved
    statuses = [f.verification.status for f in out.findings]
    assert statuses[:3] == [Status.INCONCLUSIVE] * 3
    bomb, hog, spin, ok = (f.verification.evidence for f in out.findings)
    # The bomb's parent spins on failing forks while its 64 copies of the worker dirty
    # their pages: whichever limit it meets first (CPU, wall clock, the tree's memory) stops it.
    assert re.search(r"(CPU-time|wall-clock) limit of|processes together held more than", bomb), bomb
    assert "can't allocate memory" in hog, hog
    assert "CPU-time limit of 2 s" in spin, spin
    assert statuses[3] is Status.CONFIRMED, ok
    assert out.stats.sandbox_runs == 4
    time.sleep(0.2)
    assert _probe_processes(sb.info.caps.probe_uid) == [], "a forked or setsid process outlived its probe"


TREE_HOG = """
import os
import time
def spread(x):
    kids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            held = b"\\x01" * (900 << 20)
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    return x
"""


def test_the_memory_cap_binds_the_probes_processes_together() -> None:
    """Four forked processes of 900 MiB each stay under the 2 GiB address-space cap one by
    one; together they pass it (and the worker's own pages, which the cap leaves out), and
    the monitor stops the whole tree."""
    sb = worker()
    saved = sb.limits
    sb.limits = Limits(wall_seconds=90, cpu_seconds=15, memory_bytes=2 << 30)
    try:
        f, text = finding(TREE_HOG, 4, "alias-mutation", path="treehog.py")
        v = Verifier(sb, "cpu", io.StringIO()).verification(f, text, ["cpu"])
    finally:
        sb.limits = saved
    assert v.status is Status.INCONCLUSIVE, v.evidence
    assert "processes together held more than 2048 MiB of memory beyond the worker's" in v.evidence, v.evidence
    time.sleep(0.2)
    assert _probe_processes(sb.info.caps.probe_uid) == [], "a forked process outlived its probe"


BIG_BUFFER = """
import torch
def norm(x):
    scratch = torch.ones(150_000_000)
    y = x.float()
    y -= y.mean()
    return y + scratch[0]
"""


def test_the_memory_cap_is_memory_the_probe_may_use_beyond_the_worker() -> None:
    """A probe may fill its whole budget whatever torch already maps in the worker (a CUDA
    build maps gigabytes of libraries): 600 MB filled under a 1 GiB cap is confirmed, not
    stopped by an address-space limit that counted torch's own mappings."""
    sb = worker()
    saved = sb.limits
    sb.limits = Limits(wall_seconds=90, cpu_seconds=15, memory_bytes=1 << 30)
    try:
        f, text = finding(BIG_BUFFER, 5, "alias-mutation", fix="y = x.float().clone()", path="bigbuffer.py")
        v = Verifier(sb, "cpu", io.StringIO()).verification(f, text, ["cpu"])
    finally:
        sb.limits = saved
    assert v.status is Status.CONFIRMED, v.evidence


ASKS_ITS_USER = """
import getpass
import torch
def norm(x):
    owner = getpass.getuser()
    y = x.float()
    y -= y.mean()
    return y, owner
"""


def test_a_probe_can_ask_who_it_runs_as() -> None:
    """The probe's uid has no passwd entry; code that asks for its user name (torch's
    inductor does, on the first import of torch._dynamo) is still verified."""
    f, text = finding(ASKS_ITS_USER, 6, "alias-mutation", fix="y = x.float().clone()", path="asksuser.py")
    v = Verifier(worker(), "cpu", io.StringIO()).verification(f, text, ["cpu"])
    assert v.status is Status.CONFIRMED, v.evidence


def test_fallback_without_namespaces_still_scrubs_and_limits() -> None:
    with Sandbox(Limits(wall_seconds=60, cpu_seconds=2), isolation="none", unsafe_local=True) as sb:
        assert sb.info.isolation.network.startswith("not isolated: ")
        spin, spin_text = finding(SPIN, 3, "alias-mutation")
        leak, leak_text = finding(LEAK, 3, "alias-mutation")
        verifier = Verifier(sb, "cpu", io.StringIO())
        os.environ["OPENAI_API_KEY"] = SECRET
        try:
            v_leak = verifier.verification(leak, leak_text, ["cpu"])
        finally:
            del os.environ["OPENAI_API_KEY"]
        v_spin = verifier.verification(spin, spin_text, ["cpu"])
    assert "env" not in v_leak.evidence.split("found=")[1].split()[0]
    assert v_spin.status is Status.INCONCLUSIVE and "limit" in v_spin.evidence


def _filled_child(nbytes: int) -> int:
    pid = os.fork()
    if pid == 0:
        held = b"\x01" * nbytes
        time.sleep(0.6)
        os._exit(len(held) & 0)
    return pid


def test_a_grown_worker_does_not_spend_its_probes_memory() -> None:
    """A warm worker grows over a long review (a 400 MiB heap here), and each probe it
    forks shares those pages: a probe that fills 250 MiB under a 300 MiB cap runs to its
    end; one that fills the cap and the worker's size over again is stopped."""
    from review_copies.sandbox import isolate
    from review_copies.sandbox.worker import zygote

    ballast = bytearray(b"\x01" * (400 << 20))
    try:
        worker_size = isolate.resident_bytes()
        cap = zygote._tree_cap(300 << 20, worker_size)
        within = zygote._watch_tree(_filled_child(250 << 20), cap)
        beyond = zygote._watch_tree(_filled_child((300 << 20) + worker_size), cap)
    finally:
        del ballast
    assert within is not None and os.waitstatus_to_exitcode(within) == 0
    assert beyond is None
