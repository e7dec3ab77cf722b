"""The walk of one function that tracks which local names stand for which parameter path
(`x = batch["image"].float()` makes `x` stand for `batch['image']`), and hands every use
of such a name to `roles`."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.syntax import dotted, last
from review_copies.sandbox.verify.param_facts.roles import CONVERSIONS, SAME_VALUE_METHODS, int_value, string_value, use
from review_copies.sandbox.verify.param_facts.table import Facts, FactTable

# Calls that give a reshaped or converted view of the value: its role as an argument holds.
DERIVED_METHODS = SAME_VALUE_METHODS | frozenset("flatten view reshape squeeze unsqueeze view_as reshape_as t ravel".split())


def param_names(fn: cst.FunctionDef) -> list[str]:
    p = fn.params
    return [q.name.value for q in (*p.posonly_params, *p.params, *p.kwonly_params)]


class FactWalker:
    """Walks one function in source order, tracking which local names stand for which
    parameter path, and records every use of such a name."""

    def __init__(self, roots: dict[str, str], functions: dict[str, cst.FunctionDef] | None = None, depth: int = 0) -> None:
        # local name (or `self.attr`) -> path
        self.alias: dict[str, str] = dict(roots)
        self.facts = FactTable()
        for name, path in roots.items():
            self.facts.add(path, "names", name.split(".")[-1])
        self.functions = functions or {}
        self.depth = depth

    # ----------------------------------------------------------------- paths

    def path(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name):
            return self.alias.get(node.value)
        if isinstance(node, cst.Attribute):
            name = dotted(node)
            if name in self.alias:
                return self.alias[name]
            return None
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            base = self.path(node.value)
            if base is None:
                return None
            index = node.slice[0].slice.value
            key = string_value(index)
            if key is not None:
                return f"{base}[{key!r}]"
            number = int_value(index)
            if number is not None and number >= 0:
                return f"{base}[{number}]"
        return None

    def value_path(self, node: cst.BaseExpression) -> str | None:
        """The path a value stands for when bound to a name: through same-value methods
        and conversions (`batch["x"].float()`, `torch.as_tensor(mean)`)."""
        direct = self.path(node)
        if direct is not None:
            return direct
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in SAME_VALUE_METHODS:
                return self.value_path(node.func.value)
            if last(dotted(node.func)) in CONVERSIONS and node.args:
                return self.value_path(node.args[0].value)
        return None

    def bind(self, target: cst.BaseExpression, path: str | None) -> None:
        """Bind assignment or loop targets; unpacking makes item paths."""
        if isinstance(target, cst.Name):
            if path is None:
                self.alias.pop(target.value, None)
            else:
                self.alias[target.value] = path
                self.facts.add(path, "names", target.value)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            name = dotted(target)
            if path is None:
                self.alias.pop(name, None)
            else:
                self.alias[name] = path
                self.facts.add(path, "names", target.attr.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e for e in target.elements if not isinstance(e, cst.StarredElement)]
            if path is not None:
                self.facts.add(path, "items", len(elements))
                self.facts.add(path, "roles", "tuple")
            for i, element in enumerate(elements):
                self.bind(element.value, f"{path}[{i}]" if path is not None else None)

    # ------------------------------------------------------------------ walk

    def run(self, body: cst.CSTNode) -> FactTable:
        self.walk(body, ())
        return self.facts

    def walk(self, node: cst.CSTNode, parents: tuple[cst.CSTNode, ...]) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and parents:
            return  # nested scopes have their own names
        if isinstance(node, cst.Assign):
            self.walk(node.value, (*parents, node))
            source = self._unpack_source(node.value)
            for t in node.targets:
                if source is not None and isinstance(t.target, (cst.Tuple, cst.List)):
                    self._shape_unpack(source, len(t.target.elements))
                    self.bind(t.target, None)
                else:
                    self.bind(t.target, self.value_path(node.value))
                self.walk(t.target, (*parents, node, t))
            return
        if isinstance(node, cst.AnnAssign) and node.value is not None:
            self.walk(node.value, (*parents, node))
            self.bind(node.target, self.value_path(node.value))
            return
        if isinstance(node, cst.For):
            self.walk(node.iter, (*parents, node))
            self._bind_loop(node.target, node.iter)
            self.walk(node.body, (*parents, node))
            if node.orelse is not None:
                self.walk(node.orelse, (*parents, node))
            return
        if isinstance(node, cst.CompFor):
            self.walk(node.iter, (*parents, node))
            self._bind_loop(node.target, node.iter)
            for cond in node.ifs:
                self.walk(cond, (*parents, node))
            if node.inner_for_in is not None:
                self.walk(node.inner_for_in, (*parents, node))
            return
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            self.walk(node.for_in, (*parents, node))
            self.walk(node.elt, (*parents, node))
            return
        if isinstance(node, cst.DictComp):
            self.walk(node.for_in, (*parents, node))
            self.walk(node.key, (*parents, node))
            self.walk(node.value, (*parents, node))
            return
        if isinstance(node, cst.BaseExpression):
            path = self.path(node)
            if path is not None:
                use(self, path, node, parents)
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in DERIVED_METHODS:
                base = self.path(node.func.value)
                if base is not None and parents and isinstance(parents[-1], (cst.Arg, cst.Comparison, cst.ComparisonTarget)):
                    use(self, base, node, parents)  # `targets.flatten()` as a loss's target
        for child in node.children:
            self.walk(child, (*parents, node))

    def _unpack_source(self, value: cst.BaseExpression) -> str | None:
        """`a, b, c, d = x.shape` (or `x.size()`): the path of x."""
        if isinstance(value, cst.Attribute) and value.attr.value == "shape":
            return self.path(value.value)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" and not value.args:
            return self.path(value.func.value)
        return None

    def _shape_unpack(self, path: str, n: int) -> None:
        self.facts.add(path, "rank", n)
        self.facts.add(path, "roles", "tensor")

    def _bind_loop(self, target: cst.BaseExpression, it: cst.BaseExpression) -> None:
        path = self.path(it)
        if path is not None:
            self._iterated(path, target)
            return
        if isinstance(it, cst.Call):
            fn = dotted(it.func)
            args = [a.value for a in it.args if a.keyword is None and a.star == ""]
            if fn == "enumerate" and args and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                inner = self.path(args[0])
                if inner is not None:
                    self._iterated(inner, target.elements[1].value)
                    self.bind(target.elements[0].value, None)
                    return
            if fn == "zip" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(args):
                for arg, element in zip(args, target.elements):
                    inner = self.path(arg)
                    if inner is not None:
                        self._iterated(inner, element.value)
                    else:
                        self.bind(element.value, None)
                return
            if isinstance(it.func, cst.Attribute) and it.func.attr.value in ("items", "values") and self.path(it.func.value):
                self.facts.add(self.path(it.func.value) or "", "roles", "dict")
            if fn == "range" and args:
                for a in args:
                    p = self.path(a)
                    if p is not None:
                        self.facts.add(p, "roles", "count")
        self.bind(target, None)

    def _iterated(self, path: str, target: cst.BaseExpression) -> None:
        arity = len(target.elements) if isinstance(target, (cst.Tuple, cst.List)) else 0
        self.facts.add(path, "iter", arity)
        self.facts.add(path, "roles", "iterable")
        self.bind(target, f"{path}[*]")

    def into(self, path: str, fn: cst.FunctionDef, pos: int | None, kw: str | None) -> None:
        """One level into a same-file function: its parameter's facts are this value's."""
        names = param_names(fn)
        name = kw if kw is not None else (names[pos] if pos is not None and pos < len(names) else None)
        if name is None or name not in names:
            return
        inner = facts_of_function(fn, self.functions, self.depth + 1)
        for sub, facts in inner.items():
            if sub == name or sub.startswith(name + "["):
                self.facts.merge(path + sub[len(name):], facts)


def facts_of_function(fn: cst.FunctionDef, functions: dict[str, cst.FunctionDef] | None = None, depth: int = 0,
                     extra: dict[str, str] | None = None) -> dict[str, Facts]:
    roots = {n: n for n in param_names(fn)}
    roots.update(extra or {})
    walker = FactWalker(roots, functions, depth)
    walker.run(fn.body)
    return walker.facts.to_json()
