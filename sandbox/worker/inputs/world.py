"""One consistent set of inputs for a choice of candidates: 8 samples of 4 features, 4
classes, models of the file (or a Linear(4, 4)), an optimizer over the model it belongs
to, loaders shaped as the loop unpacks them. Built lazily, value by value."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from review_copies.sandbox.worker.inputs import callers
from review_copies.sandbox.worker.inputs.candidates import Cand, candidates, is_size
from review_copies.sandbox.worker.inputs.plan import Plan
from review_copies.sandbox.worker.inputs.variant import BATCH, CLASSES, FEATURES, SEQ, SPATIAL, VOCAB, Unbuildable, Variant

# A parameter left to its default: not passed at all.
DEFAULT = object()


@dataclass
class World:
    """One consistent set of inputs for a choice of candidates, built lazily."""

    variant: Variant
    workdir: str = "."
    plan: Plan | None = None
    choice: dict[str, int] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)
    instance: Any = None
    notes: list[str] = field(default_factory=list)
    _model: torch.nn.Module | None = None
    _optimizers: dict[int, torch.optim.Optimizer] = field(default_factory=dict)

    @property
    def device(self) -> str:
        return self.variant.device

    # tensors ----------------------------------------------------------

    def _grad(self, t: torch.Tensor, grad: bool | None = None) -> torch.Tensor:
        rg = self.variant.requires_grad if grad is None else grad
        if not rg:
            return t
        t.requires_grad_(True)
        return t * 1.0 if not self.variant.leaf else t

    def features(self, rows: int = BATCH, cols: int = FEATURES, grad: bool | None = None) -> torch.Tensor:
        return self.float_tensor((rows, cols), grad)

    def float_tensor(self, shape: tuple[int, ...], grad: bool | None = None) -> torch.Tensor:
        shape = tuple(shape)
        if self.variant.contiguous or len(shape) < 2:
            t = torch.randn(*shape, device=self.device)
        else:
            t = torch.randn(*reversed(shape), device=self.device).permute(*reversed(range(len(shape))))
        return self._grad(t, grad)

    def target(self) -> torch.Tensor:
        return torch.randn(BATCH, CLASSES, device=self.device)

    def model(self) -> torch.nn.Module:
        if self._model is None:
            self._model = torch.nn.Linear(FEATURES, CLASSES).to(self.device)
        return self._model

    def loss(self) -> torch.Tensor:
        w = torch.randn(FEATURES, device=self.device, requires_grad=True)
        return (self.features(grad=False) * w).pow(2).mean()

    def param(self) -> torch.Tensor:
        p = torch.randn(FEATURES, CLASSES, device=self.device).requires_grad_(self.variant.requires_grad)
        if p.requires_grad:
            p.grad = torch.randn_like(p)
        return p

    # the plan ---------------------------------------------------------

    def cand(self, path: str) -> Cand:
        assert self.plan is not None
        slot = self.plan.slots[path]
        return slot.cands[min(self.choice.get(path, 0), len(slot.cands) - 1)]

    def value(self, path: str) -> Any:
        """The value of a top-level slot, built once per world."""
        if path not in self.memo:
            self.memo[path] = self.make(path)
        return self.memo[path]

    def make(self, path: str) -> Any:
        assert self.plan is not None
        if path not in self.plan.slots:
            return self.features()
        c = self.cand(path)
        try:
            return self._make(c, path)
        except Unbuildable as exc:
            if f"`{path}`" in str(exc):
                raise
            raise Unbuildable(f"could not build `{path}` as {c.words()}: {exc}") from None
        except Exception as exc:
            raise Unbuildable(f"could not build `{path}` as {c.words()}: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None

    def models(self) -> dict[str, torch.nn.Module]:
        """The model arguments (the constructor's too, for a method), by name."""
        assert self.plan is not None
        out = {}
        for path in [f"init:{n}" for n in self.plan.init_params] + self.plan.params:
            if callers.role(self.cand(path)) in ("model", "file_model"):
                out[path.split(":")[-1]] = self.value(path)
        return out

    def _paired_model(self, path: str) -> torch.nn.Module:
        """The model an optimizer (or scheduler) belongs to: `opt_g` -> `G`, else the first."""
        models = self.models()
        stem = re.sub(r"^(opt|optim|optimizer|optimiser|sched|scheduler)_?|_?(opt|optim|optimizer|optimiser|sched|scheduler)$", "", path.split(":")[-1]).lower()
        for name, m in models.items():
            if stem and name.lower().replace("_model", "").replace("model_", "") == stem:
                return m
        if models:
            return next(iter(models.values()))
        if isinstance(self.instance, torch.nn.Module) and any(True for _ in self.instance.parameters()):
            return self.instance
        return self.model()

    def optimizer_for(self, path: str) -> torch.optim.Optimizer:
        """SGD with momentum over the model it belongs to, in the middle of training: one
        step already taken, so that its state (momentum buffers) exists as it would."""
        model = self._paired_model(path)
        if id(model) not in self._optimizers:
            params = [p for p in model.parameters() if p.requires_grad]
            opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
            if params:
                generator = torch.Generator(device="cpu").manual_seed(7)
                for p in params:
                    p.grad = torch.randn(p.shape, generator=generator).to(p.device, p.dtype)
                opt.step()
                opt.zero_grad(set_to_none=True)
            self._optimizers[id(model)] = opt
        return self._optimizers[id(model)]

    def _make(self, c: Cand, path: str) -> Any:
        maker = MAKERS.get(c.kind)
        if maker is None:
            raise Unbuildable(f"no maker for {c.kind}")
        return maker(self, c.arg, path)

    def memo_has_model(self) -> bool:
        return any(isinstance(v, torch.nn.Module) and v is self._model for v in self.memo.values())

    def _element(self, path: str, arity: int | None) -> Any:
        assert self.plan is not None
        star = f"{path}[*]"
        if star in self.plan.slots:
            return self.make(star)
        n = int(arity) if arity else 2
        return tuple(self.make(f"{star}[{i}]") for i in range(n))

    def file_model(self, name: str, sizes: str) -> torch.nn.Module:
        assert self.plan is not None
        cls = self.plan.providers.namespace[name]
        info = self.plan.providers.classes.get(name, {})
        kwargs = self.constructor_args(cls, info.get("init", {}), override_sizes=sizes == "world")
        obj = cls(**kwargs)
        return obj.to(self.device)

    def constructor_args(self, cls: type, facts: dict[str, dict[str, Any]], override_sizes: bool) -> dict[str, Any]:
        """Arguments for a file class: the first candidate of each parameter; integer
        size defaults (`dim=16`) become the world's size so that the data fits."""
        sig = inspect.signature(cls.__init__)
        out: dict[str, Any] = {}
        for p in list(sig.parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            f = facts.get(p.name, {})
            if p.default is not inspect.Parameter.empty:
                if override_sizes and isinstance(p.default, int) and not isinstance(p.default, bool) and is_size(p.name, f):
                    out[p.name] = FEATURES
                continue
            cands = candidates(p.name, f, p.annotation, self.plan.providers) if self.plan else []
            if not cands:
                raise Unbuildable(f"no value for `{cls.__name__}({p.name})`")
            c = cands[0]
            if c.kind in ("loader", "tuple", "dict_keys", "file_model", "fits"):
                raise Unbuildable(f"no simple value for `{cls.__name__}({p.name})`")
            out[p.name] = self._make(c, p.name)
        return out

    def from_factory(self, name: str) -> Any:
        assert self.plan is not None
        fn = self.plan.providers.namespace[name]
        facts = self.plan.providers.factories.get(name, {}).get("params", {})
        sig = inspect.signature(fn)
        kwargs = {}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not inspect.Parameter.empty:
                continue
            cands = candidates(p.name, facts.get(p.name, {}), p.annotation, self.plan.providers)
            if p.name in ("n", "batch_size", "num", "count"):
                cands = [Cand("int", BATCH)]
            if not cands or cands[0].kind in ("loader", "tuple", "dict_keys", "factory", "fits"):
                raise Unbuildable(f"no value for `{name}({p.name})`")
            kwargs[p.name] = self._make(cands[0], p.name)
        value = fn(**kwargs)
        return _to_device(value, self.device)

    def fits(self, feeds: tuple[str, ...]) -> Any:
        """An input for the module the value is fed to, from that module's first layer."""
        for feed in feeds:
            module = self._resolve(feed)
            if isinstance(module, torch.nn.Module):
                value = fit_input(module, self)
                if value is not None:
                    return value
        raise Unbuildable(f"no module to fit among {', '.join(feeds)}")

    def _resolve(self, feed: str) -> Any:
        assert self.plan is not None
        head, *rest = feed.split(".")
        if head == "self":
            obj = self.instance
        elif head in self.plan.slots and head in self.plan.params:
            if callers.role(self.cand(head)) not in ("model", "file_model"):
                return None
            obj = self.value(head)
        else:
            return None
        for attr in rest:
            nxt = getattr(obj, attr, None)
            if not isinstance(nxt, torch.nn.Module):
                break
            obj = nxt
        return obj

    # arguments --------------------------------------------------------

    def arguments(self) -> dict[str, Any]:
        assert self.plan is not None
        # Models first: optimizers and fitted inputs refer to them.
        order = sorted(self.plan.params, key=lambda n: 0 if callers.role(self.cand(n)) in ("model", "file_model") else 1)
        for name in order:
            self.value(name)
        return {name: self.memo[name] for name in self.plan.params if self.memo[name] is not DEFAULT}

    def build_instance(self) -> Any:
        assert self.plan is not None and self.plan.owner is not None
        cls = self.plan.owner
        if self.plan.is_init:
            obj = cls.__new__(cls)
        elif cls.__init__ is object.__init__:
            obj = cls()
        else:
            kwargs = {name: self.value("init:" + name) for name in self.plan.init_params}
            kwargs = {name: value for name, value in kwargs.items() if value is not DEFAULT}
            try:
                obj = cls(**kwargs)
            except Exception as exc:
                raise Unbuildable(
                    f"could not construct `{cls.__name__}({', '.join(kwargs)})`: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
                ) from None
            if isinstance(obj, torch.nn.Module):
                obj.to(self.device)
        self.instance = obj
        return obj


def _sparse(world: World) -> torch.Tensor:
    i = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 1]])
    return torch.sparse_coo_tensor(i, torch.randn(5), (FEATURES, FEATURES), device=world.device)


def _dir(world: World) -> str:
    d = os.path.join(world.workdir, "probe_out")
    os.makedirs(d, exist_ok=True)
    return d


# How each kind of candidate becomes a value: (world, the candidate's argument, the slot's path).
MAKERS: dict[str, Callable[[World, Any, str], Any]] = {
    "float_tensor": lambda w, a, path: w.float_tensor(a),
    "long": lambda w, a, path: torch.randint(0, CLASSES, a, device=w.device),
    "ids": lambda w, a, path: torch.randint(0, VOCAB, a, device=w.device),
    "prob": lambda w, a, path: w._grad(torch.rand(*a, device=w.device).clamp(0.05, 0.95)),
    "index": lambda w, a, path: torch.randint(0, FEATURES, (BATCH,), device=w.device),
    "mask": lambda w, a, path: torch.rand(*(a or (BATCH, FEATURES)), device=w.device) > 0.5,
    "sparse": lambda w, a, path: _sparse(w),
    "ndarray": lambda w, a, path: np.random.default_rng(0).standard_normal(a).astype(np.float32),
    "param": lambda w, a, path: w.param(),
    "loss": lambda w, a, path: w.loss(),
    "int": lambda w, a, path: a,
    "float": lambda w, a, path: a,
    "string": lambda w, a, path: a,
    "bool": lambda w, a, path: a,
    "shape": lambda w, a, path: tuple(a),
    "device": lambda w, a, path: w.device,
    "dtype": lambda w, a, path: torch.float32,
    "list": lambda w, a, path: [],
    "dict": lambda w, a, path: {},
    "tensor_list": lambda w, a, path: [w.param() for _ in range(2)],
    "path": lambda w, a, path: os.path.join(w.workdir, "probe.pt"),
    "dir": lambda w, a, path: _dir(w),
    "model": lambda w, a, path: w.model() if not w.memo_has_model() else torch.nn.Linear(FEATURES, CLASSES).to(w.device),
    "file_model": lambda w, a, path: w.file_model(*a),
    "optimizer": lambda w, a, path: w.optimizer_for(path),
    "scheduler": lambda w, a, path: torch.optim.lr_scheduler.StepLR(w.optimizer_for(path), step_size=1),
    "criterion": lambda w, a, path: torch.nn.MSELoss() if a == "mse" else torch.nn.CrossEntropyLoss(),
    "loss_closure": lambda w, a, path: _loss_closure,
    "producer": lambda w, a, path: lambda *args, **kwargs: w.features(grad=False),
    "identity": lambda w, a, path: lambda first=None, *args, **kwargs: first,
    "loader": lambda w, a, path: [w._element(path, a) for _ in range(w.variant.steps)],
    "tuple": lambda w, a, path: tuple(w.make(f"{path}[{i}]") for i in range(int(a))),
    "dict_keys": lambda w, a, path: {key: w.make(f"{path}[{key!r}]") for key in a},
    "factory": lambda w, a, path: w.from_factory(a),
    "fits": lambda w, a, path: w.fits(a),
    "caller": lambda w, a, path: callers.build(w, Cand("caller", a), path),
    "default": lambda w, a, path: DEFAULT,
}


def _to_device(value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def _loss_closure(model: Any, batch: Any, *rest: Any, **kwargs: Any) -> torch.Tensor:
    """A `loss_fn(model, batch)`: the model on the batch's input, against its target."""
    x, y = batch, None
    if isinstance(batch, (tuple, list)) and batch:
        x, y = batch[0], (batch[1] if len(batch) > 1 else None)
    elif isinstance(batch, dict) and batch:
        values = list(batch.values())
        x, y = values[0], (values[1] if len(values) > 1 else None)
    out = model(x)
    if isinstance(out, (tuple, list)):
        out = out[0]
    if isinstance(y, torch.Tensor):
        if not y.is_floating_point():
            return torch.nn.functional.cross_entropy(out, y)
        if y.shape == out.shape:
            return torch.nn.functional.mse_loss(out, y)
    return out.float().pow(2).mean()


def fit_input(module: torch.nn.Module, world: World) -> Any:
    """A batch the module accepts, read from its first layer with a known input."""
    nn = torch.nn
    for m in module.modules():
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)):
            return torch.randint(0, m.num_embeddings, (BATCH, SEQ), device=world.device)
        if isinstance(m, nn.Linear):
            return world.float_tensor((BATCH, m.in_features))
        if isinstance(m, nn.Conv1d):
            return world.float_tensor((BATCH, m.in_channels, 16))
        if isinstance(m, nn.Conv2d):
            return world.float_tensor((BATCH, m.in_channels, SPATIAL * 2, SPATIAL * 2))
        if isinstance(m, nn.Conv3d):
            return world.float_tensor((BATCH, m.in_channels, SPATIAL, SPATIAL, SPATIAL))
        if isinstance(m, (nn.LSTM, nn.GRU, nn.RNN)):
            shape = (BATCH, SEQ, m.input_size) if m.batch_first else (SEQ, BATCH, m.input_size)
            return world.float_tensor(shape)
        if isinstance(m, nn.MultiheadAttention):
            return world.float_tensor((BATCH, SEQ, m.embed_dim) if m.batch_first else (SEQ, BATCH, m.embed_dim))
        if isinstance(m, nn.LayerNorm):
            return world.float_tensor((BATCH, *m.normalized_shape))
        if isinstance(m, nn.BatchNorm1d):
            return world.float_tensor((BATCH, m.num_features))
        if isinstance(m, nn.BatchNorm2d):
            return world.float_tensor((BATCH, m.num_features, SPATIAL, SPATIAL))
    return None


def refresh(args: dict[str, Any], world: World) -> dict[str, Any]:
    """New per-step arguments for a repeated call; state (models, lists, dicts) is kept."""
    out = dict(args)
    for name, value in args.items():
        if not isinstance(value, torch.Tensor):
            continue
        if value.grad_fn is not None and value.dim() == 0:
            out[name] = world.loss()
        elif value.is_floating_point() and value.dim() >= 1 and not value.is_sparse:
            out[name] = world.float_tensor(tuple(value.shape), grad=value.requires_grad)
        else:
            out[name] = value.clone()
    return out

