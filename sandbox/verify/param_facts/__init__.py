"""What a function does with each of its parameters, read from its code: the hints that
input synthesis (`sandbox.inputs`) turns into candidate values.

For every parameter, and for the parts of it the code reaches (`batch["image"]`, the
elements of `for x, y in loader`, `val_batch[0]`), the facts are gathered by *path*:

    loader          iterated, elements unpacked into 2 names
    loader[*][0]    the `x` of `for x, y in loader`: fed to `model(...)`
    loader[*][1]    the `y`: the target of `F.cross_entropy` -> class ids
    batch['image']  a tensor whose `.float()` is taken
    frames          `_, _, h, w = frames.shape` -> a 4-D tensor

Facts are roles (`module`, `optimizer`, `long`, `size`, `index`, `path`, `dir`, ...),
the methods and attributes used on the value, string keys, tuple arity, rank, the local
names bound to it (to tell which input an error line is about) and what it is fed to.
A method's class gives the same for its constructor's parameters, through the `self`
attributes they are stored in; the file's module classes and `make_*` factories are
described so that the probe can build inputs from them.

Runs in the reviewer's process: libcst only, no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import libcst as cst

from review_copies.analysis.guesses import FACTORY_NAME, MODULE_BASE_NAME
from review_copies.analysis.syntax import dotted, names_in
from review_copies.sandbox.verify.param_facts.table import Facts, FactTable
from review_copies.sandbox.verify.param_facts.walker import FactWalker, facts_of_function, param_names

__all__ = ["Facts", "facts_of_function", "providers", "subject_facts"]


# ------------------------------------------------------------------- classes


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]


def _init_of(cls: cst.ClassDef) -> cst.FunctionDef | None:
    return next((m for m in _methods(cls) if m.name.value == "__init__"), None)


def _self_attrs(init: cst.FunctionDef, params: Sequence[str]) -> tuple[dict[str, str], list[str], dict[str, list[str]]]:
    """`self.x = ...` in __init__: which attributes stand for a parameter's value (for
    facts), every attribute set, and the parameters each attribute is built from (for
    blame: an error on `self.fc(x)` may be about `dim`)."""
    stands: dict[str, str] = {}
    attrs: list[str] = []
    built_from: dict[str, list[str]] = {}
    walker = FactWalker({p: p for p in params})

    class Find(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                target = t.target
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                    attr = target.attr.value
                    attrs.append(attr)
                    path = walker.value_path(node.value)
                    if path is not None and "[" not in path:
                        stands[f"self.{attr}"] = path
                    used = sorted(names_in(node.value) & set(params))
                    for p in used:
                        built_from.setdefault(p, []).append(attr)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is init

    init.visit(Find())
    return stands, list(dict.fromkeys(attrs)), built_from


def constructor_facts(cls: cst.ClassDef, functions: dict[str, cst.FunctionDef]) -> tuple[dict[str, Facts], list[str]]:
    """Facts about the constructor's parameters, from __init__ and from every method's use
    of the attributes they are kept in; and the attributes __init__ sets."""
    init = _init_of(cls)
    if init is None:
        return {}, []
    params = param_names(init)[1:]
    stands, attrs, built_from = _self_attrs(init, params)
    facts = FactTable()
    for p, f in facts_of_function(init, functions).items():
        if p.split("[")[0] in params:
            facts.merge(p, f)
            if p in params:
                facts.add(p, "names", p)
    for method in _methods(cls):
        if method is init:
            continue
        inner = FactWalker(dict(stands), functions)
        inner.run(method.body)
        for p, f in inner.facts.to_json().items():
            facts.merge(p, f)
    for p, derived in built_from.items():
        for attr in derived:
            facts.add(p, "names", attr)
    return facts.to_json(), attrs


def _is_module_class(cls: cst.ClassDef, module_classes: set[str]) -> bool:
    for base in cls.bases:
        name = dotted(base.value)
        if name in module_classes or MODULE_BASE_NAME.search(name):
            return True
    return False


def module_classes(module: cst.Module) -> list[cst.ClassDef]:
    """Top-level nn.Module subclasses of the file (a base defined in the file counts)."""
    found: list[cst.ClassDef] = []
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and _is_module_class(stmt, names):
            found.append(stmt)
            names.add(stmt.name.value)
    return found


def factories(module: cst.Module) -> list[cst.FunctionDef]:
    return [s for s in module.body if isinstance(s, cst.FunctionDef) and FACTORY_NAME.match(s.name.value)]


def subject_facts(module: cst.Module, fn: cst.FunctionDef, cls: cst.ClassDef | None) -> dict[str, Any]:
    """The hints for one subject: its parameters, its class's constructor (for a method),
    and the file's module classes and factories."""
    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    out: dict[str, Any] = {}
    out["params"] = facts_of_function(fn, functions)
    if cls is not None:
        init_facts, attrs = constructor_facts(cls, functions)
        out["init"] = init_facts
        out["attrs"] = attrs
        if fn is _init_of(cls):
            out["params"] = init_facts  # __init__ itself: its parameters' uses in every method
    classes: dict[str, Any] = {}
    all_modules = module_classes(module)
    used_by_others = {c.name.value for c in all_modules for other in all_modules if other is not c and c.name.value in names_in(other)}
    for c in all_modules:
        init_facts, attrs = constructor_facts(c, functions)
        forward = next((m for m in _methods(c) if m.name.value == "forward"), None)
        classes[c.name.value] = {
            "init": init_facts,
            "attrs": attrs,
            "inner": c.name.value in used_by_others,
            "forward_arity": len(param_names(forward)) - 1 if forward is not None else None,
        }
    if classes:
        out["classes"] = classes
    made = {}
    for f in factories(module):
        if f is fn:
            continue
        m = FACTORY_NAME.match(f.name.value)
        assert m is not None
        made[f.name.value] = {"noun": m.group(2), "params": facts_of_function(f, functions)}
    if made:
        out["factories"] = made
    return out


def providers(module: cst.Module) -> set[str]:
    """Top-level names the probe may build inputs from: module classes and factories
    (kept in the subject's source next to what it uses)."""
    return {c.name.value for c in module_classes(module)} | {f.name.value for f in factories(module)}
