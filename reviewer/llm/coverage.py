"""The coverage lines of the report: what the LLM saw, and every hunk it did not see, and why."""

from __future__ import annotations

from collections.abc import Iterable

from review_copies.review.hunks import TensorHunk


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def offline_line(reason: str, tensor_hunks: int) -> str:
    return f"LLM review: off ({reason}); the static rules alone reviewed {_plural(tensor_hunks, 'tensor hunk')}"


def nothing_to_send(model: str) -> str:
    return f"LLM review ({model}): no tensor hunks in this change, nothing was sent"


def no_categories(model: str) -> str:
    return f"LLM review ({model}): the configuration selects no category the LLM reviews, nothing was sent"


def summary_line(model: str, reviewed: int, total: int, requests: int, cached: int, lighter: int = 0, request_tokens: int = 0) -> str:
    """`lighter`: requests sent with shortened guidance to fit `request_tokens`."""
    line = f"LLM review ({model}): {reviewed} of {_plural(total, 'tensor hunk')} reviewed in {_plural(requests, 'request')}"
    said = []
    if cached:
        said.append(f"{cached} answered from the cache")
    if lighter:
        said.append(f"{lighter} with shortened guidance to fit llm-request-tokens = {request_tokens}")
    return line + (f" ({'; '.join(said)})" if said else "")


def left_out_lines(left_out: Iterable[tuple[TensorHunk, str]]) -> list[str]:
    """One line per reason, each listing the files and line ranges it left out."""
    by_reason: dict[str, dict[str, list[TensorHunk]]] = {}
    for hunk, reason in left_out:
        by_reason.setdefault(reason, {}).setdefault(hunk.path, []).append(hunk)
    lines = []
    for reason, files in by_reason.items():
        where = "; ".join(f"{path} lines {', '.join(f'{h.start}-{h.end}' for h in sorted(hunks, key=lambda h: h.start))}" for path, hunks in files.items())
        count = sum(len(hunks) for hunks in files.values())
        lines.append(f"not reviewed by the LLM, {_plural(count, 'tensor hunk')} ({reason}): {where}")
    return lines
