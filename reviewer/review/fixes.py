"""Turn a rule's node replacement into a line-based suggestion, checked to parse."""

from __future__ import annotations

import difflib
import re

import libcst as cst

from review_copies.analysis.parse import ParsedFile
from review_copies.model.findings import Suggestion


def render(parsed: ParsedFile, old: cst.CSTNode, new: cst.CSTNode) -> Suggestion | None:
    """The smallest whole-line replacement that turns the file into the fixed one.

    Returns None when the fixed module does not parse or the change is not one block.
    """
    try:
        fixed = parsed.module.deep_replace(old, new)
    except Exception:  # libcst raises plain exceptions for replacements it cannot apply
        return None
    assert isinstance(fixed, cst.Module)
    return line_suggestion(parsed.text, fixed.code)


def line_suggestion(before: str, after: str) -> Suggestion | None:
    if before == after:
        return None
    try:
        cst.parse_module(after)
    except cst.ParserSyntaxError:
        return None
    old_lines = split_lines(before)
    new_lines = split_lines(after)
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
