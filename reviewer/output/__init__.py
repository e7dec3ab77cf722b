"""Report formats. Every module of this package that declares `NAME` and
`render(report, ctx) -> str` is one `--format` choice: adding a format is adding a module.
The registry is the list of choices the command line offers."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache

from review_copies.model.report import Report
from review_copies.output.context import RenderContext

__all__ = ["RenderContext", "formats", "names", "render"]

Renderer = Callable[[Report, RenderContext], str]


@cache
def formats() -> dict[str, Renderer]:
    found: dict[str, Renderer] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        name = getattr(module, "NAME", None)
        if name is None:
            continue
        if name in found:
            raise RuntimeError(f"report format {name} is declared twice")
        found[name] = module.render
    return found


def names() -> tuple[str, ...]:
    """The `--format` choices, text first (the default) and the rest by name."""
    return tuple(sorted(formats(), key=lambda n: (n != "text", n)))


def render(report: Report, fmt: str, ctx: RenderContext) -> str:
    return formats()[fmt](report.sorted(), ctx)
