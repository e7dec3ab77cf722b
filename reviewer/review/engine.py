"""Review one file: parse once, build the dataflow of the functions the change touches,
run the rules whose prefilter hits, keep what lies on changed lines.

`review_file` is a pure function of picklable inputs so that large reviews can fan it
out over a process pool.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import libcst as cst

from review_copies.analysis.analyze import analyze_file
from review_copies.analysis.change import FunctionChange, compare
from review_copies.analysis.events import FunctionFlow
from review_copies.analysis.parse import ParsedFile, SourceProblem, another_framework_only, mentions_torch, parse
from review_copies.index.repo import RepoIndex
from review_copies.model.findings import Finding, Note
from review_copies.review import fixes
from review_copies.review.hunks import TensorHunk, tensor_hunks, tensor_lines
from review_copies.review.suppression import directives, is_suppressed
from review_copies.rules import Hit, Rule, all_rules, rule_by_code
from review_copies.source.tree import RepoFiles


@dataclass(frozen=True)
class FileJob:
    path: str
    text: str
    # New-file lines that changed; None reviews every line (--all, new untracked files).
    changed: frozenset[int] | None
    rule_codes: tuple[str, ...]
    want_hunks: bool = False
    # The file before the change (None: new, whole-file review, or not available).
    base: str | None = None
    # The rest of the repository, and where its index caches facts.
    repo: RepoFiles | None = None
    index_cache: str | None = None


def example_job(path: str, text: str, base: str | None, rule_codes: tuple[str, ...]) -> FileJob:
    """A job for one file reviewed whole, or, with `base`, as the change from `base` to
    `text` (the lines difflib says differ): how rule examples are run."""
    if base is None:
        return FileJob(path, text, None, rule_codes)
    old, new = base.splitlines(), text.splitlines()
    changed = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(j1 + 1, j2 + 1))
    return FileJob(path, text, frozenset(changed), rule_codes, base=base)


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    hunks: list[TensorHunk] = field(default_factory=list)
    # Counted for every reviewed file; `hunks` themselves travel back only when wanted.
    tensor_hunks: int = 0
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
    if another_framework_only(parsed.imports):
        result.mentions_torch = False  # JAX or TensorFlow code that names torch only in words
        return result
    result.notes.extend(Note(note, job.path) for note in parsed.notes)
    result.parsed = True
    rules = [r for code in job.rule_codes if (r := rule_by_code(code)) is not None and r.applies_to(job.text)]
    # Tensor hunks are kept for every change; over whole files only when the LLM needs them
    # (they are counted either way: the report says how many the rules reviewed).
    want_hunks = job.want_hunks or job.changed is not None
    if not rules and not want_hunks:
        return result
    index = RepoIndex(job.repo, Path(job.index_cache) if job.index_cache else None, here=(job.path, job.text))
    flows = analyze_file(parsed, job.changed, _changes(job, parsed), index)
    findings = _merge_change_findings([f for rule in rules for f in _run_rule(rule, flows, parsed, job.changed)])
    table = directives(job.text) if findings else {}
    kept = [f for f in findings if not is_suppressed(f, table)]
    result.suppressed = len(findings) - len(kept)
    result.findings = _dedupe(kept)
    changed = sorted(job.changed) if job.changed is not None else list(range(1, len(parsed.lines) + 1))
    hunks = tensor_hunks(parsed, changed, tensor_lines(flows))
    result.tensor_hunks = len(hunks)
    if want_hunks:
        result.hunks = hunks
    return result


def _changes(job: FileJob, parsed: ParsedFile) -> dict[str, FunctionChange] | None:
    """What the change did to each changed function, from the file's base version."""
    if job.base is None or job.changed is None:
        return None
    try:
        before = parse(job.path, job.base)
    except SourceProblem:
        return None  # the base did not parse: the new version is reviewed on its own
    return compare(parsed, before, job.changed)


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


def _merge_change_findings(findings: list[Finding]) -> list[Finding]:
    """A finding of a rule that reads the change (`Rule.follows_change`) on the lines of
    another rule's finding of the same category becomes one sentence of that finding: what
    the change dropped is the strongest part of the story, the other rule already tells it."""
    following = {r.code for r in all_rules() if r.follows_change}
    out = [f for f in findings if f.rule not in following]
    for extra in (f for f in findings if f.rule in following):
        same = next((i for i, f in enumerate(out) if f.category is extra.category and f.line <= extra.end_line and extra.line <= f.end_line and f.rule not in following), None)
        if same is None:
            out.append(extra)
            continue
        first = extra.message.split(": ", 1)[0]
        out[same] = replace(out[same], message=f"{out[same].message} {first}.")
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per place and message, and one per edit: two rules of one category that
    propose the same change to the same lines (RC348's slice assignment and RC341's clone of
    a fresh index, both `x[i] = y[i]`) say one thing twice; the first in report order stays."""
    seen: set[tuple[str, int, int, str]] = set()
    edits: set[tuple[str, int, int, str]] = set()
    out = []
    for f in sorted(findings, key=lambda f: (f.line, f.column, f.rule)):
        key = (f.rule, f.line, f.column, f.message)
        edit = (f.category.value, f.suggestion.start_line, f.suggestion.end_line, f.suggestion.replacement) if f.suggestion is not None else None
        if key in seen or (edit is not None and edit in edits):
            continue
        seen.add(key)
        if edit is not None:
            edits.add(edit)
        out.append(f)
    return out
