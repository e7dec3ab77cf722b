"""Storage identities ("roots"): what the analysis calls the memory a value may share.

Two values that share a root may share memory. A root is a short string, and this module
is the only place that builds or reads one, so its spelling is an implementation detail:

| root                  | the memory of ...                                              |
| --------------------- | -------------------------------------------------------------- |
| `argument(x)`         | the caller's object passed as parameter `x`                    |
| `entry(r, key)`       | one entry of a mapping `r` (`batch["image"]`)                  |
| `each(r)`             | any entry of a mapping a comprehension filled with a new       |
|                       | tensor per key (`keyed(each(r), k)` is the one under `k`)      |
| `member(r, attr)`     | an attribute of `r` (a submodule's parameter, `self.buf`)      |
| `parameters(m)`       | the parameters of module `m` (a parameter, or a built module)  |
| `unknown_optimizer(o)`| the parameters an optimizer argument `o` was built over        |
| `gradients(r)`        | the `.grad` tensors of `r`                                     |
| `ANY_PARAMS`          | any module's parameters (an optimizer step of unknown reach)   |
| `ANY_GRAD`            | any parameter's gradient (`zero_grad(set_to_none=False)`)      |
| `optimizer_state(o)`  | the moment buffers of optimizer `o` (one built: its own fresh  |
|                       | identity; one handed in: its name)                             |
| `OPTIMIZER_STATE`     | the moment buffers of an optimizer with no simple name        |
| `fresh(...)`          | a new tensor, list or dict made on one line                    |
| `self.x` (dotted)     | an attribute of `self` first seen without a known value        |
| `of_constructor(r)`   | `r` as built in `__init__` from its parameter, seen elsewhere  |
"""

from __future__ import annotations

from collections.abc import Iterable

Root = str

ANY_PARAMS: Root = "params:*"
ANY_GRAD: Root = "grad:*"
OPTIMIZER_STATE: Root = "optstate"
SELF: Root = "self"


def argument(name: str) -> Root:
    return f"arg:{name}"


def optimizer_state(name: str) -> Root:
    """Each optimizer object has buffers of its own: stepping `opt` leaves `adapt_opt`'s alone."""
    return f"{OPTIMIZER_STATE}:{name}" if name else OPTIMIZER_STATE


def parameters(module: str) -> Root:
    return f"params:{module}"


def unknown_optimizer(name: str) -> Root:
    return f"params:?{name}"


def gradients(root: Root) -> Root:
    return f"grad:{root}"


def entry(root: Root, key: str) -> Root:
    return f"{root}[{key}]"


def each(root: Root) -> Root:
    """An entry of `{k: v.clone() for ...}`: every key holds memory of its own."""
    return f"{root}[*]"


def keyed(root: Root, key: str) -> Root:
    """The entry under `key` of a root `each` made; any other root as it is."""
    return entry(root[:-3], key) if root.endswith("[*]") else root


def member(root: Root, attr: str) -> Root:
    return f"{root}.{attr}"


def fresh(what: str, line: int, serial: int) -> Root:
    return f"{what}@{line}:{serial}"


def of_constructor(root: Root, names: frozenset[str]) -> Root:
    """A root `__init__` built from one of its parameters, as the class's other methods see it:
    the object `__init__` was given, which their own parameter of the same name is not."""
    grads = ""
    while root.startswith("grad:"):
        grads, root = grads + "grad:", root[5:]
    for prefix in ("arg:", "params:?", "params:"):
        if root.startswith(prefix):
            rest = root[len(prefix):]
            name = rest.split(".", 1)[0].split("[", 1)[0]
            if name in names:
                return f"{grads}{prefix}{name}@init{rest[len(name):]}"
            break
    return grads + root


def is_argument(root: Root, name: str) -> bool:
    """The argument `name` itself, or one entry of it."""
    return root == argument(name) or root.startswith(argument(name) + "[")


def argument_name(root: Root) -> str | None:
    return root[4:] if root.startswith("arg:") else None


def is_parameters(root: Root) -> bool:
    """Some module's parameters (named, unknown, or any)."""
    return root.startswith("params")


def is_unknown_optimizer(root: Root) -> bool:
    return root.startswith("params:?")


def in_module(root: Root, module: str) -> bool:
    """A parameter of a submodule of module argument `module` (`params:model.fc.weight`)."""
    return root.startswith(parameters(module) + ".")


def is_gradient(root: Root) -> bool:
    return root.startswith("grad:")


def allocated_here(found: Iterable[Root]) -> bool:
    """All of it memory a statement of the function made (`fresh(...)`, or entries of it):
    no argument's, no attribute's, no parameter's."""
    found = list(found)
    return bool(found) and all("@" in r and not r.startswith(("arg:", "self", "params:", "grad:")) for r in found)


def made_on_line(found: Iterable[Root], line: int) -> bool:
    """All of it memory one statement on `line` made (`list(torch.empty(n).chunk(k))`)."""
    found = list(found)
    return allocated_here(found) and all(r.partition("@")[2].startswith(f"{line}:") for r in found)


def is_self_state(root: Root) -> bool:
    """An attribute of `self` (`self.buf`)."""
    return root.startswith("self.")


def overlaps(a: Iterable[Root], b: Iterable[Root]) -> bool:
    """May memory named by `a` be memory named by `b`?"""
    left, right = set(a), set(b)
    if left & right:
        return True
    # A write to "any module's parameters" (or gradients, or an unnamed optimizer's state)
    # reaches every such root.
    for wildcard, reached in ((ANY_PARAMS, is_parameters), (ANY_GRAD, is_gradient), (OPTIMIZER_STATE, is_optimizer_state)):
        if (wildcard in left and any(reached(r) for r in right)) or (wildcard in right and any(reached(r) for r in left)):
            return True
    return False


def is_optimizer_state(root: Root) -> bool:
    return root == OPTIMIZER_STATE or root.startswith(OPTIMIZER_STATE + ":")
