"""Check one answer of the model (contract section 4) before any of it is used.

Every finding is checked on its own, so one bad finding costs only itself: the schema,
the category, the file, the lines (anchored by the quoted code), that it touches the
change, and its fix (inside the finding's lines, whole lines, and the file still
parses). What fails goes to `dropped` with the reason; an answer that is not JSON at all
drops the request's files as a whole.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from review_copies.llm.placement import Placed, place, strip_number_column
from review_copies.model.findings import Category, Dropped, Finding, Severity, Suggestion
from review_copies.review import fixes
from review_copies.review.hunks import TensorHunk

MAX_MESSAGE_CHARS = 1200
_CATEGORIES = {c.value: c for c in Category}
_SEVERITIES = {s.value: s for s in Severity}
_FENCE = re.compile(r"\A```[a-zA-Z]*\n(?P<body>.*)\n```\Z", re.DOTALL)
_THINKING = re.compile(r"\A<think>.*?</think>", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class AnswerError(Exception):
    """The answer as a whole is unusable (not JSON, or not the answer object)."""


@dataclass(frozen=True)
class Shown:
    """What one request showed the model: the only things its answer may point at."""

    hunks: tuple[TensorHunk, ...]
    texts: Mapping[str, str]
    categories: frozenset[Category]

    def hunks_of(self, path: str) -> list[TensorHunk]:
        return [h for h in self.hunks if h.path == path]


@dataclass
class Checked:
    findings: list[Finding] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    corrected: int = 0
    probes_dropped: int = 0
    fixes_dropped: int = 0


def unwrap(content: str) -> str:
    """The JSON inside the usual wrappers of local models: a leading <think> block, a Markdown fence."""
    text = _THINKING.sub("", content.strip()).strip()
    match = _FENCE.match(text)
    return match.group("body").strip() if match else text


def parse_answer(content: str) -> list[Any]:
    text = unwrap(content)
    if not text:
        raise AnswerError("the answer is empty")
    start = text.find("{")
    try:
        # The first JSON object: small local models often add prose after it ("I hope this helps").
        data, _ = json.JSONDecoder().raw_decode(text, start if start >= 0 else 0)
    except json.JSONDecodeError as exc:
        raise AnswerError(f"the answer is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise AnswerError("the answer breaks the schema: it must be an object with a list 'findings'")
    return data["findings"]


# --------------------------------------------------------------------------- schema


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _optional(raw: Mapping[str, Any], key: str, kind: type) -> bool:
    return raw.get(key) is None or isinstance(raw.get(key), kind)


def schema_problem(raw: Any) -> str | None:
    """What makes this finding break the answer schema (the category is checked apart)."""
    if not isinstance(raw, dict):
        return "a finding must be an object"
    for key in ("path", "category", "message"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            return f"'{key}' must be a non-empty string"
    if says_nothing(raw["message"]):
        return "'message' says nothing (a placeholder such as '…' or 'message')"
    if raw.get("severity") not in _SEVERITIES:
        return "'severity' must be info, warning or error"
    if not _is_int(raw.get("line")) or raw["line"] < 1:
        return "'line' must be a positive integer"
    end = raw.get("end_line")
    if end is not None and (not _is_int(end) or end < raw["line"]):
        return "'end_line' must be an integer not before 'line'"
    if not _optional(raw, "code", str) or not _optional(raw, "probe", str):
        return "'code' and 'probe' must be strings or null"
    fix = raw.get("fix")
    if fix is not None:
        if not isinstance(fix, dict) or not _is_int(fix.get("start_line")) or not _is_int(fix.get("end_line")):
            return "'fix' must be null or an object with integer 'start_line' and 'end_line'"
        if not isinstance(fix.get("replacement"), str):
            return "'fix.replacement' must be a string"
    return None


def _placeholder(raw: Any, shown: Shown) -> Finding:
    """A finding-shaped record of what the model said, for `dropped`."""
    data = raw if isinstance(raw, dict) else {}
    first = shown.hunks[0]
    path = data.get("path") if isinstance(data.get("path"), str) else first.path
    line = data["line"] if _is_int(data.get("line")) and data["line"] > 0 else first.start
    end = data["end_line"] if _is_int(data.get("end_line")) and data["end_line"] >= line else line
    category = _CATEGORIES.get(data.get("category")) if isinstance(data.get("category"), str) else None
    label = category.value if category else (data.get("category") if isinstance(data.get("category"), str) else "")
    return Finding(
        path=path,
        line=line,
        end_line=end,
        category=category,
        rule=f"llm-{label}" if label else "llm",
        severity=_SEVERITIES.get(data.get("severity"), Severity.INFO),
        message=clean_message(data.get("message")) if isinstance(data.get("message"), str) else "",
        source="llm",
        code=data.get("code") if isinstance(data.get("code"), str) else "",
    )


_PLACEHOLDERS = frozenset(("message", "todo", "tbd", "n/a", "na", "none", "null", "explanation", "description", "finding", "issue", "bug", "text", "string", "lorem ipsum"))


def says_nothing(message: str) -> bool:
    """A message a model copied from an example or a schema: punctuation and ellipses
    only, a word or two, or a placeholder word."""
    words = re.findall(r"[^\W_]+", message.lower())
    return len(words) < 3 or " ".join(words) in _PLACEHOLDERS


def clean_message(text: str) -> str:
    flat = _CONTROL.sub(" ", text).strip()
    return flat if len(flat) <= MAX_MESSAGE_CHARS else flat[: MAX_MESSAGE_CHARS - 1] + "…"


# --------------------------------------------------------------------------- fixes


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def check_fix(fix: Mapping[str, Any], placed: Placed, text: str) -> Suggestion | str | None:
    """The fix as a checked suggestion, None when it changes nothing, or why it is refused."""
    start, end = fix["start_line"], fix["end_line"]
    if not (placed.line <= start <= end <= placed.end_line):
        # The model's numbers for the fix may be off by as much as its finding's were.
        start, end = start + placed.shift, end + placed.shift
    if end < start:
        return f"the fix's end_line {fix['end_line']} is before its start_line {fix['start_line']}"
    if not (placed.line <= start and end <= placed.end_line):
        return f"the fix replaces lines {start}-{end}, outside the finding's lines {placed.line}-{placed.end_line}"
    lines = strip_number_column(fix["replacement"].replace("\r\n", "\n").split("\n"))
    replacement = "\n".join(lines)
    if replacement and not replacement.endswith("\n"):
        replacement += "\n"
    replacement = replacement.replace("\n", _newline(text))
    original = fixes.split_lines(text)[start - 1 : end]
    if replacement.strip() and original and _indent(replacement) != _indent(original[0]):
        return f"the fix changes the indentation of line {start}"
    fixed = fixes.apply(text, Suggestion(start, end, replacement))
    try:
        cst.parse_module(fixed)
    except cst.ParserSyntaxError as exc:
        return f"the fix does not parse (the file fails at line {exc.raw_line}, column {exc.raw_column})"
    return fixes.line_suggestion(text, fixed)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


# --------------------------------------------------------------------------- findings


def _probe(raw: Mapping[str, Any]) -> str | None:
    """The probe when it is Python; None when there was one that is not (it is left out)."""
    probe = raw.get("probe") or ""
    if not probe.strip():
        return ""
    try:
        ast.parse(probe)
    except (SyntaxError, ValueError):
        return None
    return probe


def check_finding(raw: Any, shown: Shown) -> Finding | Dropped:
    problem = schema_problem(raw)
    if problem is not None:
        return Dropped(_placeholder(raw, shown), f"the finding breaks the answer schema: {problem}")
    category = _CATEGORIES.get(raw["category"])
    if category is None:
        return Dropped(_placeholder(raw, shown), f"unknown category '{raw['category']}' (not one of the seven of the contract)")
    if category not in shown.categories:
        return Dropped(_placeholder(raw, shown), f"category '{category.value}' was not asked for (the configuration leaves it out)")
    hunks = shown.hunks_of(raw["path"])
    if not hunks or raw["path"] not in shown.texts:
        return Dropped(_placeholder(raw, shown), f"'{raw['path']}' is not one of the files shown to the model")
    placed = place(raw["line"], raw.get("end_line") or raw["line"], raw.get("code"), hunks)
    if isinstance(placed, str):
        return Dropped(_placeholder(raw, shown), placed)
    if not any(placed.line <= n <= placed.end_line for n in placed.hunk.changed):
        return Dropped(_placeholder(raw, shown), f"lines {placed.line}-{placed.end_line} are not lines this change added or modified")
    text = shown.texts[raw["path"]]
    suggestion = None
    if raw.get("fix") is not None:
        checked = check_fix(raw["fix"], placed, text)
        # A refused fix (outside the finding's lines, not parsing) leaves the finding
        # standing on its own: it is kept without a suggestion, and counted.
        suggestion = None if isinstance(checked, str) else checked
    shown_lines = dict(placed.hunk.lines)
    first = shown_lines[placed.line]
    return Finding(
        path=raw["path"],
        line=placed.line,
        end_line=placed.end_line,
        category=category,
        rule=f"llm-{category.value}",
        severity=_SEVERITIES[raw["severity"]],
        message=clean_message(raw["message"]),
        source="llm",
        suggestion=suggestion,
        code="\n".join(shown_lines[n] for n in range(placed.line, placed.end_line + 1)),
        column=len(first) - len(first.lstrip()) + 1,
        probe=_probe(raw) or "",
    )


def check_answer(content: str, shown: Shown) -> Checked:
    """Every finding of one answer, checked; raises AnswerError when the answer is unusable."""
    out = Checked()
    seen: set[tuple[str, int, Category | None]] = set()
    for raw in parse_answer(content):
        result = check_finding(raw, shown)
        if isinstance(result, Dropped):
            out.dropped.append(result)
            continue
        key = (result.path, result.line, result.category)
        if key in seen:
            out.dropped.append(Dropped(result, "the answer gives this finding twice"))
            continue
        seen.add(key)
        out.findings.append(result)
        if result.line != raw["line"]:
            out.corrected += 1
        if _probe(raw) is None:
            out.probes_dropped += 1
        if raw.get("fix") is not None and result.suggestion is None:
            out.fixes_dropped += 1
    return out


def unusable(shown: Shown, reason: str) -> list[Dropped]:
    """One entry per file of a request whose answer could not be read at all."""
    out = []
    for path in dict.fromkeys(h.path for h in shown.hunks):
        hunks: Sequence[TensorHunk] = shown.hunks_of(path)
        spans = ", ".join(f"{h.start}-{h.end}" for h in hunks)
        record = Finding(path=path, line=hunks[0].start, end_line=hunks[-1].end, category=None, rule="llm", severity=Severity.INFO, message="", source="llm")
        out.append(Dropped(record, f"{reason}; lines {spans} were not reviewed by the LLM"))
    return out
