"""Load one side of a subject in the probe process: run the kept top-level statements one
by one (a failing import only loses the names it binds), find the function to call.
Also the process-wide settings every run starts from (seeds, grad mode)."""

from __future__ import annotations

import ast
import inspect
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from review_copies.sandbox.protocol import Side

MAX_MESSAGE = 300


class SubjectError(Exception):
    """The subject cannot be loaded (does not compile, the target is not defined)."""


@dataclass
class Loaded:
    namespace: dict[str, Any]
    fn: Any
    owner: type | None
    code: Any
    failures: list[str] = field(default_factory=list)

    @property
    def filename(self) -> str:
        return self.namespace["__file__"]


def error_text(exc: BaseException) -> str:
    first = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {first}"[:MAX_MESSAGE]


def seed(n: int) -> None:
    # Not torch.manual_seed: without CUDA initialised it queues a lazy CUDA seed call with
    # a formatted stack each time (over 1 ms); the CPU generator is what the subject uses.
    torch.default_generator.manual_seed(n)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(n)
    np.random.seed(n)
    random.seed(n)


def reset_torch_state() -> None:
    """Undo global switches a subject may leave behind (grad mode, default dtype)."""
    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)


def load(side: Side) -> Loaded:
    filename = f"<subject {side.filename}>"
    try:
        tree = ast.parse(side.source, filename=filename)
    except SyntaxError as exc:
        raise SubjectError(f"the subject does not compile: {exc.msg} (line {exc.lineno})") from None
    namespace: dict[str, Any] = {"__name__": "review_copies_subject", "__file__": filename, "__builtins__": __builtins__}
    failures = []
    for stmt in tree.body:
        code = compile(ast.Module(body=[stmt], type_ignores=[]), filename, "exec")
        try:
            exec(code, namespace)
        except Exception as exc:
            failures.append(f"line {stmt.lineno}: {error_text(exc)}")
    target = side.target
    obj: Any = namespace.get(target[0])
    owner = None
    for part in target[1:]:
        owner = obj if isinstance(obj, type) else owner
        obj = inspect.getattr_static(obj, part, None) if obj is not None else None
    if obj is None:
        why = f" ({failures[0]})" if failures else ""
        raise SubjectError(f"`{'.'.join(target)}` is not defined after loading the file{why}")
    fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    # A decorated function (`@torch.no_grad()`) is called as decorated, but the tracer
    # watches the code written in the file.
    code = getattr(_unwrap(fn), "__code__", None)
    if code is None:
        raise SubjectError(f"`{'.'.join(target)}` is not a Python function")
    if isinstance(obj, staticmethod):
        owner = None
        fn = obj.__func__
    elif isinstance(obj, classmethod):
        fn = obj.__get__(None, owner)
        owner = None
    return Loaded(namespace, fn, owner, code, failures)


def _unwrap(fn: Any) -> Any:
    try:
        return inspect.unwrap(fn)
    except ValueError:
        return fn
