"""Abstract values of the per-function dataflow model.

A `Value` says what the analysis knows about what a name holds at one point: is it a
tensor, is it attached to the autograd graph, where may it live, which storages it may
share memory with, and how it came to share them. Anything not known is said to be
unknown (`Tri.MAYBE`, `Device.UNKNOWN`, `Kind.UNKNOWN`) rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum


class Tri(Enum):
    NO = 0
    MAYBE = 1
    YES = 2

    def join(self, other: Tri) -> Tri:
        return self if self is other else Tri.MAYBE

    def either(self, other: Tri) -> Tri:
        """Logical or: attached if any input is attached."""
        if Tri.YES in (self, other):
            return Tri.YES
        if Tri.MAYBE in (self, other):
            return Tri.MAYBE
        return Tri.NO


class Kind(Enum):
    TENSOR = "tensor"
    PARAMETER_LIST = "parameters"  # model.parameters(), list(model.parameters())
    STATE_DICT = "state_dict"  # model.state_dict(), optimizer.state_dict()
    MODULE = "module"
    OPTIMIZER = "optimizer"
    NDARRAY = "ndarray"
    LIST = "list"
    DICT = "dict"
    TUPLE = "tuple"
    SCALAR = "scalar"  # Python numbers, .item() results
    DEVICE = "device"
    NONE = "none"
    OTHER = "other"  # known not to be any of the above (a string, a class, a function)
    UNKNOWN = "unknown"


class Device(Enum):
    CPU = "cpu"
    CUDA = "cuda"
    MAYBE_CUDA = "maybe-cuda"  # moved to a device chosen at run time, which may be a GPU
    UNKNOWN = "unknown"

    def join(self, other: Device) -> Device:
        if self is other:
            return self
        if Device.CUDA in (self, other) or Device.MAYBE_CUDA in (self, other):
            return Device.MAYBE_CUDA
        return Device.UNKNOWN

    @property
    def may_be_gpu(self) -> bool:
        return self in (Device.CUDA, Device.MAYBE_CUDA)


@dataclass(frozen=True)
class Value:
    kind: Kind = Kind.UNKNOWN
    # Attached to the autograd graph: requires grad (a leaf) or computed from one in grad mode.
    grad: Tri = Tri.MAYBE
    # A leaf that requires grad: a parameter, or a tensor made with requires_grad=True.
    leaf: bool = False
    device: Device = Device.UNKNOWN
    dtype: str | None = None
    # Storage identities this value may share memory with. A fresh tensor has one of its own.
    roots: frozenset[str] = frozenset()
    # Whether sharing memory with `roots` is certain (False: only possible, e.g. reshape).
    certain: bool = True
    # How the value came to share its roots' memory: "" (it is the original), "view",
    # "detach", "data", "numpy", "from_numpy", "as_tensor", "to", "alias", "state_dict",
    # "index" (indexing that is a view or a copy depending on the index's type).
    via: str = ""
    # A new temporary that nothing else refers to (the result of an op, not a name).
    fresh: bool = False
    # Elements for tuples and lists built from known values (for unpacking).
    items: tuple[Value, ...] | None = None
    # What a container holds (a state_dict's tensors, a parameter list's parameters).
    element: Value | None = None
    # For modules: whether it owns parameters (nn.ReLU() does not, nn.Linear does).
    has_params: Tri = Tri.MAYBE
    # For modules: whether its parameters require grad (NO after `.requires_grad_(False)`).
    params_grad: Tri = Tri.YES
    # For modules built from torch.nn: the class name ("Linear", "Sigmoid").
    op: str = ""
    # The saved-for-backward records (their indices) this tensor's graph holds.
    graph: frozenset[int] = frozenset()
    # A dtype it is known not to have (`if x.dtype != torch.float32:`), as that dtype's name or
    # as the code of the expression it was compared with: converting to it copies.
    not_dtype: str = ""
    # The code of a flag (`use_gpu`, `args.cuda`) it was moved to a GPU under: only in the arms
    # where that flag holds is it on one. A second `if use_gpu:` is the same test.
    gpu_if: str = ""
    # Where it came from, for messages: "torch.sigmoid(...) at line 4".
    origin: str = ""
    line: int = 0
    # A tensor known to have a dimension at least (`torch.arange(n)`): as an index it is
    # always advanced indexing, a copy (a 0-d integer tensor would index like an int).
    vector: bool = False
    # Reached through `.data`, which has a version counter of its own: autograd never sees a
    # write made through the tensor it shares memory with (views and `.detach()` keep this).
    unversioned: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.kind is Kind.TENSOR

    @property
    def attached(self) -> bool:
        return self.grad is Tri.YES

    def join(self, other: Value) -> Value:
        """What is known of a name that holds `self` on one path and `other` on another."""
        if self == other:
            return self
        if Kind.NONE in (self.kind, other.kind) and self.kind is not other.kind:
            # `x = None` on one path: x's dtype and device, when it is a tensor, are the other path's.
            some = other if self.kind is Kind.NONE else self
            dtype, device = some.dtype, some.device
        else:
            dtype, device = (self.dtype if self.dtype == other.dtype else None), self.device.join(other.device)
        kind = self.kind if self.kind is other.kind else Kind.UNKNOWN
        items = self.items if self.items == other.items else None
        element = self.element if self.element == other.element else None
        return Value(
            kind=kind,
            grad=self.grad.join(other.grad),
            leaf=self.leaf and other.leaf,
            device=device,
            dtype=dtype,
            roots=self.roots | other.roots,
            certain=self.certain and other.certain and self.roots == other.roots,
            via=self.via if self.via == other.via else "",
            fresh=False,
            items=items,
            element=element,
            has_params=self.has_params.join(other.has_params),
            params_grad=self.params_grad.join(other.params_grad),
            op=self.op if self.op == other.op else "",
            graph=self.graph | other.graph,
            not_dtype=self.not_dtype if self.not_dtype == other.not_dtype else "",
            # Moved under one flag in one arm and not to a GPU in the other: on a GPU only when the flag holds.
            gpu_if=gpu_flag(self, other),
            origin=self.origin if self.origin == other.origin else "",
            line=self.line if self.line == other.line else 0,
            vector=self.vector and other.vector,
        )

    def but(self, **changes: object) -> Value:
        # A dimension known to exist is kept only where the caller says so: indexing, iterating
        # or reducing a tensor can take it away.
        changes.setdefault("vector", False)
        return replace(self, **changes)  # type: ignore[arg-type]


def gpu_flag(*values: Value) -> str:
    """The one flag all of `values` that may be on a GPU were moved under, or ""."""
    flags = {v.gpu_if for v in values if v.device.may_be_gpu}
    return flags.pop() if len(flags) == 1 else ""


# The `op` of a DataLoader's value: `iter` and `next` follow it to its batches.
LOADER = "loader"


def a_loader(origin: str) -> Value:
    """A `torch.utils.data.DataLoader`: what iterating it yields is a batch read from a
    dataset (a tensor, or a tuple or dict of them), taken for data that does not require
    grad. A dataset that handed out tensors requiring grad would make batches that do with
    no worker process, and with workers the default collate raises on them (it stacks into
    shared memory with `out=`: measured, torch 2.13); the analysis assumes neither. Only
    the batch's grad is known, not its kind."""
    part = Value(kind=Kind.UNKNOWN, grad=Tri.NO, origin=f"a batch of {origin}")
    batch = part.but(element=part)
    return Value(kind=Kind.OTHER, grad=Tri.NO, op=LOADER, element=batch, origin=origin)


UNKNOWN = Value()
NONE = Value(kind=Kind.NONE, grad=Tri.NO)
SCALAR = Value(kind=Kind.SCALAR, grad=Tri.NO)
# A Python int: what `torch.arange(n)` needs to make int64 rather than float32.
INTEGER = Value(kind=Kind.SCALAR, grad=Tri.NO, dtype="int64")
OTHER = Value(kind=Kind.OTHER, grad=Tri.NO)


def index_tuple(indices: Value) -> Value:
    """`torch.where(cond)`, `x.nonzero(as_tuple=True)`: a tuple of 1-D index tensors, one per
    dimension, so `x[idx[0]]` and `rows, cols = ...` index with vectors (copies, never views)."""
    return Value(kind=Kind.TUPLE, grad=Tri.NO, element=indices.but(vector=True), roots=indices.roots, fresh=True, origin=indices.origin)
