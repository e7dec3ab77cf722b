"""The use case the command line and the GitHub side share: review a change set with the
stages the settings ask for, write the report, say the exit status."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from review_copies.config import config_root
from review_copies.llm.offline import offline_stage
from review_copies.model.cache_dirs import resolve_cache_dir
from review_copies.model.errors import UsageError
from review_copies.model.report import Report
from review_copies.model.settings import FAIL_ON_RANK, Settings
from review_copies.output import RenderContext, render
from review_copies.review.pipeline import Stage, review
from review_copies.review.static import StaticOptions
from review_copies.rules import Rule, select_rules
from review_copies.sandbox.verify.stage import SandboxStage
from review_copies.source.changes import ChangeSet


def review_changeset(
    settings: Settings, changeset: ChangeSet, stderr: IO[str], progress: Callable[[int], None] | None = None
) -> tuple[Report, tuple[type[Rule], ...]]:
    """`progress`, when given, hears the number of files reviewed so far."""
    rules = select_rules(settings.select, settings.ignore)
    # The reviewed repository's root: where its configuration lives, what probes never read,
    # and the place caches must stay out of.
    root = config_root(settings.change)
    stages: list[Stage] = []
    if settings.offline:
        stages.append(offline_stage("no OPENAI_API_KEY" if settings.api_key is None else "--offline"))
    else:
        # Imported here: the client (openai) stays off the import path of offline reviews.
        from review_copies.llm.stage import llm_stage

        stages.append(llm_stage(settings, rules, root, stderr))
    if settings.sandbox:
        cache_dir = resolve_cache_dir(settings.sandbox_cache_dir, "sandbox-cache-dir", "sandbox", root, dict(os.environ))
        stages.append(SandboxStage(
            settings.device, stderr, files=changeset.files, budget=settings.sandbox_budget, cache_dir=cache_dir, keep_warm=settings.sandbox_keep_warm,
            unsafe_local=settings.sandbox_unsafe_local, untrusted=settings.untrusted, hide=(str(root),) if root else (),
        ))
    # The index's facts are cached where the other caches are (never in the reviewed repository).
    index_cache = resolve_cache_dir(None, "index", "index", root, dict(os.environ))
    options = StaticOptions(rules=rules, exclude=settings.exclude, want_hunks=not settings.offline, index_cache=str(index_cache) if index_cache else None, progress=progress)
    return review(changeset, options, stages), rules


def write_report(settings: Settings, report: Report, ctx: RenderContext, stdout: IO[str]) -> None:
    text = render(report, settings.fmt, ctx)
    if settings.output:
        write_text(settings.output, text)
    else:
        stdout.write(text)
        stdout.flush()


def write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def exit_status(report: Report, fail_on: str) -> int:
    threshold = FAIL_ON_RANK[fail_on]
    return 1 if any(f.severity.rank >= threshold for f in report.findings) else 0
