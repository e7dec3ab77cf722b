"""Values built from what the repository's own callers pass (`sandbox.verify.callers`
read them as text; here, in the probe process, they are built): the first candidates of
a parameter, ahead of anything invented.

A spec is evaluated in a closed language: constants, containers, torch functions and
classes by their dotted name (never a private one, never one that reads or writes files),
the reviewed file's own classes and functions, methods from an allowlist, calling a built
module, arithmetic. Sizes are capped so that a caller's full-size batch does not eat the
probe's memory: a larger factory call is refused and the next candidate is tried.

Imported only in the probe process.
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Callable
from typing import Any, Protocol

import torch

from review_copies.sandbox.protocol import DENIED_TORCH_NAMES
from review_copies.sandbox.worker.inputs.candidates import Cand
from review_copies.sandbox.worker.inputs.variant import Unbuildable, Variant


class World(Protocol):
    """What building a caller's value needs of `inputs.world.World` (which imports this
    module, so it is named by what it offers)."""

    variant: Variant
    plan: Any

    @property
    def device(self) -> str: ...

    def value(self, path: str) -> Any: ...

    def _grad(self, t: torch.Tensor, grad: bool | None = None) -> torch.Tensor: ...

MAX_ELEMENTS = 1 << 20
MAX_SITES = 3
_METHODS = frozenset(
    "float double half long int bool t T contiguous requires_grad_ detach clone view reshape unsqueeze squeeze transpose permute "
    "flatten expand repeat sum mean pow exp log abs sigmoid relu tanh softmax log_softmax neg sqrt cpu numpy item tolist "
    "parameters named_parameters buffers children modules train eval zero_grad to type new_zeros new_ones fill_ zero_ "
    "normal_ uniform_ __getitem__ size dim".split()
)
_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "@": operator.matmul,
    "**": operator.pow, "//": operator.floordiv, "%": operator.mod,
}
_CREATORS = frozenset("randn rand zeros ones empty full randint arange eye linspace normal ones_like zeros_like randn_like rand_like".split())


def caller_cands(hints: dict[str, Any], param: str, init: bool) -> list[Cand]:
    """The callers' values for one parameter, best call site first."""
    out = []
    for site in (hints.get("callers") or [])[:MAX_SITES]:
        entry = (site.get("init") if init else site.get("args") or {}).get(param) if isinstance(site, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("spec"), dict):
            out.append(Cand("caller", (str(site.get("site", "")), str(entry.get("text", "")), str(entry.get("role", "value")), json.dumps(entry["spec"], sort_keys=True))))
    return out


def role(c: Cand) -> str:
    """What a candidate will be used as: its kind, or for a caller's value the role the
    reviewer read from the call (model, optimizer, loader, value)."""
    if c.kind != "caller":
        return c.kind
    return {"model": "file_model", "optimizer": "optimizer", "loader": "loader"}.get(c.arg[2], "caller")


def build(world: World, c: Cand, path: str) -> Any:
    spec = json.loads(c.arg[3])
    value = _Evaluator(world, path).value(spec)
    if role(c) == "loader" and not isinstance(value, (list, tuple)):
        # A loader is iterated for as many steps as the run takes, no more.
        value = list(itertools.islice(iter(value), world.variant.steps))
    return value


class _Evaluator:
    def __init__(self, world: World, path: str) -> None:
        self.world = world
        self.path = path

    def value(self, spec: dict[str, Any]) -> Any:
        kind = spec.get("k")
        handler = getattr(self, f"_{kind}", None)
        if handler is None:
            raise Unbuildable(f"no caller value of kind {kind!r}")
        return handler(spec)

    def _const(self, spec: dict[str, Any]) -> Any:
        return spec["v"]

    def _tuple(self, spec: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(self.value(s) for s in spec["items"])

    def _list(self, spec: dict[str, Any]) -> list[Any]:
        return [self.value(s) for s in spec["items"]]

    def _dict(self, spec: dict[str, Any]) -> dict[Any, Any]:
        return {k: self.value(v) for k, v in spec["items"]}

    def _dtype(self, spec: dict[str, Any]) -> torch.dtype:
        dtype = getattr(torch, spec["v"], None)
        if not isinstance(dtype, torch.dtype):
            raise Unbuildable(f"torch.{spec['v']} is not a dtype")
        return dtype

    def _device(self, spec: dict[str, Any]) -> str:
        return self.world.device

    def _same_as(self, spec: dict[str, Any]) -> Any:
        return self.world.value(spec["param"])

    def _index(self, spec: dict[str, Any]) -> Any:
        return self.value(spec["of"])[spec["i"]]

    def _item(self, spec: dict[str, Any]) -> Any:
        return next(iter(self.value(spec["of"])))

    def _binop(self, spec: dict[str, Any]) -> Any:
        return _BINOPS[spec["op"]](self.value(spec["left"]), self.value(spec["right"]))

    def _to_device(self, spec: dict[str, Any]) -> Any:
        value = self.value(spec["on"])
        return value.to(self.world.device) if isinstance(value, (torch.Tensor, torch.nn.Module)) else value

    def _arguments(self, spec: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        args = [self.value(a) for a in spec.get("args", [])]
        kwargs = {k: self.value(v) for k, v in spec.get("kwargs", {}).items()}
        if "device" in kwargs:
            kwargs["device"] = self.world.device
        return args, kwargs

    def _method(self, spec: dict[str, Any]) -> Any:
        name = spec["name"]
        if name not in _METHODS:
            raise Unbuildable(f"a caller's `.{name}()` is not built in the sandbox")
        receiver = self.value(spec["on"])
        args, kwargs = self._arguments(spec)
        if name == "to":
            args = [self.world.device if isinstance(a, (str, torch.device)) else a for a in args]
        return getattr(receiver, name)(*args, **kwargs)

    def _invoke(self, spec: dict[str, Any]) -> Any:
        fn = self.value(spec["on"])
        if not isinstance(fn, torch.nn.Module):
            raise Unbuildable("a caller calls a value that is not a module")
        args, kwargs = self._arguments(spec)
        return fn(*args, **kwargs)

    def _call(self, spec: dict[str, Any]) -> Any:
        fn = self._function(spec["fn"])
        args, kwargs = self._arguments(spec)
        name = spec["fn"].rsplit(".", 1)[-1]
        if spec["fn"].startswith("torch.") and name in _CREATORS:
            _check_size(name, args, kwargs)
            if "device" not in kwargs and not name.endswith("_like"):
                kwargs["device"] = self.world.device
        if spec["fn"].endswith("DataLoader"):
            kwargs = {k: v for k, v in kwargs.items() if k not in ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "worker_init_fn")}
        value = fn(*args, **kwargs)
        if isinstance(value, torch.nn.Module):
            value = value.to(self.world.device)
        if isinstance(value, torch.Tensor):
            if value.numel() > MAX_ELEMENTS:
                raise Unbuildable(f"the caller's tensor has {value.numel()} elements")
            if self.world.variant.requires_grad and value.is_floating_point() and not value.requires_grad and value.grad_fn is None:
                value = self.world._grad(value)
        return value

    def _function(self, dotted: str) -> Any:
        if dotted.startswith("file:"):
            assert self.world.plan is not None
            obj = self.world.plan.providers.namespace.get(dotted[5:])
            if obj is None:
                raise Unbuildable(f"`{dotted[5:]}` is not in the reviewed file's kept code")
            return obj
        parts = dotted.split(".")
        if parts[0] != "torch" or any(p.startswith("_") for p in parts) or any(p in DENIED_TORCH_NAMES for p in parts[1:]):
            raise Unbuildable(f"`{dotted}` is not built in the sandbox")
        obj: Any = torch
        for part in parts[1:]:
            obj = getattr(obj, part, None)
            if obj is None:
                raise Unbuildable(f"no `{dotted}` in this torch")
        if not callable(obj):
            raise Unbuildable(f"`{dotted}` is not callable")
        return obj


def _check_size(name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """A factory's element count before it allocates (`torch.randn(60000, 784)` would)."""
    sizes = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    shape = next((a for a in args if isinstance(a, (tuple, list, torch.Size))), None)
    if "size" in kwargs and isinstance(kwargs["size"], (tuple, list)):
        shape = kwargs["size"]
    if name in ("arange", "linspace", "randint", "full", "normal", "eye"):
        dims = [abs(int(a)) for a in (shape or sizes[-1:]) if isinstance(a, int)]
    else:
        dims = [int(a) for a in (shape if shape is not None else sizes) if isinstance(a, int)]
    count = 1
    for d in dims:
        count *= max(d, 1)
    if count > MAX_ELEMENTS:
        raise Unbuildable(f"the caller's `torch.{name}` would hold {count} elements")
