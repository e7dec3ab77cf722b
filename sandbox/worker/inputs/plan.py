"""The slots of one subject (its parameters, its constructor's, and the parts of them the
code reaches) with their candidates: the space the input search walks."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch

from review_copies.sandbox.worker.inputs.callers import caller_cands, role
from review_copies.sandbox.worker.inputs.candidates import Cand, Providers, Slot, candidates, facts_names
from review_copies.sandbox.worker.inputs.names import kind_of
from review_copies.sandbox.worker.inputs.variant import Unbuildable


class Plan:
    """The slots (parameters and the parts of them the code reaches) with their
    candidates, for one subject. Built once per probe; a World builds values from it."""

    def __init__(self, fn: Callable[..., Any], owner: type | None, namespace: dict[str, Any], hints: dict[str, Any]) -> None:
        self.providers = Providers(namespace, hints)
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
            if slot is not None and head in self.params and slot.cands and role(slot.cands[0]) in ("model", "file_model"):
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
            from_callers = caller_cands(self.hints, p.name, init=bool(prefix))
            if p.default is not inspect.Parameter.empty and kind != "device":
                if not from_callers:
                    continue
                # A caller passes it: its value first, the default after.
                self.slots[prefix + p.name] = Slot(prefix + p.name, [*from_callers, Cand("default")], frozenset({p.name}), facts=facts.get(p.name, {}))
                out.append(p.name)
                continue
            self._slot(prefix + p.name, p.name, facts, p.annotation, facts.get(p.name, {}), prefix, from_callers)
            out.append(p.name)
        return out

    def _slot(self, path: str, name: str, all_facts: dict[str, dict[str, Any]], annotation: Any, facts: dict[str, Any], prefix: str, first: list[Cand] | None = None) -> None:
        if path in self.slots:
            return
        cands = [*(first or []), *candidates(name, facts, annotation, self.providers)]
        names = frozenset(facts_names(facts) | {name})
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

    def callers(self, choice: dict[str, int]) -> tuple[str, ...]:
        """The call sites the chosen inputs came from."""
        sites = []
        for path, slot in self.slots.items():
            if slot.cands:
                c = slot.cands[min(choice.get(path, 0), len(slot.cands) - 1)]
                if c.kind == "caller":
                    sites.append(c.arg[0])
        return tuple(dict.fromkeys(sites))

    def describe(self, choice: dict[str, int]) -> dict[str, str]:
        out = {}
        for path, slot in self.slots.items():
            if not slot.cands:
                continue
            out[path] = slot.cands[min(choice.get(path, 0), len(slot.cands) - 1)].words()
        return out


