"""Candidate values for one slot (a parameter, or a part of it the code reaches), in the
order to try them: from the facts of what the code does with it, then its kind by
annotation or name, then a tail of plain guesses."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from review_copies.sandbox.worker.inputs.names import SIZE_NAME, annotation_text, kind_of, name_kind
from review_copies.sandbox.worker.inputs.variant import BATCH, CLASSES, FEATURES, HEADS, MAX_CANDIDATES, SEQ, SPATIAL


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
        if self.kind == "caller":
            return f"{a[1]} (as {a[0]} passes it)"
        if self.kind == "default":
            return "its default"
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


class Providers:
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


def facts_names(facts: dict[str, Any]) -> set[str]:
    return set(facts.get("names", []))


def _module_cands(facts: dict[str, Any], providers: Providers, only: str | None = None) -> list[Cand]:
    needed = set(facts.get("attrs", [])) | {m for m in facts.get("methods", []) if m not in _STANDARD_MODULE_METHODS}
    arity = facts.get("arity")
    names = [only] if only else list(providers.classes)

    def rank(name: str) -> tuple[int, int, int]:
        info = providers.classes.get(name, {})
        cls = providers.namespace.get(name)
        has = all(a in info.get("attrs", []) or hasattr(cls, a) for a in needed)
        fa = info.get("forward_arity")
        fits_arity = arity is None or fa is None or fa >= arity
        return (0 if has else 1, 0 if fits_arity else 1, 1 if info.get("inner") else 0)

    ranked = sorted((n for n in names if n in providers.classes), key=rank)
    out: list[Cand] = []
    for name in ranked[:2]:
        out.append(Cand("file_model", (name, "world")))
        if _has_size_defaults(providers.namespace[name], providers.classes[name]):
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
        isinstance(p.default, int) and not isinstance(p.default, bool) and is_size(p.name, init.get(p.name, {}))
        for p in list(sig.parameters.values())[1:]
    )


def is_size(name: str, facts: dict[str, Any]) -> bool:
    return "size" in facts.get("roles", []) or bool(SIZE_NAME.match(name))


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


def _fact_cands(name: str, facts: dict[str, Any], providers: Providers) -> list[Cand]:
    roles = set(facts.get("roles", []))
    names = facts_names(facts) | {name}
    out: list[Cand] = []
    if "module" in roles or (facts.get("attrs") and name_kind(name) == "model"):
        out += _module_cands(facts, providers)
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
        out += pair[::-1] if SIZE_NAME.match(name) or name_kind(name) in ("int", "count") else pair
    if "axis" in roles:
        out += [Cand("int", 1), Cand("int", -1)]
    for role, value in _NUMBER_ROLES.items():
        if role in roles and "tensor" not in roles:
            if role == "count" and SIZE_NAME.match(name):
                value = FEATURES  # `range(n_classes)`: a size, not a number of steps
            if role == "index" and {"tensor", "long"} & roles:
                continue
            out.append(Cand("float" if isinstance(value, float) else "int", value))
            if role == "index":
                out += [Cand("int", 0), Cand("index")]
    if "feeds" in facts:
        out.append(Cand("fits", tuple(facts["feeds"])))
    out += _tensor_cands(facts, names)
    if "tensor" in roles and not any(c.kind in _TENSOR_KINDS for c in out + _kind_cands(name_kind(name), facts, providers)):
        out.append(Cand("float_tensor", (BATCH, FEATURES)))  # tensor methods: a tensor, whatever the name says
    if "string" in roles and not out:
        out.append(Cand("string", "x"))
    return out


def _kind_cands(kind: str, facts: dict[str, Any], providers: Providers) -> list[Cand]:
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
        return _module_cands(facts, providers)
    if kind.startswith("class:"):
        return _module_cands(facts, providers, only=kind[len("class:"):])
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


def candidates(name: str, facts: dict[str, Any], annotation: Any, providers: Providers) -> list[Cand]:
    """Annotation first, then what the code does with the value, then its name, then
    fallbacks of the same family."""
    # The file's own factory for this value (`make_batch` for `batch`) is the most faithful.
    out: list[Cand] = _factory_cands(name, providers)
    text = annotation_text(annotation)
    if text:
        bare = text.split(".")[-1].strip("'\"")
        if bare in providers.classes:
            out += _kind_cands(f"class:{bare}", facts, providers)
        else:
            kind = kind_of("", annotation)
            if kind != "tensor":
                out += _kind_cands(kind, facts, providers)
    out += _fact_cands(name, facts, providers)
    out += _kind_cands(name_kind(name), facts, providers)
    if any(c.kind == "loader" and c.arg is not None for c in out):
        out = [c for c in out if not (c.kind == "loader" and c.arg is None)]  # the loop says how elements unpack
    out = _dedupe(out)
    out = _dedupe(out + _tail(out))
    return out[:MAX_CANDIDATES]


def _factory_cands(name: str, providers: Providers) -> list[Cand]:
    return [Cand("factory", f) for f, info in providers.factories.items() if info.get("noun") and (info["noun"] == name or name.endswith("_" + info["noun"]))]


