"""Turn a rule's node replacement into a line-based suggestion, checked to parse."""

from __future__ import annotations

import difflib
import io
import re
import tokenize

import libcst as cst

from review_copies.analysis.parse import ParsedFile
from review_copies.model.findings import Suggestion


def render(parsed: ParsedFile, old: cst.CSTNode, new: cst.CSTNode) -> Suggestion | None:
    """The smallest whole-line replacement that turns the file into the fixed one.

    Returns None when the fixed code does not parse or the change is not one block.
    The replacement is made in the statement that holds `old` and checked there: remade
    whole, the module cost each fix the size of the file, and a file with many findings
    took time quadratic in them (250 findings: 19 s). Where the statement's text cannot be
    rebuilt exactly, the whole module is remade as before.
    """
    local = _render_in_statement(parsed, old, new)
    if local is not _UNSURE:
        return local  # type: ignore[return-value]
    try:
        fixed = parsed.module.deep_replace(old, new)
    except Exception:  # libcst raises plain exceptions for replacements it cannot apply
        return None
    assert isinstance(fixed, cst.Module)
    return line_suggestion(parsed.text, fixed.code)


_UNSURE = object()


def _render_in_statement(parsed: ParsedFile, old: cst.CSTNode, new: cst.CSTNode) -> Suggestion | object | None:
    spans = parsed.statement_lines
    if spans is None:
        return _UNSURE
    parents = parsed.once("fixes.parents", lambda: _parents(parsed.module))
    stmt: cst.CSTNode | None = old
    while stmt is not None and not (isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) and stmt in spans):
        stmt = parents.get(stmt)
    if stmt is None:
        return _UNSURE
    start, end = spans[stmt]
    lines = parsed.once("fixes.lines", lambda: split_lines(parsed.text))
    if end > len(lines):
        return _UNSURE
    current = "".join(lines[start - 1 : end])
    indent = current[: len(current) - len(current.lstrip(" \t"))]
    bare = stmt.with_changes(leading_lines=())  # type: ignore[attr-defined]
    if _indented(parsed.module.code_for_node(bare), indent) != current:
        return _UNSURE  # the statement's text is not what its tree prints back: play safe
    try:
        if stmt is old:
            # The whole statement is replaced (by one statement, or a block of them).
            fixed = new.with_changes(leading_lines=()) if isinstance(new, (cst.SimpleStatementLine, cst.BaseCompoundStatement)) else new
        else:
            fixed = bare.deep_replace(old, new)
        code = parsed.module.code_for_node(fixed)
        cst.parse_module(code)
    except cst.ParserSyntaxError:
        return None
    except Exception:  # a replacement libcst cannot apply, or a node it cannot print alone
        return _UNSURE
    replaced = _indented(code, indent)
    if replaced == current:
        return None
    suggestion = line_suggestion_lines(split_lines(current), split_lines(replaced))
    if suggestion is None:
        return None
    offset = start - 1
    return Suggestion(suggestion.start_line + offset, suggestion.end_line + offset, suggestion.replacement, suggestion.original)


def _parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode]:
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in node.children:
            parents[child] = node
            stack.append(child)
    return parents


def _indented(code: str, indent: str) -> str:
    """`code` printed alone (at no indentation) as it stands at `indent`: every line gets
    the prefix but those inside a multi-line string, and blank lines."""
    if not indent:
        return code
    inside: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                inside.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return ""  # never equal to the file's text: the caller falls back
    out = []
    for number, line in enumerate(split_lines(code), start=1):
        out.append(line if number in inside or not line.strip() else indent + line)
    return "".join(out)


def line_suggestion(before: str, after: str) -> Suggestion | None:
    if before == after:
        return None
    try:
        cst.parse_module(after)
    except cst.ParserSyntaxError:
        return None
    return line_suggestion_lines(split_lines(before), split_lines(after))


def line_suggestion_lines(old_lines: list[str], new_lines: list[str]) -> Suggestion | None:
    """The smallest whole-line replacement between two lists of lines (1-based in `old_lines`)."""
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    changed = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if not changed:
        return None
    a_start, a_end = changed[0][1], changed[-1][2]
    b_start, b_end = changed[0][3], changed[-1][4]
    if a_start == a_end:  # pure insertion: anchor it on the line before
        if a_start == 0:
            a_end, b_end = 1, b_end + 1
        else:
            a_start, b_start = a_start - 1, b_start - 1
    return Suggestion(
        start_line=a_start + 1,
        end_line=a_end,
        replacement="".join(new_lines[b_start:b_end]),
        original="".join(old_lines[a_start:a_end]),
    )


def apply(text: str, suggestion: Suggestion) -> str:
    lines = split_lines(text)
    return "".join(lines[: suggestion.start_line - 1]) + suggestion.replacement + "".join(lines[suggestion.end_line :])


_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines as git counts them (only \n ends a line), each with its ending."""
    return _LINE.findall(text)
