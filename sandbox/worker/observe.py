"""What torch does while a subject runs, seen with torch's own machinery.

- `Recorder`, a TorchDispatchMode: every aten op below autograd, with the schema's alias
  annotations. A write is an argument marked `Tensor(a!)`; its byte range is taken
  before the op and kept only if the op succeeds. Copy ops add up their bytes.
- `SavedTensors`: saved-tensor hooks, run separately, because with any hook active
  autograd no longer checks versions (backward would "succeed" with wrong gradients).
  The pack hook returns `t.detach()`, never `t`, which would leak the graph.
- `LineWatch`: a settrace tracer on the subject's file that tells the recorder which
  line runs and snapshots the names a finding's statement binds, right after it ran.

Imported only in the probe process (it imports torch).
"""

from __future__ import annotations

import gc
import sys
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from review_copies.sandbox.protocol import LineCall, Overwrite
from review_copies.sandbox.worker.capture import Entry, Range, byte_range, capture, ranges_overlap, spent_nodes

COPY_OPS = frozenset(
    {
        "aten::clone", "aten::_to_copy", "aten::copy_", "aten::copy", "aten::lift_fresh_copy", "aten::_copy_from", "aten::_copy_from_and_resize",
        # Layout conversions materialise a full copy (densifying writes every zero).
        "aten::_to_dense", "aten::to_dense", "aten::_to_sparse", "aten::to_sparse",
    }
)
GATHER_OPS = frozenset({"aten::index", "aten::index_select", "aten::gather", "aten::masked_select", "aten::take"})
# Ops whose "write" changes metadata, not data.
META_ONLY = frozenset(
    {
        "aten::set_", "aten::resize_", "aten::resize_as_", "aten::t_", "aten::transpose_", "aten::squeeze_",
        "aten::unsqueeze_", "aten::as_strided_", "aten::swapaxes_", "aten::swapdims_", "aten::detach_",
        "aten::requires_grad_", "aten::_coalesced_", "aten::set_data", "aten::_fused_moving_avg_obs_fq_helper",
    }
)
@dataclass
class DispatchWrite:
    step: int
    op: str
    where: Range
    line: int | None


class Recorder(TorchDispatchMode):
    """Every aten op: which tensors it wrote, how many bytes copy ops copied."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Torch wraps a mode's __torch_dispatch__ in dynamo.disable, and the first call then
        # imports torch._dynamo: about as long as importing torch itself, paid by every
        # review. The recorder is never compiled, so the wrapper buys nothing here.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.step = 0
        self.last_op = ""
        self.writes: list[DispatchWrite] = []
        self.copy_bytes = 0
        self.copy_ops: Counter[str] = Counter()
        self.gather_bytes = 0
        self.line: int | None = None
        # The finding's lines (set by the LineWatch): what ops on them write and copy.
        self.span: tuple[int, int] | None = None
        self.span_writes = 0
        self.span_copy_bytes = 0
        self.on_write: Callable[[list[Range], str], None] | None = None
        # More callbacks after a write (saved-tensor checks), run like on_write.
        self.after_write: list[Callable[[list[Range], str], None]] = []
        # Set while the observer itself copies values (snapshots), which are not the subject's.
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        self.step += 1
        schema = func._schema
        name = schema.name
        pending: list[Range] = []
        if name not in META_ONLY:
            for i, arg in enumerate(schema.arguments):
                info = arg.alias_info
                if info is None or not info.is_write:
                    continue
                value = args[i] if i < len(args) else kwargs.get(arg.name)
                for t in value if isinstance(value, (list, tuple)) else (value,):
                    r = byte_range(t)
                    if r is not None:
                        pending.append(r)
        out = func(*args, **kwargs)
        op = func.overloadpacket.__name__
        self.last_op = op
        for r in pending:
            self.writes.append(DispatchWrite(self.step, op, r, self.line))
        if pending and self.on_span:
            self.span_writes += 1
        if pending and (self.on_write is not None or self.after_write):
            self.paused = True
            try:
                for hook in ([self.on_write] if self.on_write is not None else []) + self.after_write:
                    hook(pending, op)
            finally:
                self.paused = False
        if name in COPY_OPS:
            dst = args[0] if name.endswith("_") and args else out
            if isinstance(dst, torch.Tensor):
                copied = _stored_bytes(dst)
                self.copy_bytes += copied
                self.copy_ops[op] += 1
                if self.on_span:
                    self.span_copy_bytes += copied
        elif name in GATHER_OPS and isinstance(out, torch.Tensor):
            self.gather_bytes += out.numel() * out.element_size()
        return out

    @property
    def on_span(self) -> bool:
        return self.span is not None and self.line is not None and self.span[0] <= self.line <= self.span[1]

    def writes_to(self, where: Range | None, after: int = 0) -> list[DispatchWrite]:
        return [w for w in self.writes if w.step > after and ranges_overlap(w.where, where)]


_COPYING_FUNCTIONS = frozenset({"clone", "to", "contiguous", "copy_", "double", "float", "half", "cpu", "cuda", "type", "detach"})


# Conversions whose argument a recipe's precondition is about (`.numpy()` of a tensor that
# requires grad, `torch.tensor()` of a tensor).
_CONVERSIONS = frozenset({"numpy", "__array__", "tensor", "as_tensor"})


class FunctionCalls(TorchFunctionMode):
    """Torch functions as Python calls them: copies recorded in the autograd graph
    (clone().detach() records one, detach().clone() not), and the conversions the
    finding's lines make, with what they were given."""

    MAX_CALLS = 8

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.count = 0
        self.line_calls: list[LineCall] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _CONVERSIONS and self.recorder.on_span and len(self.line_calls) < self.MAX_CALLS:
            first = args[0] if args else None
            if isinstance(first, torch.Tensor):
                self.line_calls.append(LineCall(name, True, first.requires_grad, first.device.type))
            else:
                self.line_calls.append(LineCall(name, False))
        out = func(*args, **(kwargs or {}))
        copying = name in _COPYING_FUNCTIONS - {"detach"}
        if copying and isinstance(out, torch.Tensor) and out.grad_fn is not None and not any(a is out for a in args):
            self.count += 1
        return out


@dataclass
class SavedRecord:
    step: int
    by: str
    where: Range | None
    version: int
    alias: weakref.ref
    nbytes: int


class SavedTensors:
    """What autograd saved, when, and whether it was written afterwards."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.saved: list[SavedRecord] = []
        # Whether the first write over a saved tensor left its version alone (index -> silent),
        # decided right after that write: later writes (an optimizer step) may bump it.
        self.first_write: dict[int, bool] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def _written(self, ranges: list[Range], op: str) -> None:
        for i, s in enumerate(self.saved):
            if i in self.first_write or not any(ranges_overlap(s.where, r) for r in ranges):
                continue
            alias = s.alias()
            self.first_write[i] = alias is not None and s.version >= 0 and alias._version == s.version

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        by = self.recorder.last_op  # before the detach below, which the recorder also sees
        alias = t.detach()
        try:
            version = t._version
        except RuntimeError:
            version = -1
        self.saved.append(SavedRecord(self.recorder.step, by, byte_range(t), version, weakref.ref(alias), t.numel() * t.element_size()))
        return alias

    @staticmethod
    def _unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    def __enter__(self) -> SavedTensors:
        self._hooks.__enter__()
        self.recorder.after_write.append(self._written)
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)
        if self._written in self.recorder.after_write:
            self.recorder.after_write.remove(self._written)

    def overwritten(self) -> list[Overwrite]:
        """Saved tensors written after they were saved: loud (version moved) or silent."""
        out = []
        for i, s in enumerate(self.saved):
            writes = self.recorder.writes_to(s.where, after=s.step)
            if not writes:
                continue
            alias = s.alias()
            moved = alias is None or s.version < 0 or alias._version != s.version
            silent = self.first_write.get(i, not moved)
            out.append(Overwrite(s.by, writes[0].op, silent, writes[0].line))
        return out

    def alive_bytes(self) -> int:
        gc.collect()
        seen: set[Range] = set()
        total = 0
        for s in self.saved:
            if s.alias() is not None and s.where is not None and s.where not in seen:
                seen.add(s.where)
                total += s.nbytes
        return total


# ----------------------------------------------------------------- line watch


@dataclass
class Snapshot:
    name: str
    entries: list[Entry]
    step: int
    shares: list[tuple[str, str]] = field(default_factory=list)
    # A source the statement read its value from, not a value it bound.
    source: bool = False


class LineWatch:
    """Tracks which line of the subject runs, and snapshots the watched names after the
    watched statement ran (each time it runs, up to a few times)."""

    MAX_SNAPSHOTS = 6

    def __init__(self, filename: str, code: Any, fn_span: tuple[int, int], span: tuple[int, int] | None,
                 names: list[str], kind: str, recorder: Recorder, inputs: list[Entry], sources: tuple[str, ...] = ()) -> None:
        self.filename = filename
        self.code = code
        self.fn_span = fn_span
        self.span = span
        self.names = names
        self.sources = sources
        self.kind = kind
        self.recorder = recorder
        self.inputs = inputs
        self.inside: dict[int, bool] = {}
        self.frame: FrameType | None = None
        self.snapshots: list[Snapshot] = []
        self.ran = 0
        self.line_hits: list[list[str]] = []
        # A value the watched statement bound or wrote was attached to the graph.
        self.attached = False
        # Autograd nodes of finished steps (backward already ran) reachable from what the
        # statement bound: at its first run with a graph, and at the latest one measured.
        self.spent: list[int] = []
        self._previous: Any = None
        recorder.on_write = self._on_write
        recorder.span = span

    def __enter__(self) -> LineWatch:
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._previous)
        self.frame = None
        self.recorder.line = None
        self.recorder.on_write = None
        self.recorder.span = None

    def _global(self, frame: FrameType, event: str, arg: Any):
        return self._local if frame.f_code.co_filename == self.filename else None

    def _in(self, line: int, span: tuple[int, int] | None) -> bool:
        return span is not None and span[0] <= line <= span[1]

    def _local(self, frame: FrameType, event: str, arg: Any):
        line = frame.f_lineno
        if event == "line":
            if self._in(line, self.fn_span):
                self.recorder.line = line
                if frame.f_code is self.code:
                    self.frame = frame
            if frame.f_code is self.code:
                inside = self._in(line, self.span)
                if self.inside.get(id(frame)) and not inside:
                    self._take(frame, None)
                self.inside[id(frame)] = inside
        elif event == "return" and frame.f_code is self.code:
            if self.inside.pop(id(frame), False):
                self._take(frame, arg)
            if self.frame is frame:
                self.frame = None
                self.recorder.line = None
        return self._local

    def _resolve(self, name: str, frame: FrameType) -> Any:
        try:
            return eval(name, frame.f_globals, dict(frame.f_locals))  # names and attribute chains only (see subjects)
        except Exception:
            return _MISSING

    def _take(self, frame: FrameType, returned: Any) -> None:
        self.recorder.paused = True
        try:
            self._snapshot(frame, returned)
        finally:
            self.recorder.paused = False

    def _snapshot(self, frame: FrameType, returned: Any) -> None:
        self.ran += 1
        if len(self.snapshots) >= self.MAX_SNAPSHOTS * max(1, len(self.names) + len(self.sources)):
            return
        targets = [("return value", returned)] if self.kind == "return" else [(n, self._resolve(n, frame)) for n in self.names]
        local_entries = self._locals(frame)
        for name, value in targets:
            if value is _MISSING:
                continue
            entries = [e for e in capture(value, name) if e.where is not None]
            graphs = [e.ref for e in entries if isinstance(e.ref, torch.Tensor) and e.ref.grad_fn is not None]
            self.attached = self.attached or bool(graphs)
            if graphs and self.kind != "return":
                spent = spent_nodes(graphs)
                self.spent = [self.spent[0], spent] if self.spent else [spent, spent]
            snap = Snapshot(name, entries, self.recorder.step)
            for e in entries:
                for other in self.inputs:
                    if ranges_overlap(e.where, other.where):
                        snap.shares.append((e.path, f"input `{other.path}`"))
                        break
                else:
                    for local_name, other in local_entries:
                        # A returned local is the return value itself, not another name for it.
                        same = self.kind == "return" and other.ref is value
                        root = name.split(".")[0].split("[")[0]
                        # `self.target` may share memory with `self.policy`: another attribute of the same object.
                        elsewhere = local_name != root or ("." in name and not other.path.startswith(name))
                        if elsewhere and not same and ranges_overlap(e.where, other.where):
                            snap.shares.append((e.path, f"`{other.path}`"))
                            break
            self.snapshots.append(snap)
        for name in self.sources:
            value = self._resolve(name, frame)
            if value is not _MISSING:
                self.snapshots.append(Snapshot(name, [e for e in capture(value, name) if e.where is not None], self.recorder.step, source=True))

    def _locals(self, frame: FrameType) -> list[tuple[str, Entry]]:
        """Tensors other code can still read: the frame's locals and the module's tensors."""
        out = []
        for name, value in list(frame.f_locals.items())[:64]:
            if isinstance(value, (torch.Tensor, np.ndarray, list, tuple, dict)):
                out.extend((name, e) for e in capture(value, name) if e.where is not None)
            elif name == "self" and hasattr(value, "__dict__"):
                # The object's other attributes (self.policy next to self.target).
                for attr, held in list(vars(value).items())[:64]:
                    if isinstance(held, (torch.Tensor, torch.nn.Module, list, dict)):
                        out.extend((name, e) for e in capture(held, f"self.{attr}") if e.where is not None)
        for name, value in list(frame.f_globals.items())[:256]:
            if isinstance(value, (torch.Tensor, np.ndarray)) and name not in frame.f_locals:
                out.extend((name, e) for e in capture(value, name) if e.where is not None)
        return out

    def _on_write(self, ranges: list[Range], op: str) -> None:
        line = self.recorder.line
        frame = self.frame
        if frame is None or line is None or not self._in(line, self.span):
            return
        names = {e.path for _, e in self._locals(frame) if any(ranges_overlap(e.where, r) for r in ranges)}
        names |= {f"input `{e.path}`" for e in self.inputs if any(ranges_overlap(e.where, r) for r in ranges)}
        if names and len(self.line_hits) < 8:
            self.line_hits.append(sorted(names))


_MISSING = object()


def _stored_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor really holds: a sparse COO tensor stores its values and indices only."""
    if t.layout == torch.sparse_coo:
        return t._values().numel() * t.element_size() + t._indices().numel() * t._indices().element_size()
    return t.numel() * t.element_size()
