"""`--fix`: write the report's suggestions into the working tree.

Only findings the report keeps are fixed (a refuted finding is never in it), only where the
lines still read what the finding saw, and never two suggestions over one line. The files are
rewritten whole, with their own line endings; nothing outside the repository is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from review_copies.model.findings import Finding
from review_copies.model.report import Report


@dataclass(frozen=True)
class FixResult:
    report: Report  # what is left to report: the findings not fixed
    fixed: tuple[Finding, ...] = ()
    # (finding, why it was left as it is)
    skipped: tuple[tuple[Finding, str], ...] = ()
    files: tuple[str, ...] = ()


def apply_fixes(report: Report, root: Path) -> FixResult:
    fixed: list[Finding] = []
    skipped: list[tuple[Finding, str]] = []
    files: list[str] = []
    by_path: dict[str, list[Finding]] = {}
    for f in report.findings:
        if f.suggestion is not None:
            by_path.setdefault(f.path, []).append(f)
    for path, findings in sorted(by_path.items()):
        target = _inside(root, path)
        if target is None:
            skipped += [(f, "the file is outside the repository") for f in findings]
            continue
        try:
            raw = target.read_bytes()
        except OSError as exc:
            skipped += [(f, f"cannot read the file: {exc.strerror}") for f in findings]
            continue
        text = raw.decode("utf-8", errors="surrogateescape")
        lines = text.splitlines(keepends=True)
        newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
        taken: set[int] = set()
        edits: list[tuple[int, int, list[str], Finding]] = []
        # One suggestion per finding, first come first served by position; any overlap is left.
        for f in sorted(findings, key=lambda f: (f.suggestion.start_line, f.suggestion.end_line, f.rule)):  # type: ignore[union-attr]
            s = f.suggestion
            assert s is not None
            span = set(range(s.start_line, s.end_line + 1))
            if span & taken:
                skipped.append((f, "its lines overlap another fix"))
                continue
            if s.start_line < 1 or s.end_line > len(lines):
                skipped.append((f, "its lines are no longer in the file"))
                continue
            current = "".join(lines[s.start_line - 1 : s.end_line])
            if s.original and _plain(current) != _plain(s.original):
                skipped.append((f, "the lines changed since the review"))
                continue
            taken |= span
            new = [line.rstrip("\r\n") + newline for line in s.replacement.splitlines()]
            edits.append((s.start_line, s.end_line, new, f))
        if not edits:
            continue
        for start, end, new, f in sorted(edits, key=lambda e: e[0], reverse=True):
            if end == len(lines) and not lines[-1].endswith(("\n", "\r")) and new:
                new[-1] = new[-1].rstrip("\r\n")
            lines[start - 1 : end] = new
            fixed.append(f)
        target.write_bytes("".join(lines).encode("utf-8", errors="surrogateescape"))
        files.append(path)
    done = {id(f) for f in fixed}
    left = replace(report, findings=[f for f in report.findings if id(f) not in done])
    return FixResult(report=left, fixed=tuple(fixed), skipped=tuple(skipped), files=tuple(files))


def _plain(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines())


def _inside(root: Path, path: str) -> Path | None:
    # A link may point anywhere (the change may be a stranger's): only plain files inside.
    if (root / path).is_symlink():
        return None
    target = (root / path).resolve()
    try:
        target.relative_to(root.resolve())
    except ValueError:
        return None
    return target if target.is_file() else None
