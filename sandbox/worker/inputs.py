"""Inputs for a subject: for every parameter an ordered list of candidate values, from its
annotation, its default, its name and what the code does with it (`sandbox.uses`), and
a world that builds one consistent set of them for a choice of candidates.

Everything lives in one small "world" so that the pieces fit together: 8 samples of 4
features, 4 classes, sizes (`dim`, `hidden`, `fan_in`...) of 4, sequences of 5 token
ids, images of 4 channels and 6x6 pixels, models from the file (or a Linear(4, 4)), an
SGD optimizer over the model it belongs to, loaders of a few batches shaped as the loop
unpacks them. The world's variant says whether float tensors require grad (and whether
they are leaves), and whether they are contiguous. `sandbox.child` searches the choices
(`Plan.coordinates`) for one the original runs with.

Imported only in the probe process.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

BATCH, FEATURES, CLASSES = 8, 4, 4
SEQ, SPATIAL, HEADS, VOCAB = 5, 6, 2, 4
MAX_CANDIDATES = 6


@dataclass(frozen=True)
class Variant:
    name: str
    requires_grad: bool = False
    contiguous: bool = True
    steps: int = 3  # loader length / number of calls
    device: str = "cpu"
    leaf: bool = True  # grad tensors are leaves, or results of an op (activations)


class Unbuildable(Exception):
    """An argument the synthesiser has no value for."""


# ------------------------------------------------------------------ names


_NAME_KINDS: tuple[tuple[str, str], ...] = (
    (r"^(self|cls)$", "self"),
    (r"^(model|net|network|module|encoder|decoder|layer|backbone|policy|critic|actor|teacher|student|generator_net|discriminator|G|D)s?$|_(model|net)$|^(model|net)_", "model"),
    (r"^(opt|optim|optimizer|optimiser)$|_(opt|optim|optimizer)$|^(opt|optim|optimizer)_", "optimizer"),
    (r"^(sched|scheduler|lr_scheduler)$", "scheduler"),
    (r"loader$|_batches$|^(batches|dataset|data_iter|iterator|train_data|val_data|data|dl|episodes|observations|trajectories|samples)$|_dl$|_iter$", "loader"),
    (r"^(batch|sample|example|minibatch)$|_batch$", "batch"),
    (r"^(loss_fn|criterion|loss_func|objective|loss_function|compute_loss)$", "criterion"),
    (r"^(loss|losses_t|objective_value|train_loss)$", "loss"),
    (r"^(history|losses|log|logs|records|outputs_list|metrics_list|cache|all_losses|results|preds_list|saved|snapshots)$", "list"),
    (r"^(stats|metrics|meters|state|store|registry|logs_dict|summary|config|cfg)$", "dict"),
    (r"^(mask|masks|attention_mask|keep|valid)$|_mask$", "mask"),
    (r"^(ids|input_ids|token_ids|tokens|src|tgt|text_ids|seq_ids)$", "tokens"),
    (r"^(index|indices|idx|perm|order)$|_idx$|_ids$", "index"),
    (r"^(i|j|pos|position|step_idx|slot|epoch|step|global_step|iteration|it|batch_idx|rank|seed)$|_id$", "position"),
    (r"^(y|target|targets|label|labels|gt|truth)$|^y_", "target"),
    (r"^(arr|array|ndarray|np_\w+|\w+_np|buffer_np)$", "ndarray"),
    (r"^(device|dev)$", "device"),
    (r"^dtype$", "dtype"),
    (r"^(params|parameters|weights_list|tensors|xs|inputs_list)$", "tensor_list"),
    (r"^(lr|learning_rate|alpha|beta|scale|factor|temperature|tau|gamma|weight_decay|decay|threshold|thr|thresh|clip|max_norm|p|rate|margin)$", "float"),
    (r"^(lam|lambda_|gain|ratio|dropout|sigma|noise|smoothing|coef|eps_\w+|\w+_weight|\w+_coef)$", "float"),
    (r"^(metric|score|reward|acc|accuracy|value|val_metric|val_score|current)$", "number"),
    (r"^(eps|epsilon|tol)$", "eps"),
    (r"^(momentum)$", "momentum"),
    (r"^(dim|axis)$", "dim"),
    (r"^(heads|num_heads|n_heads|nhead)$", "heads"),
    (r"^(epochs|num_epochs|steps|num_steps|iters|iterations|n_iter|n_steps|repeats|times|n_frames|num_frames|depth|layers|n_layers|num_layers)$", "count"),
    (r"^(shape|size_tuple|\w+_shape|shape_\w+)$", "shape"),
    (r"^(n|k|num|size|batch_size|hidden|hidden_size|in_features|out_features|channels|width|features|out|vocab|fan_in|fan_out|num_\w+|n_\w+|\w+_size|\w+_dim|dim_\w+|d_model)$", "int"),
    (r"^(training|train|is_training)$", "true"),
    (r"^(inplace|verbose|debug|flag|normalize|detach|copy)$", "false"),
    (r"^(reduction)$", "reduction"),
    (r"^(dir|directory|out_dir|folder|root|output_dir|save_dir|log_dir|ckpt_dir|checkpoint_dir|\w+_dir)$", "dir"),
    (r"^(path|file|filename|fname|checkpoint|ckpt|out_path|save_path|\w+_path|\w+_file)$", "path"),
    (r"^(name|key|mode|prefix|tag|split|phase)$", "string"),
    (r"^(reader|fn|func|f|callback|hook|transform|closure|producer|sampler|get_batch|next_batch|source)$", "callable"),
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
    (r"Path|PathLike", "path"),
    (r"device", "device"),
    (r"dtype", "dtype"),
    (r"^(list|List)", "list"),
    (r"^(dict|Dict)", "dict"),
    (r"Callable", "callable"),
)

# Compiled at import, in the warm worker, not again in every probe.
_NAME_PATTERNS = tuple((re.compile(p), k) for p, k in _NAME_KINDS)
_ANNOTATION_PATTERNS = tuple((re.compile(p), k) for p, k in _ANNOTATION_KINDS)
_OPTIONAL = re.compile(r"\s*\|\s*None|Optional\[(.*)\]")
_SIZE_NAME = re.compile(
    r"^(dim|d|hidden|hidden_size|hidden_dim|size|in_features|out_features|features|channels|width|vocab|vocab_size|classes|n_classes|num_classes"
    r"|fan_in|fan_out|out|embed_dim|d_model|\w+_dim|dim_\w+|\w+_size|num_features|in_channels|out_channels|n_embd|n_experts|num_experts|num_labels|n_labels)$"
)


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) or repr(annotation)
    return _OPTIONAL.sub(r"\1", str(text))


def kind_of(name: str, annotation: Any) -> str:
    text = _annotation_text(annotation)
    if text:
        for pattern, kind in _ANNOTATION_PATTERNS:
            if pattern.search(text):
                if kind == "tensor":
                    break  # the name says more about which tensor
                return kind
    return name_kind(name)


def name_kind(name: str) -> str:
    for pattern, kind in _NAME_PATTERNS:
        if pattern.search(name):
            return kind
    return "tensor"


# ------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Cand:
    kind: str
    arg: Any = None

    def words(self) -> str:
        a = self.arg
        if self.kind in ("float_tensor", "long", "prob", "ids", "ndarray", "mask") and isinstance(a, tuple):
            what = {"float_tensor": "float", "long": "class-id", "prob": "probability", "ids": "token-id", "ndarray": "ndarray", "mask": "bool"}[self.kind]
            return f"{what} {tuple(a)}"
        if self.kind in ("int", "float", "string", "bool"):
            return repr(a)
        if self.kind == "file_model":
            return f"{a[0]}({'defaults' if a[1] == 'defaults' else 'sizes 4'})"
        if self.kind in ("loader", "tuple"):
            return f"{self.kind} of {a}" if a is not None else self.kind
        if self.kind == "dict_keys":
            return "dict " + ",".join(a)
        return self.kind if a is None else f"{self.kind} {a}"


@dataclass
class Slot:
    path: str
    cands: list[Cand]
    names: frozenset[str]
    search: bool = True
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def certainty(self) -> int:
        """How much the code says about this value: the search changes the least certain first."""
        f = self.facts
        roles = set(f.get("roles", [])) - {"tensor", "written", "numeric", "sized", "string"}
        return len(roles) + sum(1 for k in ("rank", "keys", "iter", "items", "feeds") if k in f)


def _shapes_of_rank(rank: int, names: set[str]) -> list[tuple[int, ...]]:
    last = bool(names & {"hwc", "img_hwc", "nhwc"}) or any(n.endswith("hwc") for n in names)
    if rank <= 0:
        return [()]
    if rank == 1:
        return [(FEATURES,), (BATCH,)]
    if rank == 2:
        return [(BATCH, FEATURES)]
    if rank == 3:
        shapes = [(FEATURES, SPATIAL, SPATIAL), (SPATIAL, SPATIAL, FEATURES), (BATCH, SEQ, FEATURES)]
        return [shapes[1], shapes[0], shapes[2]] if last else shapes
    if rank == 4:
        shapes = [(BATCH, FEATURES, SPATIAL, SPATIAL), (BATCH, SPATIAL, SPATIAL, FEATURES)]
        return shapes[::-1] if last else shapes
    return [(BATCH,) + (2,) * (rank - 4) + (FEATURES, SPATIAL, SPATIAL)]


_NUMBER_ROLES = {"size": 4, "count": 2, "heads": HEADS, "index": 1, "number": 0.5}
_TENSOR_KINDS = frozenset(("float_tensor", "long", "ids", "prob", "index", "mask", "sparse", "param", "fits", "ndarray"))


class Context:
    """What the candidates may come from: the file's module classes and factories."""

    def __init__(self, namespace: dict[str, Any], hints: dict[str, Any]) -> None:
        self.namespace = namespace
        self.hints = hints
        self.classes: dict[str, dict[str, Any]] = {
            name: info for name, info in (hints.get("classes") or {}).items()
            if isinstance(namespace.get(name), type) and issubclass(namespace[name], torch.nn.Module)
        }
        self.factories: dict[str, dict[str, Any]] = {
            name: info for name, info in (hints.get("factories") or {}).items() if callable(namespace.get(name))
        }


def _facts_names(facts: dict[str, Any]) -> set[str]:
    return set(facts.get("names", []))


def _module_cands(facts: dict[str, Any], ctx: Context, only: str | None = None) -> list[Cand]:
    needed = set(facts.get("attrs", [])) | {m for m in facts.get("methods", []) if m not in _STANDARD_MODULE_METHODS}
    arity = facts.get("arity")
    names = [only] if only else list(ctx.classes)

    def rank(name: str) -> tuple[int, int, int]:
        info = ctx.classes.get(name, {})
        cls = ctx.namespace.get(name)
        has = all(a in info.get("attrs", []) or hasattr(cls, a) for a in needed)
        fa = info.get("forward_arity")
        fits_arity = arity is None or fa is None or fa >= arity
        return (0 if has else 1, 0 if fits_arity else 1, 1 if info.get("inner") else 0)

    ranked = sorted((n for n in names if n in ctx.classes), key=rank)
    out: list[Cand] = []
    for name in ranked[:2]:
        out.append(Cand("file_model", (name, "world")))
        if _has_size_defaults(ctx.namespace[name], ctx.classes[name]):
            out.append(Cand("file_model", (name, "defaults")))
    linear = Cand("model")
    if not ranked:
        return [linear]
    class_fits = rank(ranked[0])[:2] == (0, 0)
    linear_fits = not needed and (arity or 1) <= 1
    # The file's class first when it has what the code uses, or when a Linear would not.
    return [*out, linear] if class_fits or not linear_fits else [linear, *out]


_STANDARD_MODULE_METHODS = frozenset(
    "parameters named_parameters named_modules modules children named_children eval train state_dict load_state_dict "
    "zero_grad to cuda cpu float double half apply buffers named_buffers requires_grad_ get_parameter get_submodule "
    "register_buffer register_forward_hook register_forward_pre_hook register_full_backward_hook forward".split()
)


def _has_size_defaults(cls: type, info: dict[str, Any]) -> bool:
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return False
    init = info.get("init", {})
    return any(
        isinstance(p.default, int) and not isinstance(p.default, bool) and _is_size(p.name, init.get(p.name, {}))
        for p in list(sig.parameters.values())[1:]
    )


def _is_size(name: str, facts: dict[str, Any]) -> bool:
    return "size" in facts.get("roles", []) or bool(_SIZE_NAME.match(name))


def _preferred_shapes(facts: dict[str, Any], names: set[str] | frozenset[str] = frozenset()) -> list[tuple[int, ...]]:
    """Shapes of the rank the code implies (exact, or at least 3), else (8, 4)."""
    if "rank" in facts:
        return _shapes_of_rank(int(facts["rank"]), set(names))
    if facts.get("min_rank", 0) > 2:
        return [s for r in range(int(facts["min_rank"]), 5) for s in _shapes_of_rank(r, set(names))]
    return [(BATCH, FEATURES)]


def _tensor_cands(facts: dict[str, Any], names: set[str]) -> list[Cand]:
    roles = set(facts.get("roles", []))
    out: list[Cand] = []
    if "rank" in facts or facts.get("min_rank", 0) > 2:
        out += [Cand("float_tensor", s) for s in _preferred_shapes(facts, names)]
    if "long" in roles:
        out = [Cand("long", (BATCH,)), Cand("long", (BATCH, SEQ)), *out]
    if "prob" in roles:
        out = [Cand("prob", (BATCH,)), Cand("prob", (BATCH, FEATURES)), *out]
    if "float_target" in roles:
        out = [Cand("float_tensor", (BATCH, FEATURES)), Cand("float_tensor", (BATCH,)), *out]
    if "sparse" in roles:
        out = [Cand("sparse"), *out]
    if "ndarray" in roles:
        out = [*(Cand("ndarray", s) for s in _preferred_shapes(facts, names)), *out]
    if "grad" in roles and "rank" not in facts:
        out.append(Cand("param"))
    return out


def _fact_cands(name: str, facts: dict[str, Any], ctx: Context) -> list[Cand]:
    roles = set(facts.get("roles", []))
    names = _facts_names(facts) | {name}
    out: list[Cand] = []
    if "module" in roles or (facts.get("attrs") and name_kind(name) == "model"):
        out += _module_cands(facts, ctx)
    if "optimizer" in roles or ("stepper" in roles and "stateful" in roles):
        out.append(Cand("optimizer"))
    if "called" in roles and name_kind(name) not in ("model",) and "module" not in roles:
        first = facts.get("first_arg")
        if first is not None:
            out.append(Cand("loss_closure"))
        if name_kind(name) == "criterion":
            out += [Cand("criterion", "mse"), Cand("criterion", "ce")]
        out += [Cand("producer"), Cand("identity")] if facts.get("arity") else [Cand("producer")]
    if "iter" in facts:
        out.append(Cand("loader", facts["iter"]))
    if "keys" in facts:
        out.append(Cand("dict_keys", tuple(facts["keys"])))
    elif "dict" in roles:
        out.append(Cand("dict"))
    if ("tuple" in roles or "indexed" in roles) and facts.get("items") and "tensor" not in roles and "iter" not in facts:
        out.append(Cand("tuple", int(facts["items"])))
    if "dir" in roles:
        out.append(Cand("dir"))
    if "path" in roles:
        out.append(Cand("path"))
    if "shape" in roles:
        pair = [Cand("shape", (BATCH, FEATURES)), Cand("int", FEATURES)]
        out += pair[::-1] if _SIZE_NAME.match(name) or name_kind(name) in ("int", "count") else pair
    if "axis" in roles:
        out += [Cand("int", 1), Cand("int", -1)]
    for role, value in _NUMBER_ROLES.items():
        if role in roles and "tensor" not in roles:
            if role == "count" and _SIZE_NAME.match(name):
                value = FEATURES  # `range(n_classes)`: a size, not a number of steps
            if role == "index" and {"tensor", "long"} & roles:
                continue
            out.append(Cand("float" if isinstance(value, float) else "int", value))
            if role == "index":
                out += [Cand("int", 0), Cand("index")]
    if "feeds" in facts:
        out.append(Cand("fits", tuple(facts["feeds"])))
    out += _tensor_cands(facts, names)
    if "tensor" in roles and not any(c.kind in _TENSOR_KINDS for c in out + _kind_cands(name_kind(name), facts, ctx)):
        out.append(Cand("float_tensor", (BATCH, FEATURES)))  # tensor methods: a tensor, whatever the name says
    if "string" in roles and not out:
        out.append(Cand("string", "x"))
    return out


def _kind_cands(kind: str, facts: dict[str, Any], ctx: Context) -> list[Cand]:
    simple: dict[str, list[Cand]] = {
        "optimizer": [Cand("optimizer")],
        "scheduler": [Cand("scheduler")],
        "loader": [Cand("loader", None)],
        "batch": [Cand("tuple", 2)],
        "criterion": [Cand("criterion", "mse"), Cand("criterion", "ce")],
        "loss": [Cand("loss")],
        "list": [Cand("list")],
        "dict": [Cand("dict")],
        "mask": [Cand("mask", (BATCH, FEATURES))],
        "index": [Cand("index"), Cand("int", 1)],
        "tokens": [Cand("ids", (BATCH, SEQ)), Cand("index")],
        "position": [Cand("int", 1), Cand("int", 0)],
        "target": [Cand("float_tensor", (BATCH, CLASSES)), Cand("long", (BATCH,))],
        "ndarray": [Cand("ndarray", s) for s in _preferred_shapes(facts)],
        "device": [Cand("device")],
        "dtype": [Cand("dtype")],
        "tensor_list": [Cand("tensor_list")],
        "float": [Cand("float", 0.1)],
        "number": [Cand("float", 0.5)],
        "eps": [Cand("float", 1e-8)],
        "momentum": [Cand("float", 0.9)],
        "dim": [Cand("int", 1), Cand("int", -1)],
        "heads": [Cand("int", HEADS)],
        "count": [Cand("int", 2)],
        "shape": [Cand("shape", (BATCH, FEATURES))],
        "int": [Cand("int", FEATURES)],
        "true": [Cand("bool", True)],
        "false": [Cand("bool", False)],
        "reduction": [Cand("string", "mean")],
        "dir": [Cand("dir")],
        "path": [Cand("path")],
        "string": [Cand("string", "x")],
        "callable": [Cand("producer"), Cand("identity")],
        "param": [Cand("param")],
        "tensor": [Cand("float_tensor", (BATCH, FEATURES))],
    }
    if kind == "model":
        return _module_cands(facts, ctx)
    if kind.startswith("class:"):
        return _module_cands(facts, ctx, only=kind[len("class:"):])
    return simple.get(kind, [])


def _tail(cands: list[Cand]) -> list[Cand]:
    """Fallbacks of the same family as the first candidate."""
    if not cands:
        return [Cand("float_tensor", (BATCH, FEATURES)), Cand("float", 0.5), Cand("int", FEATURES)]
    first = cands[0].kind
    if first in ("float_tensor", "long", "prob", "fits", "param"):
        return [Cand("float_tensor", (BATCH, FEATURES)), Cand("long", (BATCH,)), Cand("ids", (BATCH, SEQ)),
                Cand("float_tensor", (FEATURES,)), Cand("float_tensor", (BATCH, FEATURES, SPATIAL, SPATIAL))]
    if first in ("int", "float"):
        return [Cand("int", FEATURES), Cand("float", 0.5)]
    if first == "mask":
        return [Cand("mask", (BATCH, BATCH)), Cand("mask", (BATCH,))]
    if first == "ndarray":
        return [Cand("ndarray", (BATCH, FEATURES)), Cand("ndarray", (SPATIAL, SPATIAL, FEATURES)), Cand("ndarray", (FEATURES,))]
    return []


def _dedupe(cands: list[Cand]) -> list[Cand]:
    seen: set[str] = set()
    out = []
    for c in cands:
        key = repr((c.kind, c.arg))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def candidates(name: str, facts: dict[str, Any], annotation: Any, ctx: Context) -> list[Cand]:
    """Annotation first, then what the code does with the value, then its name, then
    fallbacks of the same family."""
    # The file's own factory for this value (`make_batch` for `batch`) is the most faithful.
    out: list[Cand] = _factory_cands(name, ctx)
    text = _annotation_text(annotation)
    if text:
        bare = text.split(".")[-1].strip("'\"")
        if bare in ctx.classes:
            out += _kind_cands(f"class:{bare}", facts, ctx)
        else:
            kind = kind_of("", annotation)
            if kind != "tensor":
                out += _kind_cands(kind, facts, ctx)
    out += _fact_cands(name, facts, ctx)
    out += _kind_cands(name_kind(name), facts, ctx)
    if any(c.kind == "loader" and c.arg is not None for c in out):
        out = [c for c in out if not (c.kind == "loader" and c.arg is None)]  # the loop says how elements unpack
    out = _dedupe(out)
    out = _dedupe(out + _tail(out))
    return out[:MAX_CANDIDATES]


def _factory_cands(name: str, ctx: Context) -> list[Cand]:
    return [Cand("factory", f) for f, info in ctx.factories.items() if info.get("noun") and (info["noun"] == name or name.endswith("_" + info["noun"]))]


# ------------------------------------------------------------------- plan


class Plan:
    """The slots (parameters and the parts of them the code reaches) with their
    candidates, for one subject. Built once per probe; a World builds values from it."""

    def __init__(self, fn: Callable[..., Any], owner: type | None, namespace: dict[str, Any], hints: dict[str, Any]) -> None:
        self.ctx = Context(namespace, hints)
        self.hints = hints
        self.slots: dict[str, Slot] = {}
        self.params: list[str] = []
        self.init_params: list[str] = []
        self.owner = owner
        self.is_init = owner is not None and getattr(fn, "__name__", "") == "__init__"
        facts = hints.get("params") or {}
        self.params = self._signature(fn, facts, prefix="", skip_first=owner is not None)
        if owner is not None and not self.is_init and owner.__init__ is not object.__init__:
            self.init_params = self._signature(owner.__init__, hints.get("init") or {}, prefix="init:", skip_first=True)
        for slot in self.slots.values():
            slot.cands = [c for c in slot.cands if c.kind != "fits" or self._fits_a_module(c.arg)] or slot.cands[:1]

    def _fits_a_module(self, feeds: tuple[str, ...]) -> bool:
        """A value fed to `model(...)` or `self.layer(...)` can be fitted to that module."""
        for feed in feeds:
            head = feed.split(".")[0]
            if head == "self" and self.owner is not None and issubclass(self.owner, torch.nn.Module):
                return True
            slot = self.slots.get(head)
            if slot is not None and head in self.params and slot.cands and slot.cands[0].kind in ("model", "file_model"):
                return True
        return False

    def _signature(self, fn: Callable[..., Any], facts: dict[str, dict[str, Any]], prefix: str, skip_first: bool) -> list[str]:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise Unbuildable(f"no signature for {getattr(fn, '__name__', fn)!r}: {exc}") from None
        params = list(sig.parameters.values())
        if skip_first and params:
            params = params[1:]
        out = []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            kind = kind_of(p.name, p.annotation)
            if kind == "self":
                continue
            if p.default is not inspect.Parameter.empty and kind != "device":
                continue
            self._slot(prefix + p.name, p.name, facts, p.annotation, facts.get(p.name, {}), prefix)
            out.append(p.name)
        return out

    def _slot(self, path: str, name: str, all_facts: dict[str, dict[str, Any]], annotation: Any, facts: dict[str, Any], prefix: str) -> None:
        if path in self.slots:
            return
        cands = candidates(name, facts, annotation, self.ctx)
        names = frozenset(_facts_names(facts) | {name})
        self.slots[path] = Slot(path, cands, names, facts=facts)
        fact_path = path[len(prefix):]
        for c in cands:
            for child, child_name in self._children(c, fact_path, all_facts):
                child_facts = all_facts.get(child, {})
                # The name the code gives it (`for images, labels in loader`), else x / y.
                child_name = (child_facts.get("names") or [child_name])[0]
                self._slot(prefix + child, child_name, all_facts, inspect.Parameter.empty, child_facts, prefix)

    @staticmethod
    def _children(c: Cand, path: str, facts: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str]]:
        if c.kind == "loader":
            if c.arg is None:
                inner = facts.get(f"{path}[*]", {})
                if inner.get("iter") or inner.get("items"):
                    yield f"{path}[*]", "element"
                else:
                    yield f"{path}[*][0]", "x"
                    yield f"{path}[*][1]", "y"
            elif c.arg == 0:
                yield f"{path}[*]", "element"
            else:
                for i in range(int(c.arg)):
                    yield f"{path}[*][{i}]", ("x", "y")[i] if i < 2 else f"item{i}"
        elif c.kind == "tuple":
            for i in range(int(c.arg)):
                yield f"{path}[{i}]", ("x", "y")[i] if i < 2 else f"item{i}"
        elif c.kind == "dict_keys":
            for key in c.arg:
                yield f"{path}[{key!r}]", str(key)

    def coordinates(self) -> list[Slot]:
        return [s for s in self.slots.values() if s.search and len(s.cands) > 1]

    def describe(self, choice: dict[str, int]) -> dict[str, str]:
        out = {}
        for path, slot in self.slots.items():
            if not slot.cands:
                continue
            out[path] = slot.cands[min(choice.get(path, 0), len(slot.cands) - 1)].words()
        return out


# ------------------------------------------------------------------ world


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
            if self.cand(path).kind in ("model", "file_model"):
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
        k, a, dev = c.kind, c.arg, self.device
        if k == "float_tensor":
            return self.float_tensor(a)
        if k == "long":
            return torch.randint(0, CLASSES, a, device=dev)
        if k == "ids":
            return torch.randint(0, VOCAB, a, device=dev)
        if k == "prob":
            return self._grad(torch.rand(*a, device=dev).clamp(0.05, 0.95))
        if k == "index":
            return torch.randint(0, FEATURES, (BATCH,), device=dev)
        if k == "mask":
            return torch.rand(*(a or (BATCH, FEATURES)), device=dev) > 0.5
        if k == "sparse":
            i = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 0, 1]])
            return torch.sparse_coo_tensor(i, torch.randn(5), (FEATURES, FEATURES), device=dev)
        if k == "ndarray":
            return np.random.default_rng(0).standard_normal(a).astype(np.float32)
        if k == "param":
            return self.param()
        if k == "loss":
            return self.loss()
        if k in ("int", "float", "string", "bool"):
            return a
        if k == "shape":
            return tuple(a)
        if k == "device":
            return dev
        if k == "dtype":
            return torch.float32
        if k == "list":
            return []
        if k == "dict":
            return {}
        if k == "tensor_list":
            return [self.param() for _ in range(2)]
        if k == "path":
            return os.path.join(self.workdir, "probe.pt")
        if k == "dir":
            d = os.path.join(self.workdir, "probe_out")
            os.makedirs(d, exist_ok=True)
            return d
        if k == "model":
            return self.model() if not self.memo_has_model() else torch.nn.Linear(FEATURES, CLASSES).to(dev)
        if k == "file_model":
            return self.file_model(*a)
        if k == "optimizer":
            return self.optimizer_for(path)
        if k == "scheduler":
            return torch.optim.lr_scheduler.StepLR(self.optimizer_for(path), step_size=1)
        if k == "criterion":
            return torch.nn.MSELoss() if a == "mse" else torch.nn.CrossEntropyLoss()
        if k == "loss_closure":
            return _loss_closure
        if k == "producer":
            return lambda *args, **kwargs: self.features(grad=False)
        if k == "identity":
            return lambda first=None, *args, **kwargs: first
        if k == "loader":
            return [self._element(path, a) for _ in range(self.variant.steps)]
        if k == "tuple":
            return tuple(self.make(f"{path}[{i}]") for i in range(int(a)))
        if k == "dict_keys":
            return {key: self.make(f"{path}[{key!r}]") for key in a}
        if k == "factory":
            return self.from_factory(a)
        if k == "fits":
            return self.fits(a)
        raise Unbuildable(f"no maker for {k}")

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
        cls = self.plan.ctx.namespace[name]
        info = self.plan.ctx.classes.get(name, {})
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
                if override_sizes and isinstance(p.default, int) and not isinstance(p.default, bool) and _is_size(p.name, f):
                    out[p.name] = FEATURES
                continue
            cands = candidates(p.name, f, p.annotation, self.plan.ctx) if self.plan else []
            if not cands:
                raise Unbuildable(f"no value for `{cls.__name__}({p.name})`")
            c = cands[0]
            if c.kind in ("loader", "tuple", "dict_keys", "file_model", "fits"):
                raise Unbuildable(f"no simple value for `{cls.__name__}({p.name})`")
            out[p.name] = self._make(c, p.name)
        return out

    def from_factory(self, name: str) -> Any:
        assert self.plan is not None
        fn = self.plan.ctx.namespace[name]
        facts = self.plan.ctx.factories.get(name, {}).get("params", {})
        sig = inspect.signature(fn)
        kwargs = {}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not inspect.Parameter.empty:
                continue
            cands = candidates(p.name, facts.get(p.name, {}), p.annotation, self.plan.ctx)
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
            if self.cand(head).kind not in ("model", "file_model"):
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
        order = sorted(self.plan.params, key=lambda n: 0 if self.cand(n).kind in ("model", "file_model") else 1)
        for name in order:
            self.value(name)
        return {name: self.memo[name] for name in self.plan.params}

    def build_instance(self) -> Any:
        assert self.plan is not None and self.plan.owner is not None
        cls = self.plan.owner
        if self.plan.is_init:
            obj = cls.__new__(cls)
        elif cls.__init__ is object.__init__:
            obj = cls()
        else:
            kwargs = {name: self.value("init:" + name) for name in self.plan.init_params}
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
