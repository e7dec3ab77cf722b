"""Shared by the tests/test_sandbox_*.py modules: one warm worker for the whole session
(starting one costs a torch import), and findings built by hand."""

from __future__ import annotations

import atexit
import io
import textwrap

from review_copies.model.findings import Category, Finding, Severity, Suggestion, Verification
from review_copies.sandbox.protocol import Limits
from review_copies.sandbox.verify.client import Sandbox
from review_copies.sandbox.verify.verifier import Verifier

_WORKER: Sandbox | None = None


def worker() -> Sandbox:
    global _WORKER
    if _WORKER is None or not _WORKER.alive:
        # CPU time bounds a probe; the wall-clock limit only catches one that sleeps, and is
        # generous because a loaded 2-core machine gives a probe a fraction of a core.
        _WORKER = Sandbox(Limits(wall_seconds=120, cpu_seconds=15))
        _WORKER.start()
        atexit.register(_WORKER.close)
    return _WORKER


def finding(code: str, line: int, category: str, fix: str | None = None, fix_lines: tuple[int, int] | None = None,
            rule: str = "X999", path: str = "m.py", probe: str = "") -> tuple[Finding, str]:
    """A finding on `line` of the dedented code; `fix` replaces fix_lines (default: the line),
    re-indented like the first replaced line."""
    code = textwrap.dedent(code).lstrip("\n")
    suggestion = None
    if fix is not None:
        start, end = fix_lines or (line, line)
        first = code.splitlines()[start - 1]
        indent = first[: len(first) - len(first.lstrip())]
        body = textwrap.dedent(fix).strip("\n")
        replacement = "".join(f"{indent}{part}\n" if part else "\n" for part in body.splitlines())
        suggestion = Suggestion(start, end, replacement)
    f = Finding(path, line, line, Category(category), rule, Severity.WARNING, "a finding made by hand", suggestion=suggestion, probe=probe)
    return f, code


def verify(f: Finding, code: str, sandbox: Sandbox | None = None) -> Verification:
    sb = sandbox or worker()
    return Verifier(sb, "cpu", io.StringIO()).verification(f, code, ["cpu"])
