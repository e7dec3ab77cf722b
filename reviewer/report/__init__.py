"""Reporters: text, json, sarif, markdown, github. Each turns a Report into a string."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reviewer.findings import Report
from reviewer.rules import Rule


@dataclass(frozen=True)
class RenderContext:
    rules: tuple[type[Rule], ...]
    color: bool = False
    description: str = ""


def render(report: Report, fmt: str, ctx: RenderContext) -> str:
    from reviewer.report import github, jsonfmt, markdown, sarif, text

    renderers: dict[str, Callable[[Report, RenderContext], str]] = {
        "text": text.render,
        "json": jsonfmt.render,
        "sarif": sarif.render,
        "markdown": markdown.render,
        "github": github.render,
    }
    return renderers[fmt](report.sorted(), ctx)
