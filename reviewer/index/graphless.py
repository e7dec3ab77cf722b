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


def _no_graph(value: ast.expr, binds: dict[str, list[ast.expr]], depth: int = 0) -> bool:
    """Whether an expression's value can carry no autograd graph, by its form alone."""
    if isinstance(value, (ast.Constant, ast.Compare)):
        return True
    if isinstance(value, (ast.List, ast.Tuple)):
        return all(_no_graph(e, binds, depth + 1) for e in value.elts)  # `[]`, `(a.item(), b.item())`
    if isinstance(value, ast.Name):
        exprs = binds.get(value.id)
        return bool(exprs) and depth < 3 and all(_no_graph(e, binds, depth + 1) for e in exprs)
    if not isinstance(value, ast.Call):
        return False
    if any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant) and k.value.value is False) for k in value.keywords):
        return False  # `torch.zeros(n, requires_grad=True)`: a leaf that requires grad
    for k in value.keywords:
        if k.arg == "dtype" and isinstance(k.value, ast.Attribute) and k.value.attr in _INTEGER_DTYPES:
            return True  # an integer or boolean tensor cannot require grad
    func = value.func
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


def returns_no_graph(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every `return` of the function gives a value that can carry no graph
    (`return x.new_zeros(n, dtype=torch.long)`, a name bound only so), and there is one."""
    binds: dict[str, list[ast.expr]] = {}
    returns: list[ast.expr] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            binds.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            for n in ast.walk(node):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and not (isinstance(node, ast.Assign) and len(node.targets) == 1 and node.targets[0] is n):
                    binds.setdefault(n.id, []).append(ast.Name(id="?"))  # bound another way: not known
        elif isinstance(node, ast.Return) and node.value is not None:
            returns.append(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.attr in _GROWERS:
            # `accs.append(acc.item())`: what a list is given is part of what it holds.
            added = node.args[-1] if node.func.attr in ("append", "insert") and node.args else ast.Name(id="?")
            binds.setdefault(node.func.value.id, []).append(ast.List(elts=[added], ctx=ast.Load()))
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            return False
    return bool(returns) and all(_no_graph(r, binds) for r in returns)


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
