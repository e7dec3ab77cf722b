"""Tensor hunks: the parts of a change that handle tensors, with the context a reviewer
(human or LLM) needs: the enclosing function, method or class with its new-file line
numbers, the module's imports, and which of its lines changed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from review_copies.analysis.events import Bind, Call, Event, FunctionFlow, Use, Write
from review_copies.analysis.parse import ParsedFile, Scope
from review_copies.analysis.values import Kind

# How much of a very long function to show around its changed lines.
MAX_SCOPE_LINES = 160
WINDOW = 25
_TENSORISH = re.compile(
    r"\.(clone|detach|data|numpy|to|cpu|cuda|contiguous|backward|item|grad|view|reshape|copy_|"
    r"state_dict|parameters|requires_grad_?|expand|transpose|permute|squeeze|unsqueeze|flatten|"
    r"float|double|half|long|narrow|select|chunk|split|unbind|t|T|mT)\b|\b\w+_\(|no_grad|inference_mode|"
    r"requires_grad|from_numpy|as_tensor|deepcopy"
)
_TENSOR_KINDS = (Kind.TENSOR, Kind.STATE_DICT, Kind.PARAMETER_LIST, Kind.MODULE, Kind.OPTIMIZER, Kind.NDARRAY)


@dataclass(frozen=True)
class TensorHunk:
    path: str
    scope_kind: str  # function | method | class | module
    scope_name: str
    start: int  # first line shown
    end: int  # last line shown
    changed: tuple[int, ...]
    lines: tuple[tuple[int, str], ...]
    imports: tuple[tuple[int, str], ...]

    @property
    def title(self) -> str:
        return f"{self.scope_kind} {self.scope_name}" if self.scope_kind != "module" else "module level"

    def numbered(self, mark: str = ">") -> str:
        """The code with new-file line numbers, changed lines marked."""
        width = len(str(self.end))
        changed = set(self.changed)
        return "\n".join(f"{mark if n in changed else ' '}{n:>{width}}| {text}" for n, text in self.lines)


def tensor_lines(flows: Iterable[FunctionFlow]) -> set[int]:
    """Lines where the dataflow saw a tensor, module, optimizer or state_dict being used."""
    lines: set[int] = set()
    for flow in flows:
        for event in flow.events:
            if _touches_tensor(event):
                lines.add(event.line)
    return lines


def _touches_tensor(event: Event) -> bool:
    if isinstance(event, Write):
        return True
    if isinstance(event, (Use, Bind)):
        return event.value.kind in _TENSOR_KINDS
    if isinstance(event, Call):
        return bool(event.qualnames and any(q.startswith(("torch", "numpy")) for q in event.qualnames)) or event.result.kind in _TENSOR_KINDS
    return False


def tensor_hunks(parsed: ParsedFile, changed: Sequence[int], flow_lines: set[int]) -> list[TensorHunk]:
    """Group the changed lines by their innermost scope; keep the groups that touch tensors."""
    torch_names = parsed.imports.aliases_of("torch") | parsed.imports.aliases_of("numpy")
    name_pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, torch_names))) + r")\b") if torch_names else None
    groups: dict[Scope | None, list[int]] = {}
    for line in sorted(set(changed)):
        if 1 <= line <= len(parsed.lines):
            groups.setdefault(parsed.innermost_scope(line), []).append(line)
    hunks = []
    imports = tuple(parsed.import_lines())
    for scope, lines in groups.items():
        text = "\n".join(parsed.lines[n - 1] for n in lines)
        touches = any(n in flow_lines for n in lines) or bool(_TENSORISH.search(text)) or bool(name_pattern and name_pattern.search(text))
        if not touches:
            continue
        start, end = _window(parsed, scope, lines)
        shown = tuple((n, parsed.lines[n - 1]) for n in range(start, end + 1))
        kind = scope.kind if scope else "module"
        name = scope.qualname if scope else parsed.path
        hunks.append(TensorHunk(parsed.path, kind, name, start, end, tuple(lines), shown, imports))
    return sorted(hunks, key=lambda h: h.start)


def _window(parsed: ParsedFile, scope: Scope | None, lines: list[int]) -> tuple[int, int]:
    if scope is not None and scope.end - scope.start + 1 <= MAX_SCOPE_LINES:
        return scope.start, scope.end
    low = max(1, min(lines) - WINDOW)
    high = min(len(parsed.lines), max(lines) + WINDOW)
    if scope is not None:
        low, high = max(low, scope.start), min(high, scope.end)
    return low, high
