"""The tensors inside a value, captured so a later state can be compared with this one.

- `byte_range` / `ranges_overlap`: the storage bytes a strided tensor or array can touch.
- `capture` / `Entry`: the tensors (and arrays) inside arguments, results, modules and
  containers, with their versions, storage ranges and a copy of their values.
- `compare`: differences between two captures, for telling the original's run from the fix's.
- `graph_nodes` / `graph_tensors`: what the autograd graph behind some tensors holds.

Imported only in the probe process (it imports torch).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from review_copies.sandbox.protocol import Difference

MAX_CLONE_ELEMENTS = 1 << 22
MAX_LEAVES = 400

Range = tuple[str, int, int]  # (device, first byte, one past the last byte)


def byte_range(t: Any) -> Range | None:
    """The bytes of storage a strided tensor (or NumPy array) can touch."""
    if isinstance(t, np.ndarray):
        if t.size == 0:
            return None
        lo = hi = t.__array_interface__["data"][0]
        for n, s in zip(t.shape, t.strides):
            if s >= 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        return ("cpu", lo, hi + t.itemsize)
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_meta:
        return None
    try:
        if t.numel() == 0:
            return None
        base = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    size = t.element_size()
    extent = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    lo = base + t.storage_offset() * size
    return (str(t.device), lo, lo + extent * size)


def ranges_overlap(a: Range | None, b: Range | None) -> bool:
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


# ------------------------------------------------------------------- flattening


@dataclass
class Entry:
    """One tensor-like leaf at a path, as it was when captured."""

    path: str
    ref: Any
    where: Range | None
    version: int | None
    value: Any  # a detached CPU copy, a NumPy copy, or the plain value

    def current_change(self) -> float | None:
        """Max abs change of the live object against the copy; None when it cannot tell."""
        return max_change(self.value, self.ref)


def _version(t: torch.Tensor) -> int | None:
    try:
        return t._version
    except RuntimeError:
        return None


def copy_value(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided or obj.numel() > MAX_CLONE_ELEMENTS or obj.is_meta:
            return None
        with torch.no_grad():
            return obj.detach().to("cpu", copy=True)
    if isinstance(obj, np.ndarray):
        return obj.copy() if obj.size <= MAX_CLONE_ELEMENTS else None
    return obj


def _as_float_array(v: Any) -> np.ndarray | None:
    if isinstance(v, torch.Tensor):
        if v.layout != torch.strided or v.is_meta:
            return None
        v = v.detach().to("cpu")
        if v.is_quantized:
            v = v.dequantize()
        if v.is_complex():
            v = torch.view_as_real(v)
        return v.to(torch.float64).numpy()
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "biufc":
            return None
        return np.asarray(v.real if v.dtype.kind == "c" else v, dtype=np.float64)
    if isinstance(v, (bool, int, float)) and not isinstance(v, type):
        return np.asarray(float(v))
    return None


def max_change(before: Any, after: Any) -> float | None:
    a, b = _as_float_array(before), _as_float_array(after)
    if a is None or b is None:
        return None
    if a.shape != b.shape:
        if a.size == 1 and b.size == 1:
            a, b = a.reshape(()), b.reshape(())
        else:
            return math.inf
    if a.size == 0:
        return 0.0
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.where(both_nan, 0.0, np.abs(a - b))
    diff = np.where(np.isnan(diff), math.inf, diff)
    return float(diff.max())


def _children(obj: Any, path: str, depth: int, attributes: bool) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, torch.nn.Module):
        for name, p in obj.named_parameters():
            yield f"{path}.{name}", p
        for name, b in obj.named_buffers():
            yield f"{path}.{name}", b
        return
    if isinstance(obj, dict):
        for k, v in list(obj.items())[:64]:
            yield f"{path}[{k!r}]", v
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:64]):
            yield f"{path}[{i}]", v
        return
    if attributes and depth < 2 and hasattr(obj, "__dict__") and not isinstance(obj, type) and not callable(obj):
        for k, v in list(vars(obj).items())[:64]:
            yield f"{path}.{k}", v
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield f"{path}.{f.name}", getattr(obj, f.name, None)


def leaves(obj: Any, path: str, attributes: bool = False, depth: int = 0, seen: set[int] | None = None) -> Iterator[tuple[str, Any]]:
    """(path, leaf) for tensors, arrays and scalars inside obj; modules give their state."""
    seen = set() if seen is None else seen
    if isinstance(obj, (torch.Tensor, np.ndarray, bool, int, float, complex, str, type(None))):
        yield path, obj
        return
    if id(obj) in seen or depth > 4 or isinstance(obj, torch.optim.Optimizer):
        return
    seen.add(id(obj))
    for child_path, child in _children(obj, path, depth, attributes):
        yield from leaves(child, child_path, attributes, depth + 1, seen)


def capture(obj: Any, path: str, attributes: bool = False) -> list[Entry]:
    out = []
    for p, leaf in leaves(obj, path, attributes):
        if len(out) >= MAX_LEAVES:
            break
        if isinstance(leaf, torch.Tensor):
            out.append(Entry(p, leaf, byte_range(leaf), _version(leaf), copy_value(leaf)))
        elif isinstance(leaf, np.ndarray):
            out.append(Entry(p, leaf, byte_range(leaf), None, copy_value(leaf)))
        else:
            out.append(Entry(p, leaf, None, None, leaf))
    return out


def describe_value(v: Any) -> dict[str, Any]:
    """What a result is, for comparing the original's with the fix's."""
    if isinstance(v, torch.Tensor):
        return {"kind": "tensor", "dtype": str(v.dtype), "shape": list(v.shape), "requires_grad": v.requires_grad, "device": v.device.type}
    if isinstance(v, np.ndarray):
        return {"kind": "ndarray", "dtype": str(v.dtype), "shape": list(v.shape)}
    return {"kind": type(v).__name__}


def compare(a: list[Entry], b: list[Entry], strict: bool) -> list[Difference]:
    """Differences between two captures of the same structure (paths matched by name)."""
    diffs = []
    by_path = {e.path: e for e in b}
    for ea in a:
        eb = by_path.pop(ea.path, None)
        if eb is None:
            diffs.append(Difference(ea.path, "missing in the fix"))
            continue
        da, db = describe_value(ea.ref), describe_value(eb.ref)
        numeric_a, numeric_b = _as_float_array(ea.value), _as_float_array(eb.value)
        if numeric_a is None or numeric_b is None:
            if numeric_a is None and numeric_b is None and type(ea.value) is type(eb.value) and not isinstance(ea.value, (torch.Tensor, np.ndarray)):
                try:
                    same = bool(ea.value == eb.value)
                except Exception:
                    same = True
                if not same:
                    diffs.append(Difference(ea.path, f"{ea.value!r} vs {eb.value!r}"[:120]))
            elif (numeric_a is None) != (numeric_b is None):
                diffs.append(Difference(ea.path, f"{da['kind']} vs {db['kind']}"))
            continue
        change = max_change(ea.value, eb.value)
        if change is None:
            continue
        if change == math.inf and numeric_a.shape != numeric_b.shape:
            diffs.append(Difference(ea.path, f"shape {list(numeric_a.shape)} vs {list(numeric_b.shape)}"))
            continue
        tol = 1e-6 + 1e-5 * float(np.nanmax(np.abs(numeric_a))) if numeric_a.size else 1e-6
        if change > tol:
            diffs.append(Difference(ea.path, "values", change))
        elif strict and da["kind"] == db["kind"] == "tensor":
            for key in ("dtype", "requires_grad"):
                if da[key] != db[key]:
                    diffs.append(Difference(ea.path, f"{key} {da[key]} vs {db[key]}"))
    for eb in by_path.values():
        diffs.append(Difference(eb.path, "only in the fix"))
    return diffs


# ------------------------------------------------------------------ the graph


def graph_nodes(tensors: list[torch.Tensor], limit: int = 200_000) -> set[int]:
    """Ids of the autograd nodes reachable from the tensors' grad_fn."""
    nodes = _reachable(tensors, limit)  # kept alive while their ids are taken
    return {id(node) for node in nodes}


def spent_nodes(tensors: list[torch.Tensor], limit: int = 20_000) -> int:
    """How many autograd nodes reachable from the tensors belong to a graph backward has
    already run through: their saved tensors are freed, and reading one raises. Such a
    node serves no gradient any more; a value that keeps more of them as a loop goes on
    keeps finished steps' graphs alive."""
    return sum(_freed(node) for node in _reachable(tensors, limit))


def _reachable(tensors: list[torch.Tensor], limit: int) -> list[Any]:
    """The autograd nodes reachable from the tensors' grad_fn (at most `limit`)."""
    seen: set[int] = set()
    nodes: list[Any] = []  # ids are only stable while the nodes are alive
    stack = [t.grad_fn for t in tensors if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack and len(seen) < limit:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return nodes


# The `_saved_*` attributes of each kind of node, looked up once per kind: dir() on every
# node made counting spent nodes twenty times slower than walking the graph.
_SAVED_NAMES: dict[type, tuple[str, ...]] = {}


def _freed(node: Any) -> bool:
    kind = type(node)
    names = _SAVED_NAMES.get(kind)
    if names is None:
        names = _SAVED_NAMES[kind] = tuple(name for name in dir(node) if name.startswith("_saved_"))
    for name in names:
        try:
            getattr(node, name)
        except RuntimeError:
            return True
    return False


def graph_tensors(obj: Any, path: str) -> list[tuple[str, torch.Tensor]]:
    return [(p, t) for p, t in leaves(obj, path, attributes=True) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
