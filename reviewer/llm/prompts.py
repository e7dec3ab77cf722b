"""Render the prompts of `prompts/` (data files, `string.Template`) for a set of hunks.

The system prompt is the same for every request of a review, so providers that cache
prompt prefixes reuse it. Per-category guidance and the rules' own VALID/INVALID
examples travel in the user message, and only for the categories whose signals occur in
the code shown. The code itself is fenced between markers whose id is a hash of the
fenced text: code cannot print the closing marker before it knows its own hash.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from review_copies.model.findings import Category, Finding
from review_copies.review import fixes
from review_copies.review.engine import example_job, review_file
from review_copies.review.hunks import TensorHunk
from review_copies.rules import Invalid, Rule

# Few-shot examples per category: enough to show the answer's shape, few enough to stay cheap.
EXAMPLE_RULES_PER_CATEGORY = 1
_STATIC_MESSAGE_CHARS = 240


@dataclass(frozen=True)
class CategoryGuide:
    category: Category
    summary: str
    decide: str
    signals: re.Pattern[str]
    wrong: str
    right: str


@dataclass(frozen=True)
class PromptBook:
    templates: dict[str, Template]
    guides: dict[Category, CategoryGuide]
    schema: dict[str, Any]
    phrases: dict[str, Template]

    def render(self, name: str, **values: str | int) -> str:
        return self.templates[name].substitute(values)

    def phrase(self, name: str, **values: str | int) -> str:
        return self.phrases[name].substitute(values)


_TEMPLATES = ("system", "user", "guidance", "category", "example_invalid", "example_valid", "file", "hunk", "schema_in_prompt")


@cache
def load_book() -> PromptBook:
    files = resources.files("review_copies.prompts")
    templates = {name: Template(files.joinpath(f"{name}.md").read_text(encoding="utf-8")) for name in _TEMPLATES}
    table = tomllib.loads(files.joinpath("categories.toml").read_text(encoding="utf-8"))
    guides = {}
    for category in Category:
        entry = table[category.value]
        guides[category] = CategoryGuide(
            category=category,
            summary=entry["summary"].strip(),
            decide=entry["decide"].strip(),
            signals=re.compile(entry["signals"], re.MULTILINE),
            wrong=entry["wrong"].lstrip("\n"),
            right=entry["right"].lstrip("\n"),
        )
    schema = json.loads(files.joinpath("answer.schema.json").read_text(encoding="utf-8"))
    phrases = {k: Template(v) for k, v in tomllib.loads(files.joinpath("phrases.toml").read_text(encoding="utf-8")).items()}
    return PromptBook(templates=templates, guides=guides, schema=schema, phrases=phrases)


# --------------------------------------------------------------------------- system


def render_system(book: PromptBook, categories: Sequence[Category]) -> str:
    listed = "\n".join(f"- `{c.value}`: {book.guides[c].summary}" for c in categories)
    return book.render("system", categories=listed)


def answer_schema(book: PromptBook, categories: Sequence[Category]) -> dict[str, Any]:
    """The schema of contract section 4, its category enum narrowed to those asked for."""
    schema = json.loads(json.dumps(book.schema))
    item = schema["properties"]["findings"]["items"]
    item["properties"]["category"]["enum"] = [c.value for c in categories]
    return schema


def render_schema_note(book: PromptBook, schema: dict[str, Any]) -> str:
    return book.render("schema_in_prompt", schema=json.dumps(schema, separators=(",", ":")))


# --------------------------------------------------------------------------- examples


def number_lines(lines: Sequence[str], marked: Iterable[int] = (), first: int = 1) -> str:
    """The numbered format of the hunks (TensorHunk.numbered), for any lines."""
    marks = set(marked)
    width = len(str(first + len(lines) - 1))
    return "\n".join(f"{'>' if n in marks else ' '}{n:>{width}}| {text}" for n, text in enumerate(lines, first))


@cache
def _rule_message(code: str, source: str, line: int) -> str:
    """What the rule itself says about its example: the answer shows a real message."""
    result = review_file(example_job("example.py", source, None, (code,)))
    hit = next((f for f in result.findings if f.line <= line <= f.end_line), None)
    if hit is None:
        return ""
    # Its first sentence: what is wrong, in the rule's words (the fix is in the answer's `fix`).
    return re.split(r"(?<=[.!?])\s+(?=[A-Z`])", hit.message, maxsplit=1)[0]


def _invalid_example(book: PromptBook, rule: type[Rule], case: Invalid) -> str:
    """One flagged example and the answer the validator keeps: a real message, and the
    finding's lines widened to hold its fix (a fix outside them would be refused)."""
    source = case.source
    lines = source.splitlines()
    start = end = case.line
    fix: dict[str, Any] | None = None
    if case.fixed is not None:
        suggestion = fixes.line_suggestion(source, case.fixed)
        if suggestion is not None:
            fix = {"start_line": suggestion.start_line, "end_line": suggestion.end_line, "replacement": suggestion.replacement}
            start, end = min(start, suggestion.start_line), max(end, suggestion.end_line)
    answer = {
        "path": "example.py",
        "line": start,
        "end_line": end,
        "category": rule.category.value,
        "severity": rule.severity.value,
        "message": _rule_message(rule.code, source, case.line) or rule.summary(),
        "code": "\n".join(lines[start - 1 : end]),
        "fix": fix,
        "probe": None,
    }
    numbered = number_lines(lines, range(start, end + 1))
    return book.render("example_invalid", rule=rule.code, line=case.line, numbered=numbered, answer=json.dumps(answer, ensure_ascii=False, separators=(",", ":")))


def rule_examples(book: PromptBook, rule: type[Rule]) -> list[str]:
    """One flagged example (one with a fix if the rule has it) and one the rule leaves alone.
    Rules that read the change (`Rule.follows_change`) have none: their examples only make
    sense beside the base version, which the model is not shown."""
    out: list[str] = []
    if rule.follows_change:
        return out
    invalid = next((c for c in rule.INVALID if c.fix is not None), rule.INVALID[0] if rule.INVALID else None)
    if invalid is not None:
        out.append(_invalid_example(book, rule, invalid))
    valid = next((c for c in rule.VALID if c.note), None)
    if valid is not None:
        # No line numbers: no answer points into it, and they cost a few tokens a line.
        out.append(book.render("example_valid", rule=rule.code, note=valid.note, code=valid.source.rstrip("\n")))
    return out


def categories_signalled(book: PromptBook, categories: Sequence[Category], code: str) -> list[Category]:
    return [c for c in categories if book.guides[c].signals.search(code)]


def render_guidance(book: PromptBook, categories: Sequence[Category], rules: Sequence[type[Rule]], examples: bool = True) -> str:
    if not categories:
        return ""
    sections = []
    for category in categories:
        guide = book.guides[category]
        chosen = [r for r in rules if r.category is category][:EXAMPLE_RULES_PER_CATEGORY] if examples else []
        shown = [e for rule in chosen for e in rule_examples(book, rule)]
        sections.append(
            book.render("category", category=category.value, decide=guide.decide, wrong=guide.wrong, right=guide.right, examples="".join(shown))
        )
    return book.render("guidance", sections="\n".join(sections))


# --------------------------------------------------------------------------- the change


@dataclass(frozen=True)
class FileBlock:
    """One file of one request: the imports its hunks use, the hunks, the static findings."""

    path: str
    hunks: tuple[TensorHunk, ...]
    static: tuple[Finding, ...] = ()

    @property
    def code(self) -> str:
        return "\n".join(text for h in self.hunks for _, text in h.lines)

    @property
    def changed_code(self) -> str:
        return "\n".join(text for h in self.hunks for n, text in h.lines if n in h.changed)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IMPORT_START = re.compile(r"\s*(import|from)\s")
_IMPORT_WORDS = {"import", "from", "as"}


def used_imports(hunks: Sequence[TensorHunk]) -> list[tuple[int, str]]:
    """The import statements whose names the hunks mention (the rest is noise to the model)."""
    if not hunks:
        return []
    words = {w for h in hunks for _, text in h.lines for w in _IDENTIFIER.findall(text)}
    statements: list[list[tuple[int, str]]] = []
    for number, text in hunks[0].imports:
        if _IMPORT_START.match(text) or not statements:
            statements.append([])
        statements[-1].append((number, text))
    kept = []
    for statement in statements:
        used = [(n, text) for n, text in statement if (set(_IDENTIFIER.findall(text)) - _IMPORT_WORDS) & words]
        if not used:
            continue
        if len(statement) == 1:
            kept.extend(statement)
            continue
        # A parenthesised import: its first and last line, and only the names the hunks use.
        lines = dict([statement[0], *used, statement[-1]])
        kept.extend(sorted(lines.items()))
    return kept


def _static_lines(book: PromptBook, block: FileBlock) -> str:
    if not block.static:
        return book.phrase("static_none")
    lines = []
    for f in block.static:
        message = " ".join(f.message.split())
        if len(message) > _STATIC_MESSAGE_CHARS:
            message = message[: _STATIC_MESSAGE_CHARS - 1] + "…"
        lines.append(book.phrase("static_line", line=f.line, rule=f.rule, category=f.category_label, message=message))
    return book.phrase("static_found", lines="\n".join(lines))


def fence_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def render_file(book: PromptBook, block: FileBlock) -> str:
    imports = used_imports(block.hunks)
    width = len(str(max([h.end for h in block.hunks] + [n for n, _ in imports] + [1])))
    imports_text = book.phrase("imports", lines="\n".join(f" {n:>{width}}| {text}" for n, text in imports)) if imports else ""
    hunks_text = "".join(
        book.render("hunk", title=h.title, start=h.start, end=h.end, numbered=_numbered(book, h, width)) for h in block.hunks
    )
    # The static findings quote the reviewed code (string literals included): they are
    # untrusted too, inside the fence, and part of what names it.
    static = _static_lines(book, block)
    nonce = fence_id(json.dumps([block.path, imports_text, hunks_text, static]))
    return book.render("file", nonce=nonce, path=json.dumps(block.path), imports=imports_text, hunks=hunks_text, static=static)


def _numbered(book: PromptBook, hunk: TensorHunk, width: int) -> str:
    """The hunk's lines as shown, with a marker where lines were left out (reviewer.llm.context)."""
    changed = set(hunk.changed)
    out = []
    expected = hunk.start
    for n, text in hunk.lines:
        if n > expected:
            out.append(_gap(book, n - expected, width))
        out.append(f"{'>' if n in changed else ' '}{n:>{width}}| {text}")
        expected = n + 1
    if hunk.lines and expected <= hunk.end:
        out.append(_gap(book, hunk.end - expected + 1, width))
    return "\n".join(out)


def _gap(book: PromptBook, count: int, width: int) -> str:
    lines = f"{count} line{'s' if count != 1 else ''}"
    return f" {'…':>{width}}| {book.phrase('gap', count=lines)}"


# How much guidance a request carries, fullest first: a hunk too large for a request with
# the rules' examples (a small local context window) is sent with less rather than not at all.
GUIDANCE_LEVELS = ("full", "no-examples", "none")


def render_user(
    book: PromptBook, blocks: Sequence[FileBlock], categories: Sequence[Category], rules: Sequence[type[Rule]], level: str = "full"
) -> str:
    # Guidance for what the change itself does; examples of the rules that could fire on the code shown.
    changed = "\n".join(b.changed_code for b in blocks)
    code = "\n".join(b.code for b in blocks)
    relevant = [r for r in rules if r.applies_to(code)]
    guided = categories_signalled(book, categories, changed) if level != "none" else []
    guidance = render_guidance(book, guided, relevant, examples=level == "full")
    files = "".join(render_file(book, b) for b in blocks)
    return book.render("user", guidance=guidance, files=files)
