"""The reviewer's side of the sandbox: start the warm worker, send probes, get answers.

Never imports torch. The worker is started with an allowlisted environment (none of
the reviewer's secrets, so not even /proc/<worker>/environ holds them), in its own
session and temp directory; if it dies it is restarted once per probe.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace

from review_copies.sandbox import isolate, protocol

# Passed through to the worker: none of them is a secret, and CUDA needs them.
ENV_ALLOWLIST = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
ANSWER_CAP = 32 << 20


class SandboxUnavailable(Exception):
    """The worker could not be started (no torch, a broken interpreter...)."""


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


class Sandbox:
    """One warm worker. Use as a context manager, or call close()."""

    def __init__(self, limits: protocol.Limits | None = None, isolation: str = "auto", python: str | None = None, start_timeout: float = 180.0) -> None:
        self.limits = limits or protocol.Limits()
        self.isolation = isolation
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.info = WorkerInfo()
        self.runs = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._home: str | None = None
        self._ids = itertools.count(1)

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> WorkerInfo:
        if self.alive:
            return self.info
        self._home = tempfile.mkdtemp(prefix="review-copies-worker-")
        # The zygote's temp dir lives here and a probe runs as its own uid: without
        # search permission, absolute paths into the probe's own directory fail.
        os.chmod(self._home, 0o711)
        boot = "from review_copies.sandbox.worker.zygote import main; main()"
        argv = [self.python, "-I", "-c", boot] + (["--isolation=none"] if self.isolation == "none" else [])
        started = time.perf_counter()
        try:
            self._proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=clean_env(self._home), cwd=self._home, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            raise SandboxUnavailable(f"cannot start {self.python}: {exc.strerror}") from None
        try:
            assert self._proc.stdout is not None
            hello = protocol.decode(protocol.Hello, protocol.read_frame(self._proc.stdout.fileno(), ANSWER_CAP, time.monotonic() + self.start_timeout))
        except (protocol.FrameError, protocol.MessageError) as exc:
            self.close()
            raise SandboxUnavailable(f"the sandbox worker did not start ({exc}); is torch installed for {self.python}?") from None
        self.info = WorkerInfo(
            torch=hello.torch, cuda=hello.cuda, caps=hello.caps, isolation=hello.caps.describe(),
            import_seconds=hello.import_seconds, start_seconds=time.perf_counter() - started,
        )
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

    def run(self, request: protocol.ProbeRequest) -> protocol.ProbeAnswer:
        """Send one probe and wait for its answer; a dead worker is restarted once."""
        request = replace(request, limits=self.limits, id=next(self._ids))
        for attempt in (1, 2):
            if not self.alive:
                try:
                    self.start()
                except SandboxUnavailable as exc:
                    return protocol.ProbeAnswer(ok=False, error=str(exc), id=request.id)
            try:
                return self._exchange(request)
            except (protocol.FrameError, protocol.MessageError, OSError) as exc:
                self.close()
                if attempt == 2:
                    return protocol.ProbeAnswer(ok=False, error=f"the sandbox worker failed: {exc}", id=request.id)
        raise AssertionError("unreachable")

    def _exchange(self, request: protocol.ProbeRequest) -> protocol.ProbeAnswer:
        assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
        protocol.write_frame(self._proc.stdin.fileno(), {"op": "probe", "request": request})
        self.runs += 1
        deadline = time.monotonic() + self.limits.wall_seconds + 30.0
        answer = protocol.decode(protocol.ProbeAnswer, protocol.read_frame(self._proc.stdout.fileno(), ANSWER_CAP, deadline))
        if answer.id != request.id:
            raise protocol.FrameError("answer for another request")
        return answer

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.poll() is None and proc.stdin is not None:
                    protocol.write_frame(proc.stdin.fileno(), {"op": "exit"})
                    proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        if self._home:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
