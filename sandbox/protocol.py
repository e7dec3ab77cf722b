"""What the reviewer's process and the sandbox's worker processes say to each other: typed
messages, and the frames that carry them.

A frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON. Readers take a
size cap: a probe that prints gigabytes gets its answer cut, not the reviewer's memory.
Every message is a frozen dataclass below; `encode` turns one into JSON and `decode` checks
JSON against the dataclass's fields (types included) before building it, so an answer
forged or mangled on the worker's side is an error, never a half-read dict.

Imports neither torch nor libcst: both sides use it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import struct
import time
import types
import typing
from dataclasses import dataclass, field
from typing import Any, TypeVar

HEADER = struct.Struct(">I")
T = TypeVar("T")


class FrameError(Exception):
    """The other side closed, sent garbage, exceeded the size cap, or ran out of time."""


class MessageError(ValueError):
    """A frame's JSON does not have the shape of the message it should be."""


# ------------------------------------------------------------------ requests


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 20
    wall_seconds: float = 30.0
    # Address-space cap, CPU runs only (CUDA reserves huge virtual ranges).
    memory_bytes: int = 3 << 30
    file_bytes: int = 16 << 20
    open_files: int = 256
    processes: int = 64
    tmpfs_bytes: int = 64 << 20
    output_bytes: int = 4 << 20


@dataclass(frozen=True)
class Watch:
    """The finding's statement: its lines, the names it binds or writes, and its kind
    (assign, write, return, call, expr)."""

    span: tuple[int, int]
    names: tuple[str, ...]
    kind: str
    # What the statement reads its value from (`model` of `best = model.state_dict()`): a
    # snapshot recipe needs to see that source change before a kept value can be judged.
    sources: tuple[str, ...] = ()
    # The statement is inside a loop of its function (it runs many times in one call).
    in_loop: bool = False


@dataclass(frozen=True)
class Side:
    """One version of the code to run (as written, or with the fix applied)."""

    source: str
    filename: str
    # The function to call: (name,) or (class, method).
    target: tuple[str, ...]
    fn_span: tuple[int, int]
    watch: Watch
    # What the code does with each parameter (`verify.param_facts`), for building inputs.
    facts: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def qualname(self) -> str:
        return ".".join(self.target)


@dataclass(frozen=True)
class Subject:
    original: Side
    fixed: Side | None
    # Why there is no fixed side, when there is none.
    no_fix: str = ""


@dataclass(frozen=True)
class ProbeRequest:
    """Check one finding on one device: which recipes to measure, the code, and (from the
    LLM) a probe script that builds the inputs itself."""

    device: str
    recipes: tuple[str, ...]
    subject: Subject
    probe: str = ""
    # What the finding says happens ("grad": a tensor requires grad, "gpu": it lives on a GPU).
    claims: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    id: int = 0
    # Set by the client: the reviewer's directories a probe must not read (its working
    # directory, the reviewed checkout), wherever they live; a kept-warm worker serves
    # reviews of many checkouts, so they travel with each request.
    hide: tuple[str, ...] = ()
    # Set by the worker: the probe process's private directory.
    workdir: str = "."


# --------------------------------------------------------------- the worker


@dataclass(frozen=True)
class Isolation:
    """How probes are isolated on this host, in words for the report's stats."""

    network: str
    filesystem: str
    processes: str
    proc: str


@dataclass
class Capabilities:
    """What this host lets the sandbox do, found once by trying it in a throwaway child."""

    namespaces: bool = False
    user_namespace: bool = False
    readonly_fs: bool = False
    fresh_proc: bool = False
    uid_drop: bool = False
    probe_uid: int | None = None
    problems: list[str] = field(default_factory=list)

    def describe(self) -> Isolation:
        why = "; ".join(self.problems) or "unknown"
        return Isolation(
            network="namespace" if self.namespaces else f"not isolated: {why}",
            filesystem="read-only mounts, private tmpfs" if self.readonly_fs else (
                "file permissions of an unprivileged uid, private temp dir" if self.uid_drop else f"not isolated: {why}"
            ),
            processes="pid namespace" if self.namespaces else (
                "process group, uid-wide kill" if self.uid_drop else "process group only (a setsid grandchild can escape)"
            ),
            proc="private /proc" if self.fresh_proc else (
                "other processes' environment unreadable (different uid)" if self.uid_drop else "host /proc visible"
            ),
        )


@dataclass(frozen=True)
class Hello:
    """The worker's first frame: it is up, with this torch, on this host."""

    torch: str
    cuda: bool
    caps: Capabilities
    import_seconds: float = 0.0


# ------------------------------------------------------------- observations


@dataclass(frozen=True)
class Mutation:
    """An input changed by the call: its version counter, the largest change, the ops and
    lines that wrote it, and whether one of them is the finding's line."""

    name: str
    v0: int | None = None
    v1: int | None = None
    max_change: float | None = None
    ops: tuple[str, ...] = ()
    lines: tuple[int, ...] = ()
    on_line: bool = False


@dataclass(frozen=True)
class Changed:
    """A value taken on the finding's line that changed afterwards, and when."""

    path: str
    max_change: float
    when: str


@dataclass(frozen=True)
class Shared:
    """A value taken on the finding's line that shares memory with `other`."""

    path: str
    other: str


@dataclass(frozen=True)
class LineCall:
    """A torch function the finding's line called, and what it was given first: what
    `.numpy()`, `torch.tensor(...)` or `np.asarray(...)` converted."""

    name: str
    tensor: bool
    requires_grad: bool = False
    device: str = ""


@dataclass(frozen=True)
class WatchReport:
    """What the finding's line did in one run: the facts each recipe's precondition and
    effect are read from."""

    # How many times the finding's line ran.
    ran: int = 0
    changed: tuple[Changed, ...] = ()
    shares: tuple[Shared, ...] = ()
    # Names an in-place write on the finding's line reached at once.
    line_hits: tuple[tuple[str, ...], ...] = ()
    # In-place writes the line made, and the bytes its copy ops copied.
    writes: int = 0
    copy_bytes: int = 0
    # A value the line bound or wrote was attached to the autograd graph (had a grad_fn).
    attached: bool = False
    # Autograd nodes of finished steps (their backward already ran) reachable from what the
    # line bound: at its first run with a graph and at its latest measured run.
    spent: tuple[int, int] = (0, 0)
    calls: tuple[LineCall, ...] = ()
    # Input tensors changed by the later in-place step (what a snapshot must not follow).
    bumped: int = 0
    # The statement's sources that changed after it ran, and when.
    sources_changed: tuple[Changed, ...] = ()


@dataclass(frozen=True)
class BackwardRun:
    tried: bool
    error: str | None = None


@dataclass(frozen=True)
class Retained:
    """What a run leaves attached to the graph after it returns."""

    nodes: int = 0
    state_nodes: int = 0
    saved_bytes: int = 0
    holders: tuple[str, ...] = ()


@dataclass(frozen=True)
class Overwrite:
    """A tensor autograd saved, written after it was saved."""

    saved_by: str
    written_by: str
    silent: bool
    line: int | None = None


@dataclass(frozen=True)
class OutAlias:
    output: str
    input: str


@dataclass(frozen=True)
class SideRun:
    """One run of one side of the subject with one set of inputs."""

    ok: bool = False
    error: str | None = None
    # Where it stopped: load, inputs, or call.
    stage: str | None = None
    error_type: str | None = None
    # The subject's line the error came from.
    where: int | None = None
    load_failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    mutated: tuple[Mutation, ...] = ()
    copy_bytes: int = 0
    copy_ops: dict[str, int] = field(default_factory=dict)
    gather_bytes: int = 0
    graph_copies: int = 0
    out_aliases: tuple[OutAlias, ...] = ()
    result: str = ""
    saved_overwritten: tuple[Overwrite, ...] = ()
    retained: Retained | None = None
    backward: BackwardRun | None = None
    watch: WatchReport | None = None
    # How the inputs differed from the variant's usual ones, when they did.
    inputs: str = ""


@dataclass(frozen=True)
class Difference:
    path: str
    what: str
    max_abs_diff: float | None = None


@dataclass(frozen=True)
class Comparison:
    """The original's run against the fix's, on the same inputs."""

    comparable: bool
    outputs: tuple[Difference, ...] = ()
    # Output differences that follow from what the original modified (the bug itself).
    explained: tuple[Difference, ...] = ()
    final_inputs: tuple[Difference, ...] = ()
    at_time: tuple[Difference, ...] = ()
    grads: tuple[Difference, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class VariantRun:
    """Both sides run with one variant of the inputs (plain, grad, strided, device)."""

    variant: str
    original: SideRun
    fixed: SideRun | None = None
    compare: Comparison | None = None


@dataclass(frozen=True)
class StepsRun:
    steps: int
    ok: bool
    error: str | None = None
    retained: Retained = field(default_factory=Retained)
    watch: WatchReport | None = None


@dataclass(frozen=True)
class Retention:
    original: tuple[StepsRun, ...]
    fixed: tuple[StepsRun, ...] | None = None


@dataclass(frozen=True)
class GradCheck:
    tried: bool
    agree: bool = False
    max_diff: float | None = None
    worst: str = ""
    why: str = ""


@dataclass(frozen=True)
class GradChecks:
    original: GradCheck
    fixed: GradCheck | None = None


@dataclass(frozen=True)
class SavedChecks:
    original: tuple[Overwrite, ...]
    fixed: tuple[Overwrite, ...] | None = None


# Torch names an input built from a caller's call may never reach, even in the sandbox:
# files, processes, compilation, extensions. Checked on both sides.
DENIED_TORCH_NAMES = frozenset(
    "load save from_file hub compile jit ops classes library cuda backends distributed multiprocessing onnx export package cpp_extension".split()
)


@dataclass(frozen=True)
class SearchReport:
    """How the inputs were found: tries, whether the original ran, what each input was."""

    tries: int
    limit: int
    fix_limit: int
    ran: bool
    inputs: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    # The repository's call sites the chosen inputs came from (`train.py:88`).
    callers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Observation:
    """Everything the probe process measured for one request."""

    device: str
    variants: tuple[VariantRun, ...] = ()
    search: SearchReport | None = None
    retention: Retention | None = None
    gradcheck: GradChecks | None = None
    saved: SavedChecks | None = None


@dataclass(frozen=True)
class ProbeAnswer:
    ok: bool
    result: Observation | None = None
    error: str = ""
    id: int = 0
    seconds: float = 0.0
    # The probe's standard error, tail only.
    stderr: str = ""
    # The limit that stopped it (wall, cpu, memory, output), if one did.
    limit: str | None = None


# ----------------------------------------------------------------- the codec


def encode(message: Any) -> Any:
    """A message (or any part of one) as JSON-ready data."""
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        return {f.name: encode(getattr(message, f.name)) for f in dataclasses.fields(message)}
    if isinstance(message, (list, tuple)):
        return [encode(v) for v in message]
    if isinstance(message, dict):
        return {str(k): encode(v) for k, v in message.items()}
    return message


def decode(cls: type[T], data: Any) -> T:
    """Build `cls` from JSON data, checking every field's type; MessageError if it does not fit."""
    return _value(cls, data, cls.__name__)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _value(kind: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(kind)
    if kind is Any:
        return data
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(kind)
        if data is None and type(None) in options:
            return None
        real = [option for option in options if option is not type(None)]
        if len(real) == 1:
            return _value(real[0], data, where)
        for option in real:
            try:
                return _value(option, data, where)
            except MessageError:
                continue
        raise MessageError(f"{where}: {type(data).__name__} fits none of {kind}")
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise MessageError(f"{where}: expected an object, got {type(data).__name__}")
        hints = _hints(kind)
        values = {}
        for f in dataclasses.fields(kind):
            if f.name in data:
                values[f.name] = _value(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise MessageError(f"{where}: {f.name} is missing")
        return kind(**values)
    if origin is tuple:
        args = typing.get_args(kind)
        if not isinstance(data, list):
            raise MessageError(f"{where}: expected a list, got {type(data).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
        if len(data) != len(args):
            raise MessageError(f"{where}: expected {len(args)} items, got {len(data)}")
        return tuple(_value(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
    if origin is list:
        (arg,) = typing.get_args(kind)
        if not isinstance(data, list):
            raise MessageError(f"{where}: expected a list, got {type(data).__name__}")
        return [_value(arg, v, f"{where}[{i}]") for i, v in enumerate(data)]
    if origin is dict:
        key_kind, value_kind = typing.get_args(kind)
        if not isinstance(data, dict):
            raise MessageError(f"{where}: expected an object, got {type(data).__name__}")
        return {_value(key_kind, k, where): _value(value_kind, v, f"{where}[{k!r}]") for k, v in data.items()}
    if kind is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise MessageError(f"{where}: expected a number, got {type(data).__name__}")
        return float(data)
    if kind is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise MessageError(f"{where}: expected an integer, got {type(data).__name__}")
        return data
    if kind in (str, bool):
        if not isinstance(data, kind):
            raise MessageError(f"{where}: expected {kind.__name__}, got {type(data).__name__}")
        return data
    if kind is type(None):
        if data is not None:
            raise MessageError(f"{where}: expected null")
        return None
    raise MessageError(f"{where}: cannot read a {kind}")


# ------------------------------------------------------------------- frames


def frame(message: Any) -> bytes:
    body = json.dumps(encode(message), separators=(",", ":"), default=str).encode()
    return HEADER.pack(len(body)) + body


def write_frame(fd: int, message: Any) -> None:
    data = memoryview(frame(message))
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise FrameError("timed out")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise FrameError("timed out")
        chunk = os.read(fd, min(n - got, 1 << 16))
        if not chunk:
            raise FrameError("closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, cap: int, deadline: float | None = None) -> dict[str, Any]:
    (size,) = HEADER.unpack(_read_exact(fd, HEADER.size, deadline))
    if size > cap:
        raise FrameError(f"answer of {size} bytes is over the {cap}-byte cap")
    try:
        message = json.loads(_read_exact(fd, size, deadline))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise FrameError("not a JSON object")
    return message
