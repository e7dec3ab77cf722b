"""The warm worker: imports torch once, then forks one isolated child per probe.

Started by `sandbox.client` with a clean environment. It reads requests on fd 0 and
answers on fd 1 (frames of `sandbox.protocol`); anything else it or torch prints goes
to stderr. It never runs a torch op and never touches CUDA: a fork after a parallel
op hangs the child, and a fork after CUDA initialised cannot use CUDA. CUDA probes are
forked for isolation, then exec a fresh interpreter (`sandbox.cudachild`).

Per probe: a monitor child enters the namespaces (`sandbox.isolate`) and forks the
probe process, PID 1 of its PID namespace. The zygote enforces the wall-clock limit
by killing the monitor's process group; the probe dies with its parent
(PDEATHSIG), and everything it forked dies with it (PID namespace).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any

from review_copies.sandbox import isolate, protocol

REQUEST_CAP = 64 << 20
STDERR_TAIL = 2000


def _need_paths() -> list[str]:
    import importlib.util

    paths = [sys.executable, *isolate.package_paths(), os.path.dirname(os.__file__), sys.prefix]
    for name in ("torch", "numpy"):
        spec = importlib.util.find_spec(name)
        if spec and spec.origin:
            paths.append(os.path.dirname(spec.origin))
    return paths


def _cuda_present(torch: Any) -> bool:
    """A GPU and a CUDA build, found without initialising CUDA (which would poison fork)."""
    if not torch.cuda._is_compiled():
        return False
    if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
        return True
    gpus = "/proc/driver/nvidia/gpus"
    return os.path.isdir(gpus) and bool(os.listdir(gpus))


class Zygote:
    def __init__(self, isolation: str) -> None:
        self.root = tempfile.mkdtemp(prefix="review-copies-sandbox-")
        os.chmod(self.root, 0o711)  # a probe running as its own uid must reach its directory
        self.need = _need_paths()
        if isolation == "none":
            self.caps = protocol.Capabilities(problems=["namespaces turned off by the caller"])
        else:
            self.caps = isolate.detect(self.need, self.root)
        started = time.perf_counter()
        import torch

        self.torch = torch
        self.import_seconds = time.perf_counter() - started
        # Imports only, no op: the first dispatch mode pulls in torch._dynamo (~0.9 s),
        # which every probe would otherwise pay again.
        import torch._dynamo

        from review_copies.sandbox.worker import check  # noqa: F401

        self.warm_seconds = time.perf_counter() - started
        self.cuda = _cuda_present(torch)

    def hello(self) -> protocol.Hello:
        return protocol.Hello(torch=self.torch.__version__, cuda=self.cuda, caps=self.caps, import_seconds=self.import_seconds)

    # ---------------------------------------------------------------- one probe

    def probe(self, request: protocol.ProbeRequest) -> protocol.ProbeAnswer:
        if self.torch.cuda.is_initialized():
            return protocol.ProbeAnswer(ok=False, error="CUDA was initialised in the worker; refusing to fork")
        limits = request.limits
        cuda = request.device == "cuda"
        workdir = tempfile.mkdtemp(dir=self.root)
        if self.caps.uid_drop and self.caps.probe_uid is not None:
            os.chown(workdir, self.caps.probe_uid, self.caps.probe_uid)
        result_r, result_w = os.pipe()
        err_r, err_w = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(result_r)
            os.close(err_r)
            self._monitor(request, limits, cuda, workdir, result_w, err_w)
        os.close(result_w)
        os.close(err_w)
        try:
            answer = self._collect(pid, result_r, err_r, limits, started)
        finally:
            os.close(result_r)
            os.close(err_r)
            self._reap(pid)
            shutil.rmtree(workdir, ignore_errors=True)
            shutil.rmtree(workdir + ".stage", ignore_errors=True)
        return replace(answer, id=request.id, seconds=round(time.monotonic() - started, 4))

    def _collect(self, pid: int, result_r: int, err_r: int, limits: protocol.Limits, started: float) -> protocol.ProbeAnswer:
        deadline = started + limits.wall_seconds
        data, err = bytearray(), bytearray()
        open_fds = {result_r, err_r}
        over = False
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill(pid)
                return protocol.ProbeAnswer(ok=False, error=f"stopped at the wall-clock limit of {limits.wall_seconds:g} s", limit="wall", stderr=_tail(err))
            ready, _, _ = select.select(list(open_fds), [], [], left)
            for fd in ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    open_fds.discard(fd)
                elif fd == result_r:
                    data += chunk
                    if len(data) > limits.output_bytes + protocol.HEADER.size:
                        over = True
                        open_fds.discard(fd)
                else:
                    err += chunk
                    del err[: max(0, len(err) - STDERR_TAIL)]
            if over:
                self._kill(pid)
                return protocol.ProbeAnswer(ok=False, error=f"output over the {limits.output_bytes}-byte cap", limit="output", stderr=_tail(err))
        status = self._wait(pid, deadline)
        return self._answer(bytes(data), status, err, limits)

    def _answer(self, data: bytes, status: int | None, err: bytearray, limits: protocol.Limits) -> protocol.ProbeAnswer:
        if len(data) >= protocol.HEADER.size:
            (size,) = protocol.HEADER.unpack(data[: protocol.HEADER.size])
            body = data[protocol.HEADER.size : protocol.HEADER.size + size]
            if len(body) == size:
                try:
                    return replace(protocol.decode(protocol.ProbeAnswer, json.loads(body)), stderr=_tail(err))
                except (ValueError, protocol.MessageError) as exc:
                    return protocol.ProbeAnswer(ok=False, error=f"the probe's answer is malformed: {exc}", stderr=_tail(err))
        return protocol.ProbeAnswer(ok=False, error=_death(status, limits), stderr=_tail(err), limit=_limit_of(status))

    def _wait(self, pid: int, deadline: float) -> int | None:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            if time.monotonic() > deadline:
                self._kill(pid)
                return None
            time.sleep(0.002)

    def _kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)

    def _reap(self, pid: int) -> None:
        self._kill(pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        if not self.caps.namespaces and self.caps.uid_drop and self.caps.probe_uid is not None:
            isolate.kill_uid(self.caps.probe_uid)

    # ------------------------------------------------------------ in the children

    def _monitor(self, request: protocol.ProbeRequest, limits: protocol.Limits, cuda: bool, workdir: str, result_w: int, err_w: int) -> None:
        """The monitor child: namespaces, then the probe process (or be it, without namespaces)."""
        code = 70
        try:
            _close_fds_except({0, 1, 2, result_w, err_w})
            workdir = isolate.enter_namespaces(self.caps, workdir, limits.tmpfs_bytes, self.need)
            if not self.caps.namespaces:
                self._probe_process(request, limits, cuda, workdir, result_w, err_w)
            child = os.fork()
            if child == 0:
                self._probe_process(request, limits, cuda, workdir, result_w, err_w)
            os.close(result_w)
            os.close(err_w)
            _, status = os.waitpid(child, 0)
            code = os.waitstatus_to_exitcode(status)
            code = code if code >= 0 else 128 - code
        except BaseException as exc:
            _report(result_w, protocol.ProbeAnswer(ok=False, error=f"sandbox setup failed: {type(exc).__name__}: {exc}"))
        os._exit(code)

    def _probe_process(self, request: protocol.ProbeRequest, limits: protocol.Limits, cuda: bool, workdir: str, result_w: int, err_w: int) -> None:
        me = os.getpid()
        try:
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(err_w, 1)
            os.dup2(err_w, 2)
            isolate.enter_probe(self.caps, workdir, limits, cuda)
            env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1"}
            os.environ.clear()
            os.environ.update(env)
            tempfile.tempdir = workdir
            request = replace(request, workdir=workdir)
            if cuda:
                self._exec_cuda(request, env, result_w)
            from review_copies.sandbox.worker import check

            answer = protocol.ProbeAnswer(ok=True, result=check.run(request))
        except BaseException as exc:
            answer = protocol.ProbeAnswer(ok=False, error=f"probe failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        if os.getpid() != me:
            os._exit(0)  # a process the subject forked came back here: only the probe answers
        _report(result_w, answer)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def _exec_cuda(self, request: protocol.ProbeRequest, env: dict[str, str], result_w: int) -> None:
        """A fresh interpreter for CUDA: never initialise CUDA in a forked copy of the worker."""
        path = os.path.join(request.workdir, "request.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(protocol.encode(request), fh)
        os.set_inheritable(result_w, True)
        boot = f"from review_copies.sandbox.worker.cuda_child import main; main({path!r}, {result_w})"
        os.execve(sys.executable, [sys.executable, "-I", "-c", boot], {**env, "PYTORCH_NVML_BASED_CUDA_CHECK": "1"})


def _close_fds_except(keep: set[int]) -> None:
    """The worker's request and answer channels must not reach a probe."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _report(fd: int, message: protocol.ProbeAnswer) -> None:
    with contextlib.suppress(OSError):
        protocol.write_frame(fd, message)


def _tail(err: bytearray) -> str:
    return bytes(err[-STDERR_TAIL:]).decode(errors="replace")


def _limit_of(status: int | None) -> str | None:
    if status is None:
        return "wall"
    if os.WIFSIGNALED(status) or (os.WIFEXITED(status) and os.WEXITSTATUS(status) >= 128):
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status) - 128
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            return "cpu"
    return None


def _death(status: int | None, limits: protocol.Limits) -> str:
    if status is None:
        return f"stopped at the wall-clock limit of {limits.wall_seconds:g} s"
    code = os.waitstatus_to_exitcode(status)
    if code >= 128 or code < 0:
        sig = code - 128 if code >= 128 else -code
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU or sig == signal.SIGKILL:
            return f"killed by {name} (CPU-time limit of {limits.cpu_seconds} s, or out of memory)"
        return f"killed by {name}"
    return f"exited with status {code} without an answer"


def main() -> None:
    isolation = "none" if "--isolation=none" in sys.argv else "auto"
    channel_in, channel_out = os.dup(0), os.dup(1)
    os.dup2(2, 1)  # stray prints must not corrupt the channel
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    isolate.set_dumpable(False)
    zygote = Zygote(isolation)
    protocol.write_frame(channel_out, zygote.hello())
    while True:
        try:
            request = protocol.read_frame(channel_in, REQUEST_CAP)
        except protocol.FrameError:
            break
        if request.get("op") == "exit":
            break
        try:
            probe = protocol.decode(protocol.ProbeRequest, request.get("request"))
            answer = zygote.probe(probe)
        except Exception as exc:  # the worker must outlive any probe (or a request it cannot read)
            answer = protocol.ProbeAnswer(ok=False, error=f"worker error: {type(exc).__name__}: {exc}", id=request.get("id") if isinstance(request.get("id"), int) else 0)
        protocol.write_frame(channel_out, answer)
    shutil.rmtree(zygote.root, ignore_errors=True)


if __name__ == "__main__":
    main()
