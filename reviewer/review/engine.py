"""Review one file: parse once, build the dataflow of the functions the change touches,
run the rules whose prefilter hits, keep what lies on changed lines.

`review_file` is a pure function of picklable inputs so that large reviews can fan it
out over a process pool.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from review_copies.analysis.analyze import analyze_file
from review_copies.analysis.events import FunctionFlow
from review_copies.analysis.parse import ParsedFile, SourceProblem, mentions_torch, parse
from review_copies.model.findings import Finding, Note
from review_copies.review import fixes
from review_copies.review.hunks import TensorHunk, tensor_hunks, tensor_lines
from review_copies.review.suppression import directives, is_suppressed
from review_copies.rules import Hit, Rule, rule_by_code


@dataclass(frozen=True)
class FileJob:
    path: str
    text: str
    # New-file lines that changed; None reviews every line (--all, new untracked files).
    changed: frozenset[int] | None
    rule_codes: tuple[str, ...]
    want_hunks: bool = False


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    hunks: list[TensorHunk] = field(default_factory=list)
    parsed: bool = False
    mentions_torch: bool = False
    suppressed: int = 0


def review_file(job: FileJob) -> FileResult:
    """Review one file. A failure of the analysis itself costs that file only: it becomes a
    note and the review goes on (REVIEW_COPIES_DEBUG=1 raises it instead)."""
    try:
        return _review_file(job)
    except Exception as exc:
        if os.environ.get("REVIEW_COPIES_DEBUG"):
            raise
        result = FileResult(job.path, mentions_torch=True)
        result.notes.append(Note(f"not reviewed: the analysis failed ({type(exc).__name__}: {' '.join(str(exc).split())[:120]}); please report it", job.path))
        return result


def _review_file(job: FileJob) -> FileResult:
    result = FileResult(job.path)
    if not mentions_torch(job.text):
        return result
    result.mentions_torch = True
    try:
        parsed = parse(job.path, job.text)
    except SourceProblem as problem:
        result.notes.append(Note(str(problem), job.path))
        return result
    result.parsed = True
    rules = [r for code in job.rule_codes if (r := rule_by_code(code)) is not None and r.applies_to(job.text)]
    # Tensor hunks are counted for every change; over whole files only when the LLM needs them.
    want_hunks = job.want_hunks or job.changed is not None
    if not rules and not want_hunks:
        return result
    flows = analyze_file(parsed, job.changed)
    findings = [f for rule in rules for f in _run_rule(rule, flows, parsed, job.changed)]
    table = directives(job.text) if findings else {}
    kept = [f for f in findings if not is_suppressed(f, table)]
    result.suppressed = len(findings) - len(kept)
    result.findings = _dedupe(kept)
    if want_hunks:
        changed = sorted(job.changed) if job.changed is not None else list(range(1, len(parsed.lines) + 1))
        result.hunks = tensor_hunks(parsed, changed, tensor_lines(flows))
    return result


def _run_rule(rule: type[Rule], flows: Sequence[FunctionFlow], parsed: ParsedFile, changed: frozenset[int] | None) -> list[Finding]:
    out = []
    instance = rule()
    for flow in flows:
        for hit in instance.check(flow):
            finding = to_finding(rule, hit, parsed, changed)
            if finding is not None:
                out.append(finding)
    return out


def _touches(parsed: ParsedFile, node: cst.CSTNode, changed: frozenset[int] | None) -> bool:
    if changed is None:
        return True
    start, end = parsed.span(node)
    return any(line in changed for line in range(start, end + 1))


def to_finding(rule: type[Rule], hit: Hit, parsed: ParsedFile, changed: frozenset[int] | None) -> Finding | None:
    """Place a hit on a changed line (its own node's, else an anchor's), or drop it."""
    node = hit.node
    if not _touches(parsed, node, changed):
        node = next((a for a in hit.anchors if _touches(parsed, a, changed)), None)
        if node is None:
            return None
    pos = parsed.positions[node]
    line, end_line = pos.start.line, pos.end.line
    suggestion = fixes.render(parsed, *hit.replace) if hit.replace is not None else None
    code = "\n".join(parsed.lines[line - 1 : end_line])
    return Finding(
        path=parsed.path,
        line=line,
        end_line=end_line,
        category=rule.category,
        rule=rule.code,
        severity=rule.severity,
        message=hit.message,
        source="static",
        suggestion=suggestion,
        code=code,
        column=pos.start.column + 1,
        probe=hit.probe,
        claims=hit.claims,
    )


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, int, int, str]] = set()
    out = []
    for f in sorted(findings, key=lambda f: (f.line, f.column, f.rule)):
        key = (f.rule, f.line, f.column, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
