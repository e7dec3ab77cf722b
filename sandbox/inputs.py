"""Inputs for a subject, synthesised from its signature: annotations, defaults and names.

Everything lives in one small "world" so that the pieces fit together: 8 samples of 4
features, a Linear(4, 4) model, 4 classes, an SGD optimizer over that model, a loader
of a few (x, y) batches. The world's variant says whether float tensors require grad,
whether they are contiguous, and whether targets are float values or class labels.

Imported only in the probe process.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

BATCH, FEATURES, CLASSES = 8, 4, 4


@dataclass(frozen=True)
class Variant:
    name: str
    requires_grad: bool = False
    contiguous: bool = True
    labels: str = "float"  # float targets (regression) or long class labels
    steps: int = 3  # loader length / number of calls
    device: str = "cpu"


class Unbuildable(Exception):
    """An argument the synthesiser has no value for."""


_NAME_KINDS: tuple[tuple[str, str], ...] = (
    (r"^(self|cls)$", "self"),
    (r"^(model|net|network|module|encoder|decoder|layer|backbone|policy|critic|actor|teacher|student)s?$|_(model|net)$", "model"),
    (r"^(opt|optim|optimizer|optimiser)$|_(opt|optim|optimizer)$", "optimizer"),
    (r"^(sched|scheduler|lr_scheduler)$", "scheduler"),
    (r"loader$|^(batches|dataset|data_iter|iterator|train_data|val_data|data)$", "loader"),
    (r"^(batch|sample|example|minibatch)$", "batch"),
    (r"^(loss_fn|criterion|loss_func|objective|loss_function)$", "criterion"),
    (r"^(loss|losses_t|objective_value|train_loss|val_loss)$", "loss"),
    (r"^(history|losses|log|logs|records|outputs_list|metrics_list|cache|all_losses|results|preds_list|saved|snapshots)$", "list"),
    (r"^(stats|metrics|meters|state|store|registry|logs_dict|summary)$", "dict"),
    (r"^(mask|masks|attention_mask|keep|valid)$|_mask$", "mask"),
    (r"^(index|indices|idx|ids|perm|order)$|_idx$|_ids$", "index"),
    (r"^(y|target|targets|label|labels|gt|truth|classes)$|^y_", "target"),
    (r"^(arr|array|ndarray|np_\w+|\w+_np|buffer_np)$", "ndarray"),
    (r"^(device|dev)$", "device"),
    (r"^dtype$", "dtype"),
    (r"^(params|parameters|weights_list|tensors|xs|inputs_list)$", "tensor_list"),
    (r"^(lr|learning_rate|alpha|beta|scale|factor|temperature|tau|gamma|weight_decay|decay|threshold|clip|max_norm|p|rate|margin|lam|lambda_)$", "float"),
    (r"^(eps|epsilon|tol)$", "eps"),
    (r"^(momentum)$", "momentum"),
    (r"^(dim|axis)$", "dim"),
    (r"^(epochs|num_epochs|steps|num_steps|iters|iterations|n_iter|n_steps|repeats|times)$", "count"),
    (r"^(n|k|num|size|batch_size|hidden|hidden_size|in_features|out_features|channels|width|features|num_\w+|n_\w+|\w+_size|\w+_dim|depth)$", "int"),
    (r"^(training|train|is_training)$", "true"),
    (r"^(inplace|verbose|debug|flag|normalize|detach|copy)$", "false"),
    (r"^(reduction)$", "reduction"),
    (r"^(path|file|filename|fname|dir|directory|out_dir|checkpoint|ckpt)$", "path"),
    (r"^(name|key|mode|prefix|tag)$", "string"),
    (r"^(w|weight|weights|param|theta|bias|b)$", "param"),
)

_ANNOTATION_KINDS: tuple[tuple[str, str], ...] = (
    (r"Optimizer", "optimizer"),
    (r"DataLoader|Iterable\[|Iterator\[", "loader"),
    (r"(^|\.)Module\b|Sequential|Linear", "model"),
    (r"ndarray", "ndarray"),
    (r"list\[.*Tensor|List\[.*Tensor|Sequence\[.*Tensor", "tensor_list"),
    (r"Tensor", "tensor"),
    (r"^(int)$", "int"),
    (r"^(float)$", "float"),
    (r"^(bool)$", "false"),
    (r"^(str)$", "string"),
    (r"device", "device"),
    (r"dtype", "dtype"),
    (r"^(list|List)", "list"),
    (r"^(dict|Dict)", "dict"),
)


# Compiled at import, in the warm worker, not again in every probe.
_NAME_PATTERNS = tuple((re.compile(p), k) for p, k in _NAME_KINDS)
_ANNOTATION_PATTERNS = tuple((re.compile(p), k) for p, k in _ANNOTATION_KINDS)
_OPTIONAL = re.compile(r"\s*\|\s*None|Optional\[(.*)\]")


def kind_of(name: str, annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) or repr(annotation)
    if annotation is not inspect.Parameter.empty and text:
        text = _OPTIONAL.sub(r"\1", str(text))
        for pattern, kind in _ANNOTATION_PATTERNS:
            if pattern.search(text):
                if kind == "tensor":
                    break  # the name says more about which tensor
                return kind
    for pattern, kind in _NAME_PATTERNS:
        if pattern.search(name):
            return kind
    return "tensor"


@dataclass
class World:
    """One consistent set of inputs, built lazily and shared between arguments."""

    variant: Variant
    workdir: str = "."
    _model: torch.nn.Module | None = None
    _optimizer: torch.optim.Optimizer | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def device(self) -> str:
        return self.variant.device

    def features(self, rows: int = BATCH, cols: int = FEATURES, grad: bool | None = None) -> torch.Tensor:
        rg = self.variant.requires_grad if grad is None else grad
        if self.variant.contiguous:
            t = torch.randn(rows, cols, device=self.device)
        else:
            t = torch.randn(cols, rows, device=self.device).t()
        return t.requires_grad_(rg)

    def target(self) -> torch.Tensor:
        if self.variant.labels == "long":
            return torch.randint(0, CLASSES, (BATCH,), device=self.device)
        return torch.randn(BATCH, CLASSES, device=self.device)

    def model(self) -> torch.nn.Module:
        if self._model is None:
            self._model = torch.nn.Linear(FEATURES, CLASSES).to(self.device)
        return self._model

    def optimizer(self) -> torch.optim.Optimizer:
        if self._optimizer is None:
            self._optimizer = torch.optim.SGD(self.model().parameters(), lr=0.1)
        return self._optimizer

    def loader(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [(self.features(grad=False), self.target()) for _ in range(self.variant.steps)]

    def loss(self) -> torch.Tensor:
        w = torch.randn(FEATURES, device=self.device, requires_grad=True)
        return (self.features(grad=False) * w).pow(2).mean()

    def param(self) -> torch.Tensor:
        p = torch.randn(FEATURES, CLASSES, device=self.device).requires_grad_(self.variant.requires_grad)
        if p.requires_grad:
            p.grad = torch.randn_like(p)
        return p

    def value(self, kind: str) -> Any:
        makers: dict[str, Callable[[], Any]] = {
            "model": self.model,
            "optimizer": self.optimizer,
            "scheduler": lambda: torch.optim.lr_scheduler.StepLR(self.optimizer(), step_size=1),
            "loader": self.loader,
            "batch": lambda: (self.features(), self.target()),
            "criterion": lambda: torch.nn.CrossEntropyLoss() if self.variant.labels == "long" else torch.nn.MSELoss(),
            "loss": self.loss,
            "list": list,
            "dict": dict,
            "mask": lambda: torch.rand(BATCH, FEATURES, device=self.device) > 0.5,
            "index": lambda: torch.randint(0, FEATURES, (BATCH,), device=self.device),
            "target": self.target,
            "ndarray": lambda: np.random.default_rng(0).standard_normal((BATCH, FEATURES)).astype(np.float32),
            "device": lambda: self.device,
            "dtype": lambda: torch.float32,
            "tensor_list": lambda: [self.param() for _ in range(2)],
            "float": lambda: 0.1,
            "eps": lambda: 1e-8,
            "momentum": lambda: 0.9,
            "dim": lambda: 1,
            "count": lambda: 2,
            "int": lambda: FEATURES,
            "true": lambda: True,
            "false": lambda: False,
            "reduction": lambda: "mean",
            "path": lambda: f"{self.workdir}/probe.pt",
            "string": lambda: "x",
            "param": self.param,
            "tensor": self.features,
        }
        return makers[kind]()


def _skippable(p: inspect.Parameter) -> bool:
    return p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)


def arguments(fn: Callable[..., Any], world: World, skip_first: bool = False) -> dict[str, Any]:
    """Keyword arguments for fn: synthesised for every parameter without a default."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise Unbuildable(f"no signature for {getattr(fn, '__name__', fn)!r}: {exc}") from None
    out: dict[str, Any] = {}
    params = list(sig.parameters.values())
    if skip_first and params:
        params = params[1:]
    for p in params:
        if _skippable(p):
            continue
        kind = kind_of(p.name, p.annotation)
        if p.default is not inspect.Parameter.empty and kind != "device":
            continue
        if kind == "self":
            continue
        out[p.name] = world.value(kind)
    return out


def instance(cls: type, world: World) -> Any:
    """An instance of the class a method belongs to, built with synthesised arguments."""
    init = cls.__init__
    if init is object.__init__:
        return cls()
    kwargs = arguments(init, world, skip_first=True)
    try:
        obj = cls(**kwargs)
    except Exception as exc:
        raise Unbuildable(f"could not construct `{cls.__name__}({', '.join(kwargs)})`: {type(exc).__name__}: {exc}") from None
    if isinstance(obj, torch.nn.Module):
        obj.to(world.device)
    return obj


def refresh(args: dict[str, Any], world: World) -> dict[str, Any]:
    """New per-step arguments for a repeated call; state (models, lists, dicts) is kept."""
    out = dict(args)
    for name, value in args.items():
        if not isinstance(value, torch.Tensor):
            continue
        if value.grad_fn is not None:
            out[name] = world.loss()
        elif value.dim() == 2 and value.dtype.is_floating_point:
            out[name] = world.features(*value.shape)
        else:
            out[name] = value.clone()
    return out
