"""What a change did to each function, read by comparing it with the same function (by
qualified name) in the file's base version: the protections it dropped and the writes it
made in place. A human reviewer reads the before and the after; the rules can too.

- **Dropped**: a changed statement equals a base statement once protections are taken
  out, and the base one had more of them: `.clone()`, `.detach()`, `.item()`, `.cpu()`,
  `.copy()`, `.contiguous()`, `copy.deepcopy(...)`, `float(...)`; or the base statement
  sat in a `with torch.no_grad():` (or `inference_mode`) block and the changed one does
  not.
- **Made in place**: a changed `x += e` or `x.op_(e)` whose base was `x = x + e` or
  `x = x.op(e)`.
- **Base writes**: the parameters the base function already wrote in place (`p += ...`,
  `p.op_(...)`, `p[...] = ...`): writing them is its contract, not something the change did.

Statements are compared as normalised source text, so renamed or restructured code is
simply not matched (the rules then fall back on what the new version says alone).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import libcst as cst

from review_copies.analysis.parse import ParsedFile, Scope

PROTECTIONS = (".clone()", ".detach()", ".item()", ".cpu()", ".copy()", ".contiguous()")
_WRAPPERS = ("copy.deepcopy(", "deepcopy(", "float(")
# Constructors that copy a tensor they are given (and warn): what a change may put in the
# place of an explicit copy.
CONSTRUCTORS = ("torch.tensor(", "tensor(", "torch.Tensor(", "torch.FloatTensor(", "torch.DoubleTensor(", "torch.LongTensor(")
_NON_COPYING = ("torch.as_tensor(", "as_tensor(")
_NO_GRAD = re.compile(r"^with torch\.(no_grad|inference_mode|set_grad_enabled)\(")
_AUG = re.compile(r"^([\w.\[\]'\"]+) (\+|-|\*|/|//|\*\*|@|%)= (.+)$")
_INPLACE_CALL = re.compile(r"^([\w.\[\]'\"]+)\.(\w+)_\((.*)\)$")


@dataclass(frozen=True)
class Dropped:
    """A protection the change took off a statement."""

    line: int  # the statement's first line in the new file
    what: str  # ".clone()", "copy.deepcopy(...)", "with torch.no_grad():" ...
    before: str  # the base statement, normalised


@dataclass(frozen=True)
class MadeInPlace:
    line: int
    target: str
    before: str


@dataclass(frozen=True)
class Constructed:
    """A changed statement that builds with `torch.tensor(...)` what the base version
    copied explicitly (`x.clone().detach()`) or took as is (`torch.as_tensor(x)`)."""

    line: int
    constructor: str  # "torch.tensor(...)"
    before: str


@dataclass(frozen=True)
class FunctionChange:
    qualname: str
    new: bool  # the function is not in the base version
    dropped: tuple[Dropped, ...] = ()
    made_in_place: tuple[MadeInPlace, ...] = ()
    base_writes: frozenset[str] = frozenset()
    constructed: tuple[Constructed, ...] = ()

    def dropped_at(self, line: int) -> list[Dropped]:
        return [d for d in self.dropped if d.line == line]


def normalise(code: str) -> str:
    return " ".join(code.split())


def _strip_wrapper(code: str, opener: str) -> tuple[str, int]:
    """`code` with every `opener(X)` replaced by X; how many were removed."""
    count = 0
    while True:
        at = _find_call(code, opener)
        if at < 0:
            return code, count
        depth, end = 0, -1
        for i in range(at + len(opener) - 1, len(code)):
            if code[i] == "(":
                depth += 1
            elif code[i] == ")":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end < 0:
            return code, count
        code = code[:at] + code[at + len(opener) : end] + code[end + 1 :]
        count += 1


def _find_call(code: str, opener: str) -> int:
    """Where `opener` starts as a call of its own (not `xfloat(` or `.deepcopy(`)."""
    for match in re.finditer(re.escape(opener), code):
        before = code[match.start() - 1] if match.start() else " "
        if not (before.isalnum() or before in "_."):
            return match.start()
    return -1


def stripped(code: str) -> tuple[str, Counter[str]]:
    """The statement without its protections, and which ones it had."""
    found: Counter[str] = Counter()
    for call in PROTECTIONS:
        n = code.count(call)
        if n:
            found[call] += n
            code = code.replace(call, "")
    for opener in _WRAPPERS:
        code, n = _strip_wrapper(code, opener)
        if n:
            found[opener.rstrip("(") + "(...)"] += n
    return code, found


def _unwrapped(code: str, openers: tuple[str, ...]) -> tuple[str, list[str]]:
    found = []
    for opener in openers:
        code, n = _strip_wrapper(code, opener)
        found += [opener + "...)"] * n
    return code, found


def out_of_place(code: str) -> str | None:
    """`x = x + e` for `x += e`, `x = x.op(e)` for `x.op_(e)`; None for anything else."""
    aug = _AUG.match(code)
    if aug:
        return f"{aug.group(1)} = {aug.group(1)} {aug.group(2)} {aug.group(3)}"
    call = _INPLACE_CALL.match(code)
    if call and not call.group(2).startswith("_"):
        return f"{call.group(1)} = {call.group(1)}.{call.group(2)}({call.group(3)})"
    return None


@dataclass(frozen=True)
class _Statement:
    line: int
    code: str  # normalised
    no_grad: bool


def _statements(parsed: ParsedFile, fn: cst.FunctionDef) -> list[_Statement]:
    out: list[_Statement] = []
    module = parsed.module

    class Walk(cst.CSTVisitor):
        def __init__(self) -> None:
            self.depth = 0

        def visit_With(self, node: cst.With) -> None:
            if _NO_GRAD.match(normalise(module.code_for_node(node).split("\n", 1)[0])):
                self.depth += 1

        def leave_With(self, node: cst.With) -> None:
            if _NO_GRAD.match(normalise(module.code_for_node(node).split("\n", 1)[0])):
                self.depth -= 1

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
            for small in node.body:
                out.append(_Statement(parsed.line_of(node), normalise(module.code_for_node(small)), self.depth > 0))
            return False

    fn.visit(Walk())
    return out


# `copy_or_set_(p, new)`, `nn.init.normal_(w)`: a function named with a trailing underscore,
# as torch names its in-place ops, writes the tensor it is given first.
# (A bare name or `nn.init`'s: after another receiver, `out.add_(p)` writes `out`, not `p`.)
_INPLACE_HELPER = re.compile(r"^(?:(?:torch\.)?(?:nn\.)?init\.)?[A-Za-z]\w*[^_\W]_\(\s*(\w+)\s*[,)]")


def _base_writes(parsed: ParsedFile, fn: cst.FunctionDef) -> frozenset[str]:
    params = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    written: set[str] = set()
    for stmt in _statements(parsed, fn):
        code = stmt.code
        for pattern in (_AUG, _INPLACE_CALL):
            match = pattern.match(code)
            if match:
                written.add(re.split(r"[.\[]", match.group(1))[0])
        subscript = re.match(r"^(\w+)\[.*\] = ", code)
        if subscript:
            written.add(subscript.group(1))
        copy_into = re.match(r"^(\w+)(\.data)?\.copy_\(", code)
        if copy_into:
            written.add(copy_into.group(1))
        helper = _INPLACE_HELPER.match(code)
        if helper:
            written.add(helper.group(1))
    return frozenset(written & params)


def _as_renamed(written: frozenset[str], old: cst.CSTNode, new: cst.CSTNode) -> frozenset[str]:
    """The base's written parameters under the new version's names: a change that renames
    `Q` to `q` in the same position keeps writing the same argument."""
    if not isinstance(old, cst.FunctionDef) or not isinstance(new, cst.FunctionDef):
        return written
    before = [p.name.value for p in (*old.params.posonly_params, *old.params.params)]
    after = [p.name.value for p in (*new.params.posonly_params, *new.params.params)]
    renamed = {after[i] for i, name in enumerate(before) if name in written and i < len(after)}
    return written | frozenset(renamed)


def _functions(parsed: ParsedFile) -> dict[str, Scope]:
    return {s.qualname: s for s in parsed.scopes if s.kind in ("function", "method")}


def compare(after: ParsedFile, before: ParsedFile, changed: frozenset[int]) -> dict[str, FunctionChange]:
    """For every function of `after` with a changed line, what the change did to it."""
    base = _functions(before)
    out: dict[str, FunctionChange] = {}
    for qualname, scope in _functions(after).items():
        if not any(scope.start <= line <= scope.end for line in changed):
            continue
        old = base.get(qualname)
        if old is None or not isinstance(old.node, cst.FunctionDef) or not isinstance(scope.node, cst.FunctionDef):
            out[qualname] = FunctionChange(qualname, new=old is None)
            continue
        old_statements = _statements(before, old.node)
        by_skeleton: dict[str, list[tuple[_Statement, Counter[str]]]] = {}
        for stmt in old_statements:
            skeleton, had = stripped(stmt.code)
            by_skeleton.setdefault(skeleton, []).append((stmt, had))
        old_codes = {s.code for s in old_statements}
        by_bare: dict[str, _Statement] = {}
        for stmt in old_statements:
            bare = _unwrapped(stmt.code, _NON_COPYING + CONSTRUCTORS)[0]
            by_bare.setdefault(stripped(bare)[0], stmt)
        dropped: list[Dropped] = []
        made: list[MadeInPlace] = []
        constructed: list[Constructed] = []
        for stmt in _statements(after, scope.node):
            if stmt.line not in changed:
                continue
            skeleton, has = stripped(stmt.code)
            candidates = by_skeleton.get(skeleton, [])
            # The very statement was in the base version (spikingjelly's neuron, moved under a
            # new branch beside its `.clone()` arm): it dropped nothing, whatever its twin had.
            same = [c for c in candidates if c[0].code == stmt.code]
            for old_stmt, had in same or candidates:
                lost = had - has
                if lost:
                    dropped.extend(Dropped(stmt.line, what, old_stmt.code) for what in sorted(lost))
                    break
                if old_stmt.no_grad and not stmt.no_grad:
                    dropped.append(Dropped(stmt.line, "with torch.no_grad():", old_stmt.code))
                    break
            bare, ctors = _unwrapped(stmt.code, CONSTRUCTORS)
            if ctors and stmt.code not in old_codes:
                old_stmt = by_bare.get(stripped(bare)[0])
                if old_stmt is not None and not _unwrapped(old_stmt.code, CONSTRUCTORS)[1]:
                    constructed.append(Constructed(stmt.line, ctors[0], old_stmt.code))
            plain = out_of_place(stmt.code)
            if plain is not None and plain in old_codes:
                target = (_AUG.match(stmt.code) or _INPLACE_CALL.match(stmt.code)).group(1)  # type: ignore[union-attr]
                made.append(MadeInPlace(stmt.line, target, plain))
        base_writes = _as_renamed(_base_writes(before, old.node), old.node, scope.node)
        out[qualname] = FunctionChange(qualname, False, tuple(dropped), tuple(made), base_writes, tuple(constructed))
    return out
