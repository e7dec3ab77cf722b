"""The reviewer's side of the sandbox: start the warm worker, send probes, get answers.

Never imports torch. The worker is started with an allowlisted environment (none of
the reviewer's secrets, so not even /proc/<worker>/environ holds them), in its own
session and temp directory; if it dies it is restarted once per probe.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace

from review_copies.sandbox import isolate, protocol
from review_copies.sandbox.verify import warm

_BOOT = "from review_copies.sandbox.worker.serve import main; main()"
# Passed through to the worker: none of them is a secret, and CUDA needs them.
ENV_ALLOWLIST = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
ANSWER_CAP = 32 << 20


class SandboxUnavailable(Exception):
    """The worker could not be started (no torch, a broken interpreter...)."""


def _cwd() -> str:
    """This process's working directory ("" when it was removed under us)."""
    try:
        return os.getcwd()
    except OSError:
        return ""


def clean_env(home: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        # Detect GPUs through NVML, never through cuInit (which poisons fork).
        "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update({k: os.environ[k] for k in ENV_ALLOWLIST if k in os.environ})
    return env


@dataclass
class WorkerInfo:
    torch: str = ""
    cuda: bool = False
    caps: protocol.Capabilities = field(default_factory=protocol.Capabilities)
    isolation: protocol.Isolation = field(default_factory=lambda: protocol.Capabilities(problems=["the worker has not started"]).describe())
    import_seconds: float = 0.0
    start_seconds: float = 0.0
    # A worker kept warm by an earlier review served this one.
    reused: bool = False


class Sandbox:
    """One warm worker. Use as a context manager, or call close().

    `launch` starts it without waiting (torch imports while the reviewer works), `start`
    waits until it is ready. Probes are sent with `submit` and answered in the order they
    finish by `collect`; the worker runs them side by side. `run` is one probe, start to end.
    """

    def __init__(
        self, limits: protocol.Limits | None = None, isolation: str = "auto", python: str | None = None, start_timeout: float = 180.0, keep_warm: float = 0.0,
        unsafe_local: bool = False, hide: tuple[str, ...] = (),
    ) -> None:
        """`keep_warm`: seconds a worker waits for the next review after this one (0: it
        ends with this review). `unsafe_local`: run probes even where no namespace isolates
        them (the user's own code, on their own machine); otherwise such a host runs nothing.
        `hide`: directories probes must not read (the reviewed checkout), beside this
        process's working directory, which is always hidden."""
        self.hide = hide
        self.unsafe_local = unsafe_local
        self.limits = limits or protocol.Limits()
        self.keep_warm = keep_warm
        self.isolation = isolation
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.info = WorkerInfo()
        self.runs = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._reused = False
        self._read_fd = -1
        self._write_fd = -1
        self._home: str | None = None
        self._ids = itertools.count(1)
        self._ready = False
        self._launched_at = 0.0
        self._pending: dict[int, float] = {}  # request id -> when to give up on its answer
        self._outbox: queue.Queue[bytes | None] | None = None
        self._writer: threading.Thread | None = None
        self._failed: list[protocol.ProbeAnswer] = []

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        if self._sock is not None:
            return True  # a kept-warm worker: a dead one shows when it is read
        return self._proc is not None and self._proc.poll() is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def launch(self) -> None:
        """Start the worker (or reach the kept-warm one) and return at once; `start` waits."""
        if self.alive:
            return
        self.close()
        self._launched_at = time.perf_counter()
        argv = ["-c", _BOOT] + (["--isolation=none"] if self.isolation == "none" else [])
        if self.keep_warm > 0:
            home = tempfile.gettempdir()
            reached = warm.connect(self.python, [self.python, "-I", *argv], clean_env(home), self.isolation, self.keep_warm)
            if reached is not None:
                self._sock, self._reused = reached
                self._sock.setblocking(True)
                self._open(self._sock.fileno(), self._sock.fileno())
                return
        self._home = tempfile.mkdtemp(prefix="review-copies-worker-")
        # The zygote's temp dir lives here and a probe runs as its own uid: without
        # search permission, absolute paths into the probe's own directory fail.
        os.chmod(self._home, 0o711)
        try:
            self._proc = subprocess.Popen(
                [self.python, "-I", *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=clean_env(self._home), cwd=self._home, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            self._proc = None
            raise SandboxUnavailable(f"cannot start {self.python}: {exc.strerror}") from None
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._reused = False
        self._open(self._proc.stdout.fileno(), self._proc.stdin.fileno())

    def _open(self, read_fd: int, write_fd: int) -> None:
        self._read_fd, self._write_fd = read_fd, write_fd
        self._ready = False
        self._outbox = queue.Queue()
        # Requests are written by a thread of their own: a large request and a large
        # answer in flight at once would otherwise block both processes on full pipes.
        self._writer = threading.Thread(target=self._write_loop, args=(write_fd, self._outbox), daemon=True)
        self._writer.start()

    def start(self) -> WorkerInfo:
        if self.alive and self._ready:
            return self.info
        if not self.alive:
            self.launch()
        try:
            hello = protocol.decode(protocol.Hello, protocol.read_frame(self._read_fd, ANSWER_CAP, time.monotonic() + self.start_timeout))
        except (protocol.FrameError, protocol.MessageError, OSError) as exc:
            kept_warm = self._sock is not None
            self.close(graceful=False)
            if kept_warm:
                # The kept-warm worker went away: this review starts one of its own.
                self.keep_warm, keep = 0.0, self.keep_warm
                try:
                    return self.start()
                finally:
                    self.keep_warm = keep
            raise SandboxUnavailable(f"the sandbox worker did not start ({exc}); is torch installed for {self.python}?") from None
        self.info = WorkerInfo(
            torch=hello.torch, cuda=hello.cuda, caps=hello.caps, isolation=hello.caps.describe(),
            import_seconds=hello.import_seconds, start_seconds=time.perf_counter() - self._launched_at, reused=self._reused,
        )
        if not hello.caps.namespaces and not self.unsafe_local:
            # Without network, mount and PID namespaces a probe could read the reviewer's
            # secrets, write into the checkout, reach the network and outlive the review:
            # code from a pull request does not run here at all.
            self.close(graceful=True)
            why = "; ".join(hello.caps.problems) or "unknown"
            raise SandboxUnavailable(
                f"untrusted code is not run on this host: it gives no namespaces to isolate it ({why}); "
                "`--sandbox unsafe-local` runs it anyway, for your own code only"
            )
        self._ready = True
        self._protect_secrets()
        return self.info

    def _protect_secrets(self) -> None:
        """Without a private /proc or a separate uid a probe could read this process's
        environment (API keys) through /proc; making it non-dumpable closes that."""
        caps = self.info.caps
        if not caps.fresh_proc and not caps.uid_drop:
            try:
                isolate.set_dumpable(False)
                self.info.isolation = replace(self.info.isolation, proc="reviewer process made non-dumpable (no private /proc here)")
            except OSError:
                pass

    @staticmethod
    def _write_loop(fd: int, outbox: queue.Queue[bytes | None]) -> None:
        while (data := outbox.get()) is not None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:
                return  # the worker is gone: the reader sees it

    def submit(self, request: protocol.ProbeRequest) -> protocol.ProbeRequest:
        """Send one probe without waiting; returns it with its id. Raises SandboxUnavailable."""
        self.start()
        assert self._outbox is not None
        hide = tuple(sorted({os.path.realpath(p) for p in (_cwd(), *self.hide) if p}))
        request = replace(request, limits=self.limits, id=next(self._ids), hide=hide)
        self._outbox.put(protocol.frame({"op": "probe", "request": request}))
        # The worker enforces the wall clock; past this, the worker itself is stuck.
        self._pending[request.id] = time.monotonic() + self.limits.wall_seconds + 30.0
        self.runs += 1
        return request

    def collect(self, until: float | None = None) -> protocol.ProbeAnswer | None:
        """The next answer to finish, or None when `until` (a time.monotonic) comes first.
        When the worker dies or hangs, every probe in flight is answered with the failure."""
        if not self._pending:
            return None
        fd = self._read_fd
        stuck = min(self._pending.values())
        wait_until = stuck if until is None else min(until, stuck)
        ready, _, _ = select.select([fd], [], [], max(0.0, wait_until - time.monotonic()))
        if not ready:
            if until is not None and until <= stuck:
                return None
            return self._fail_all("the sandbox worker stopped answering")
        try:
            answer = protocol.decode(protocol.ProbeAnswer, protocol.read_frame(fd, ANSWER_CAP, time.monotonic() + 30.0))
        except (protocol.FrameError, protocol.MessageError, OSError) as exc:
            return self._fail_all(f"the sandbox worker failed: {exc}")
        if self._pending.pop(answer.id, None) is None:
            return self._fail_all("the sandbox worker answered a request it was not sent")
        return answer

    def _fail_all(self, why: str) -> protocol.ProbeAnswer:
        """One failed answer now; the other probes in flight get theirs on the next calls."""
        first, *rest = sorted(self._pending)
        self._failed = [protocol.ProbeAnswer(ok=False, error=why, id=i) for i in rest]
        self.close(graceful=False)
        return protocol.ProbeAnswer(ok=False, error=why, id=first)

    def failed(self) -> list[protocol.ProbeAnswer]:
        """Answers owed to probes that were in flight when the worker failed."""
        out, self._failed = self._failed, []
        return out

    def run(self, request: protocol.ProbeRequest) -> protocol.ProbeAnswer:
        """Send one probe and wait for its answer; a dead worker is restarted once."""
        for attempt in (1, 2):
            try:
                sent = self.submit(request)
            except SandboxUnavailable as exc:
                return protocol.ProbeAnswer(ok=False, error=str(exc), id=0)
            while True:
                answer = self.collect()
                self.failed()
                if answer is None or answer.id == sent.id:
                    break
            if answer is not None and (answer.ok or attempt == 2 or not answer.error.startswith("the sandbox worker")):
                return answer
        return protocol.ProbeAnswer(ok=False, error="the sandbox worker failed twice", id=0)

    def close(self, graceful: bool = True) -> None:
        """Stop the worker: asked to exit (it kills its probes in flight), killed if it does
        not, or at once when `graceful` is off (it failed). A kept-warm worker is only
        left: it stops this review's probes and waits for the next review."""
        proc, self._proc = self._proc, None
        sock, self._sock = self._sock, None
        outbox, self._outbox = self._outbox, None
        if outbox is not None:
            if self._ready and graceful:
                outbox.put(protocol.frame({"op": "exit"}))
            outbox.put(None)
        writer, self._writer = self._writer, None
        if sock is not None:
            if writer is not None:
                writer.join(timeout=1)  # the exit request goes out first
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # ends a write the writer may still be blocked in
            if writer is not None:
                writer.join(timeout=2)
            sock.close()
        if proc is not None:
            try:
                # Probes in flight are killed by the worker on exit; a worker that is still
                # importing torch has nothing to finish.
                if self._ready and graceful:
                    proc.wait(timeout=5 if not self._pending else 2)
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if writer is not None:
                writer.join(timeout=2)
            # The writer thread writes to stdin's fd number: closed only once it is done.
            streams = (proc.stdin, proc.stdout) if writer is None or not writer.is_alive() else (proc.stdout,)
            for stream in streams:
                if stream is not None:
                    stream.close()
        self._ready = False
        self._pending = {}
        self._read_fd = self._write_fd = -1
        if self._home:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
