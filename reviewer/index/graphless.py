"""Which functions return only values that can hold no autograd graph, read off their
`return` statements by form (`x.new_zeros(n, dtype=torch.long)`, `t.argmax(dim)`, a name
bound only so): the index records it per function (`no_graph`)."""

from __future__ import annotations

import ast

from review_copies.analysis.semantics import api

_NO_GRAPH_METHODS = frozenset(
    "new_zeros new_ones new_full new_empty new_tensor detach argmax argmin argsort nonzero long int bool byte short char "
    "numel item tolist numpy eq ne lt gt le ge isnan isinf isfinite".split()
)
_NO_GRAPH_FUNCTIONS = frozenset(
    "zeros ones full empty arange randint randperm zeros_like ones_like full_like empty_like rand randn rand_like randn_like eye tensor "
    "argmax argmin argsort nonzero eq ne lt gt le ge isnan isinf isfinite".split()
)
_INTEGER_DTYPES = frozenset("long int64 int int32 int16 short int8 uint8 bool".split())
# torch.distributions classes: their `sample()` runs under no_grad (`rsample()` is the
# differentiable one).
_DISTRIBUTIONS = frozenset(
    "Bernoulli Beta Binomial Categorical Cauchy Chi2 Dirichlet Exponential Gamma Geometric Gumbel Laplace LogNormal "
    "Multinomial MultivariateNormal Normal OneHotCategorical Poisson StudentT Uniform".split()
)
_GROWERS = frozenset(("append", "insert", "extend"))
# Python's own conversions: what they make is a number or a string, never a tensor.
_PYTHON_SCALARS = frozenset(("float", "int", "bool", "len", "str", "round"))
# A class's methods by name, as `self.name(...)` reaches them.
Functions = dict[str, "ast.FunctionDef | ast.AsyncFunctionDef"]


def _no_graph(value: ast.expr, binds: dict[str, list[ast.expr]], depth: int = 0, seen: frozenset[str] = frozenset()) -> bool:
    """Whether an expression's value can carry no autograd graph, by its form alone. A name
    met again inside its own bindings (`metrics = {..., **metrics}`) adds nothing to them."""
    if isinstance(value, (ast.Constant, ast.Compare)):
        return True
    if isinstance(value, (ast.List, ast.Tuple)):
        return all(_no_graph(e, binds, depth + 1, seen) for e in value.elts)  # `[]`, `(a.item(), b.item())`
    if isinstance(value, ast.Dict):
        return all(_no_graph(v, binds, depth + 1, seen) for v in value.values)  # `{"loss": float(loss), **other}`
    if isinstance(value, ast.Name):
        if value.id in seen:
            return True
        exprs = binds.get(value.id)
        return bool(exprs) and depth < 3 and all(_no_graph(e, binds, depth + 1, seen | {value.id}) for e in exprs)
    if not isinstance(value, ast.Call):
        return False
    if any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant) and k.value.value is False) for k in value.keywords):
        return False  # `torch.zeros(n, requires_grad=True)`: a leaf that requires grad
    for k in value.keywords:
        if k.arg == "dtype" and isinstance(k.value, ast.Attribute) and k.value.attr in _INTEGER_DTYPES:
            return True  # an integer or boolean tensor cannot require grad
    func = value.func
    if isinstance(func, ast.Name) and func.id in _PYTHON_SCALARS:
        return True  # `float(loss.detach())`: a Python number
    if isinstance(func, ast.Attribute) and func.attr == "sample" and isinstance(func.value, ast.Name):
        made = binds.get(func.value.id) or [ast.Name(id="?")]
        return all(isinstance(e, ast.Call) and callee_name(e.func) in _DISTRIBUTIONS for e in made)  # `Categorical(logits=t).sample()`
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id in ("torch", "th"):
            return func.attr in _NO_GRAPH_FUNCTIONS
        return func.attr in _NO_GRAPH_METHODS
    return False


def callee_name(func: ast.expr) -> str:
    """The last name of what a call calls: `f` of `f(x)`, `Categorical` of `dist.Categorical(...)`."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def returns_no_graph(fn: ast.FunctionDef | ast.AsyncFunctionDef, siblings: Functions | None = None) -> bool:
    """Every `return` of the function gives a value that can carry no graph
    (`return x.new_zeros(n, dtype=torch.long)`, a name bound only so, a dict of `float(...)`
    numbers), and there is one. `siblings`: the other methods of its class, through which
    `loss, metrics = self.loss(x)` binds `metrics` to what `loss` returns second."""
    found = _binds_and_returns(fn, siblings or {}, 0)
    if found is None:
        return False
    binds, returns = found
    return bool(returns) and all(_no_graph(r, binds) for r in returns)


def _binds_and_returns(fn: ast.FunctionDef | ast.AsyncFunctionDef, siblings: Functions, depth: int) -> tuple[dict[str, list[ast.expr]], list[ast.expr]] | None:
    """What each name of the function is bound to (a placeholder where not known) and what it
    returns; None for a generator."""
    binds: dict[str, list[ast.expr]] = {}
    returns: list[ast.expr] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            binds.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and (method := _own_method(node.value, siblings)) is not None and isinstance(node.targets[0], ast.Tuple):
            for i, elt in enumerate(node.targets[0].elts):
                for n in ast.walk(elt):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        plain = n is elt and _element_no_graph(method, i, siblings, depth + 1)
                        binds.setdefault(n.id, []).append(ast.Constant(value=None) if plain else ast.Name(id="?"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and not (isinstance(node, ast.Assign) and len(node.targets) == 1 and node.targets[0] is n):
                    binds.setdefault(n.id, []).append(ast.Name(id="?"))  # bound another way: not known
            # `metrics["l2"] = float(l2)`: what a dict or list is given is part of what it holds.
            for target in node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and node.value is not None:
                    binds.setdefault(target.value.id, []).append(ast.List(elts=[node.value], ctx=ast.Load()))
        elif isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.attr in _GROWERS:
            # `accs.append(acc.item())`: what a list is given is part of what it holds.
            added = node.args[-1] if node.func.attr in ("append", "insert") and node.args else ast.Name(id="?")
            binds.setdefault(node.func.value.id, []).append(ast.List(elts=[added], ctx=ast.Load()))
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            return None
    return binds, returns


def _own_method(value: ast.expr, siblings: Functions) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The method of the same class that `self.name(...)` calls, if the class defines it."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Name) and value.func.value.id == "self":
        return siblings.get(value.func.attr)
    return None


def _element_no_graph(fn: ast.FunctionDef | ast.AsyncFunctionDef, position: int, siblings: Functions, depth: int) -> bool:
    """Every `return` of `fn` is a tuple whose item at `position` can carry no graph
    (`return total, {"loss": float(total.detach())}`: the second)."""
    found = None if depth > 2 else _binds_and_returns(fn, siblings, depth)
    if found is None:
        return False
    binds, returns = found
    return bool(returns) and all(isinstance(r, ast.Tuple) and position < len(r.elts) and _no_graph(r.elts[position], binds) for r in returns)


def delegates(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every `return` of the method hands back what a method of another object it holds
    computes (`return self.crf.decode(emissions, mask)`, `return self.loss_fct.get_label(
    logits)`), and there is one: not a submodule's forward pass (`self.fc(x)`), nor a tensor
    method. What such a call returns (Viterbi paths, thresholded labels, a graph) is only
    known to the class it calls."""
    returns: list[ast.expr] = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Return):
            if node.value is None:
                return False
            returns.append(node.value)
    return bool(returns) and all(_held_objects_method(r) for r in returns)


def _held_objects_method(value: ast.expr) -> bool:
    """`self.crf.decode(...)`: a method, other than a forward pass, of an attribute of `self`."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return False
    held, method = value.func.value, value.func.attr
    if not (isinstance(held, ast.Attribute) and isinstance(held.value, ast.Name) and held.value.id == "self"):
        return False
    return method not in ("forward", "__call__") and method not in api.tensor_methods()
