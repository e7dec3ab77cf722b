"""The warm worker: imports torch once (`warm`), then forks isolated probe processes,
several at once; `worker.serve` brings it requests and takes its answers.

Started by `verify.client` with a clean environment. It never runs a torch op and never touches CUDA: a fork after a parallel
op hangs the child, and a fork after CUDA initialised cannot use CUDA. CUDA probes are
forked for isolation, then exec a fresh interpreter (`sandbox.cudachild`).

Per probe: a monitor child enters the namespaces (`sandbox.isolate`) and forks the
probe process, PID 1 of its PID namespace. The zygote enforces the wall-clock limit
by killing the monitor's process group; the probe dies with its parent
(PDEATHSIG), and everything it forked dies with it (PID namespace).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import Any

from review_copies.sandbox import isolate, protocol

REQUEST_CAP = 64 << 20
STDERR_TAIL = 2000
# The name a probe sees as its user (its uid is one no account has).
PROBE_USER = "review-copies-probe"


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


@dataclass
class Running:
    """A probe in flight: its monitor's pid, its pipes, what it has said so far."""

    request: protocol.ProbeRequest
    pid: int
    result_r: int
    err_r: int
    workdir: str
    started: float
    deadline: float
    data: bytearray = field(default_factory=bytearray)
    err: bytearray = field(default_factory=bytearray)
    open_fds: set[int] = field(default_factory=set)
    answer: protocol.ProbeAnswer | None = None  # decided early: a limit was hit

    def __post_init__(self) -> None:
        self.open_fds = {self.result_r, self.err_r}

    def close(self, fd: int) -> None:
        if fd in self.open_fds:
            self.open_fds.discard(fd)
            os.close(fd)

    def done(self) -> bool:
        return not self.open_fds or self.answer is not None or time.monotonic() >= self.deadline


class Zygote:
    def __init__(self, isolation: str) -> None:
        """What isolation this machine allows; `warm` imports torch."""
        self.root = tempfile.mkdtemp(prefix="review-copies-sandbox-")
        os.chmod(self.root, 0o711)  # a probe running as its own uid must reach its directory
        self.need = _need_paths()
        if isolation == "none":
            self.caps = protocol.Capabilities(problems=["namespaces turned off by the caller"])
        else:
            self.caps = isolate.detect(self.need, self.root)
        self.import_seconds = 0.0
        self.cuda = False

    def warm(self) -> None:
        started = time.perf_counter()
        import torch

        self.torch = torch
        self.import_seconds = time.perf_counter() - started
        # Imports only, no op (a fork after a parallel op hangs the child). Optimizers call
        # functions torch wraps in dynamo.disable, whose first call imports torch._dynamo
        # (about as long as torch itself): imported once here, not in every probe.
        import torch._dynamo

        from review_copies.sandbox.worker import check  # noqa: F401

        # Everything imported so far lives as long as the worker: out of the collector's
        # sight, a probe's gc.collect() (the retention checks make several) scans only what
        # the probe made, not torch's hundreds of thousands of objects (0.3 s a call).
        gc.freeze()
        self.cuda = _cuda_present(torch)

    def hello(self) -> protocol.Hello:
        return protocol.Hello(torch=self.torch.__version__, cuda=self.cuda, caps=self.caps, import_seconds=self.import_seconds)

    # ---------------------------------------------------------------- probes

    @property
    def parallel(self) -> bool:
        """Probes run side by side unless reaping one would kill another's processes: without
        PID namespaces a probe's leftovers are found by its uid, which all probes share."""
        return self.caps.namespaces or not self.caps.uid_drop

    def launch(self, request: protocol.ProbeRequest) -> Running | protocol.ProbeAnswer:
        """Fork the probe's monitor; the answer comes later, through `Running`."""
        if self.torch.cuda.is_initialized():
            return protocol.ProbeAnswer(ok=False, error="CUDA was initialised in the worker; refusing to fork", id=request.id)
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
            self._monitor(request, request.limits, cuda, workdir, result_w, err_w)
        os.close(result_w)
        os.close(err_w)
        return Running(request, pid, result_r, err_r, workdir, started, started + request.limits.wall_seconds)

    def read(self, run: Running, fd: int) -> None:
        """One chunk from a probe's result or stderr pipe."""
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            run.close(fd)
        elif fd == run.result_r:
            run.data += chunk
            if len(run.data) > run.request.limits.output_bytes + protocol.HEADER.size:
                self.kill(run.pid)
                run.answer = protocol.ProbeAnswer(ok=False, error=f"output over the {run.request.limits.output_bytes}-byte cap", limit="output", stderr=_tail(run.err))
        else:
            run.err += chunk
            del run.err[: max(0, len(run.err) - STDERR_TAIL)]

    def finish(self, run: Running) -> protocol.ProbeAnswer:
        """The answer of a probe whose pipes closed, that went over a limit or past its
        wall clock; its processes are reaped and its directory removed."""
        limits = run.request.limits
        try:
            answer = run.answer
            if answer is None and time.monotonic() >= run.deadline and run.open_fds:
                self.kill(run.pid)
                answer = protocol.ProbeAnswer(ok=False, error=f"stopped at the wall-clock limit of {limits.wall_seconds:g} s", limit="wall", stderr=_tail(run.err))
            if answer is None:
                answer = self._answer(bytes(run.data), self._wait(run.pid, run.deadline), run.err, limits)
        finally:
            for fd in list(run.open_fds):
                run.close(fd)
            self._reap(run.pid)
            shutil.rmtree(run.workdir, ignore_errors=True)
            shutil.rmtree(run.workdir + ".stage", ignore_errors=True)
        return replace(answer, id=run.request.id, seconds=round(time.monotonic() - run.started, 4))

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
                self.kill(pid)
                return None
            time.sleep(0.002)

    def kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)

    def _reap(self, pid: int) -> None:
        self.kill(pid)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        if not self.caps.namespaces and self.caps.uid_drop and self.caps.probe_uid is not None:
            isolate.kill_uid(self.caps.probe_uid)

    # ------------------------------------------------------------ in the children

    def _monitor(self, request: protocol.ProbeRequest, limits: protocol.Limits, cuda: bool, workdir: str, result_w: int, err_w: int) -> None:
        """The monitor child: namespaces, then the probe process (or be it, without namespaces)."""
        code = 70
        try:
            # The monitor dies with the worker (and the probe with the monitor): a reviewer
            # that kills its worker mid-probe leaves nothing running.
            isolate.prctl(isolate.PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() == 1:
                os._exit(code)
            _close_fds_except({0, 1, 2, result_w, err_w})
            workdir = isolate.enter_namespaces(self.caps, workdir, limits.tmpfs_bytes, self.need, request.hide)
            if not self.caps.namespaces:
                self._probe_process(request, limits, cuda, workdir, result_w, err_w)
            inherited = isolate.resident_bytes()
            child = os.fork()
            if child == 0:
                self._probe_process(request, limits, cuda, workdir, result_w, err_w)
            os.close(err_w)
            status = _watch_tree(child, _tree_cap(limits.memory_bytes, inherited) if not cuda else 0)
            if status is None:
                _report(result_w, protocol.ProbeAnswer(
                    ok=False, limit="memory",
                    error=(f"stopped: the probe's processes together held more than {limits.memory_bytes >> 20} MiB of memory"
                           f" beyond the worker's {inherited >> 20} MiB"),
                ))
                code = 128 + signal.SIGKILL
            else:
                code = os.waitstatus_to_exitcode(status)
                code = code if code >= 0 else 128 - code
            os.close(result_w)
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
            # The probe's uid has no passwd entry: without USER/LOGNAME, getpass.getuser()
            # raises KeyError, and torch._dynamo's import calls it (inductor's cache folder).
            env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
                   "USER": PROBE_USER, "LOGNAME": PROBE_USER}
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


# How often the monitor adds up the memory of a probe's processes.
TREE_POLL_SECONDS = 0.05


def _watch_tree(child: int, cap: int) -> int | None:
    """Wait for the probe; None when its processes together go over `cap` bytes of
    resident memory (it is then killed). The address-space limit binds each process
    alone, and a probe may fork: only the sum bounds the tree. 0: no cap (CUDA)."""
    page = os.sysconf("SC_PAGE_SIZE")
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            return status
        if cap and _tree_memory(child, page, cap) > cap:
            # PID 1 of its namespace: when it dies the kernel kills every other process there.
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return None
        time.sleep(TREE_POLL_SECONDS)


def _tree_rss(child: int, page: int) -> tuple[list[int], int]:
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/statm", encoding="ascii") as fh:
                resident = int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents[int(name)] = ppid
        rss[int(name)] = resident * page
    if not os.path.exists("/proc/self"):
        # The probe mounted its namespace's own /proc, where this monitor has no pid: every
        # process listed is the probe's.
        return sorted(rss), sum(rss.values())
    tree = {child}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sorted(tree), sum(rss.get(pid, 0) for pid in tree)


def _tree_memory(child: int, page: int, cap: int) -> int:
    """The tree's memory: its resident sizes added up (cheap), and where that passes the
    cap, its proportional sizes (PSS), since forked copies of the worker share torch's
    pages and plain sums count them once per process."""
    pids, resident = _tree_rss(child, page)
    if resident <= cap:
        return resident
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
                total += next((int(line.split()[1]) for line in fh if line.startswith("Pss:")), 0) * 1024
        except (OSError, ValueError, IndexError):
            if not os.path.exists(f"/proc/{pid}"):
                continue  # it exited between the two reads: it holds nothing now
            return resident  # no PSS to be had: the plain sum, the safe side
    return total


def _tree_cap(memory_bytes: int, inherited: int) -> int:
    """The probe inherits the worker's resident pages (torch's libraries and heap, more as
    a warm worker grows) and the tree's sum charges it a share of each: the cap is what
    its processes may hold beyond them, as the address-space cap is."""
    return memory_bytes + inherited


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
