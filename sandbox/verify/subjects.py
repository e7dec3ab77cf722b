"""What to run for a finding: the function or method around its line, with the module's
imports and the same-file definitions it uses, as written and with the fix applied.

The module itself is never imported (a training script runs its work at import time):
only the needed top-level statements are kept, every other line is blanked, so line
numbers stay those of the file. The probe process runs the kept statements one by one,
so an import that fails there only loses the names it binds.

Runs in the reviewer's process: libcst only, no torch.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.parse import ParsedFile, Scope, SourceProblem, parse
from review_copies.analysis.syntax import names_in
from review_copies.model.findings import Finding
from review_copies.review import fixes
from review_copies.sandbox.protocol import Side, Subject, Watch
from review_copies.sandbox.verify import param_facts
from review_copies.sandbox.verify.callers import Callers, CallSite


class NotRunnable(Exception):
    """Nothing can be run for this finding; the text says why (it becomes `not-run`)."""


# ------------------------------------------------------------------ top level


def _names_in(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(Names())
    return found


def _bound_by(stmt: cst.CSTNode) -> set[str]:
    """Names a top-level statement defines."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return {stmt.name.value}
    out: set[str] = set()
    if isinstance(stmt, cst.SimpleStatementLine):
        for small in stmt.body:
            if isinstance(small, cst.Import):
                for alias in small.names:
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        out.add(alias.asname.name.value)
                    else:
                        out.add(cst.Module([]).code_for_node(alias.name).split(".")[0])
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        out.add(alias.asname.name.value)
                    elif isinstance(alias.name, cst.Name):
                        out.add(alias.name.value)
            elif isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                for target in targets:
                    out |= {n for n in _names_in(target)} if isinstance(target, (cst.Name, cst.Tuple, cst.List)) else set()
        return out
    if isinstance(stmt, (cst.If, cst.Try)) and _definitions_only(stmt):
        for inner in _body_statements(stmt):
            out |= _bound_by(inner)
    return out


def _body_statements(stmt: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for child in stmt.children:
        if isinstance(child, cst.IndentedBlock):
            yield from child.body
        elif isinstance(child, (cst.Else, cst.If, cst.ExceptHandler, cst.Finally)):
            yield from _body_statements(child)


def _definitions_only(stmt: cst.CSTNode) -> bool:
    """A compound statement that only imports and defines (try: import x / if: X = 1)."""
    if _is_main_guard(stmt):
        return False
    for inner in _body_statements(stmt):
        if isinstance(inner, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(inner, cst.SimpleStatementLine) and all(_is_definition(s) for s in inner.body):
            continue
        if isinstance(inner, (cst.If, cst.Try)) and _definitions_only(inner):
            continue
        return False
    return True


def _is_definition(small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Expr):
        return not isinstance(small.value, cst.Call)  # a docstring, not work
    return isinstance(small, (cst.Import, cst.ImportFrom, cst.Assign, cst.AnnAssign, cst.Pass))


def _is_main_guard(stmt: cst.CSTNode) -> bool:
    return isinstance(stmt, cst.If) and "__main__" in cst.Module([]).code_for_node(stmt.test)


def _span(parsed: ParsedFile, stmt: cst.CSTNode) -> tuple[int, int]:
    start, end = parsed.span(stmt)
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) and stmt.decorators:
        start = min(start, *(parsed.line_of(d) for d in stmt.decorators))
    return start, end


def _keep(parsed: ParsedFile, target_stmt: cst.CSTNode, extra: set[str] = frozenset()) -> list[cst.CSTNode]:  # type: ignore[assignment]
    """The target's top-level statement and, transitively, the definitions it uses (and
    those named in `extra`: the file's classes and factories inputs may be built from)."""
    top = [s for s in parsed.module.body if not _is_main_guard(s)]
    definers: dict[str, list[cst.CSTNode]] = {}
    for stmt in top:
        for name in _bound_by(stmt):
            definers.setdefault(name, []).append(stmt)
    kept: list[cst.CSTNode] = [target_stmt]
    seen = {id(target_stmt)}
    todo = list(_names_in(target_stmt)) + sorted(extra)
    while todo:
        name = todo.pop()
        for stmt in definers.get(name, []):
            if id(stmt) in seen:
                continue
            seen.add(id(stmt))
            kept.append(stmt)
            todo.extend(_names_in(stmt))
    order = {id(s): i for i, s in enumerate(parsed.module.body)}
    return sorted(kept, key=lambda s: order[id(s)])


def _blank_except(parsed: ParsedFile, kept: list[cst.CSTNode]) -> str:
    keep_lines: set[int] = set()
    for stmt in kept:
        start, end = _span(parsed, stmt)
        keep_lines.update(range(start, end + 1))
    return "\n".join(line if n in keep_lines else "" for n, line in enumerate(parsed.lines, start=1)) + "\n"


# --------------------------------------------------------------- the function


def _callable_scope(parsed: ParsedFile, line: int) -> Scope:
    """The outermost function or method (of a top-level class) around the line."""
    chain = [s for s in parsed.scopes if s.contains(line)]
    for scope in chain:
        if scope.kind == "function" and not scope.parents:
            return scope
        if scope.kind == "method" and len(scope.parents) == 1:
            return scope
    if chain:
        raise NotRunnable(f"the code is inside `{chain[-1].qualname}`, which cannot be called on its own")
    raise NotRunnable("the finding is in module-level code, which the sandbox does not run (a script's top level is never imported)")


def _simple(node: cst.BaseExpression) -> str | None:
    """Source of a name, attribute chain, or constant subscript of those; None otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _simple(node.value)
        return f"{base}.{node.attr.value}" if base else None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        base = _simple(node.value)
        index = node.slice[0].slice
        if base and isinstance(index, cst.Index) and isinstance(index.value, (cst.SimpleString, cst.Integer)):
            return f"{base}[{index.value.value}]"
    return None


def _targets(node: cst.BaseExpression) -> list[str]:
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for el in node.elements for n in _targets(el.value)]
    name = _simple(node)
    return [name] if name else []


def _sources(value: cst.BaseExpression) -> list[str]:
    """What an assignment reads its value from: each name or attribute chain it reads (a
    called method's receiver, not the method), without a comprehension's own names; up to
    four."""
    found: list[str] = []
    local: set[str] = set()

    class Reads(cst.CSTVisitor):
        def visit_CompFor(self, node: cst.CompFor) -> None:
            local.update(names_in(node.target))

        def visit_Call(self, node: cst.Call) -> bool:
            func = node.func
            if isinstance(func, cst.Attribute):
                base = _simple(func.value)
                if base:
                    found.append(base)
                else:
                    func.value.visit(self)
            elif not isinstance(func, cst.Name):
                func.visit(self)
            for arg in node.args:
                arg.visit(self)
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            name = _simple(node)
            if name:
                found.append(name)
                return False
            return True

        def visit_Name(self, node: cst.Name) -> None:
            if node.value not in ("True", "False", "None"):
                found.append(node.value)

        def visit_Subscript(self, node: cst.Subscript) -> bool:
            node.value.visit(self)
            return False

    value.visit(Reads())
    return [s for s in dict.fromkeys(found) if s.split(".")[0].split("[")[0] not in local][:4]


def _watch_of(small: cst.BaseSmallStatement) -> tuple[tuple[str, ...], str]:
    if isinstance(small, cst.Assign):
        names = [n for t in small.targets for n in _targets(t.target)]
        return tuple(names), "assign"
    if isinstance(small, cst.AnnAssign) and small.value is not None:
        return tuple(_targets(small.target)), "assign"
    if isinstance(small, cst.AugAssign):
        return tuple(_targets(small.target)), "write"
    if isinstance(small, cst.Return):
        return (), "return"
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and isinstance(small.value.func, cst.Attribute):
        receiver = _simple(small.value.func.value)
        method = small.value.func.attr.value
        if receiver:
            return (receiver,), "write" if method.endswith("_") and not method.endswith("__") else "call"
    return (), "expr"


def _statement_at(parsed: ParsedFile, fn: cst.FunctionDef, line: int) -> tuple[cst.CSTNode, tuple[int, int], bool] | None:
    """The simple statement line at `line`, its lines, and whether a loop of `fn` holds it."""
    best: tuple[cst.CSTNode, tuple[int, int], bool] | None = None
    loops = 0

    class Find(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            nonlocal loops
            loops += 1

        def leave_For(self, node: cst.For) -> None:
            nonlocal loops
            loops -= 1

        def visit_While(self, node: cst.While) -> None:
            nonlocal loops
            loops += 1

        def leave_While(self, node: cst.While) -> None:
            nonlocal loops
            loops -= 1

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            nonlocal best
            start, end = parsed.span(node)
            if start <= line <= end:
                best = (node, (start, end), loops > 0)

        def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
            self.visit_SimpleStatementLine(node)  # type: ignore[arg-type]

    fn.body.visit(Find())
    return best


def watch_for(parsed: ParsedFile, scope: Scope, start: int, end: int) -> Watch:
    assert isinstance(scope.node, cst.FunctionDef)
    found = _statement_at(parsed, scope.node, start)
    if found is None:
        return Watch((start, end), (), "expr")
    node, span, in_loop = found
    span = (span[0], max(span[1], end))
    names: list[str] = []
    sources: list[str] = []
    kind = "expr"
    for small in getattr(node, "body", ()):
        small_names, small_kind = _watch_of(small)
        names.extend(small_names)
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
            sources.extend(s for s in _sources(small.value) if s not in small_names)
        if kind in ("expr", "call") or small_kind in ("return", "write"):
            kind = small_kind
    return Watch(span, tuple(dict.fromkeys(names)), kind, tuple(dict.fromkeys(sources))[:4], in_loop)


def side_for(path: str, text: str, start: int, end: int, callers: Callers | None = None, sites: list[CallSite] | None = None) -> Side:
    """One side of a subject; with `callers`, the repository's call sites of the function
    become its first inputs (`sites` reuses those of the other side)."""
    try:
        parsed = parse(path, text)
    except SourceProblem as problem:
        raise NotRunnable(str(problem)) from None
    scope = _callable_scope(parsed, start)
    if scope.kind == "method":
        cls = scope.parents[0]
        assert isinstance(cls, cst.ClassDef)
        target: tuple[str, ...] = (cls.name.value, scope.name)
        top = cls
        facts = param_facts.subject_facts(parsed.module, scope.node, cls)  # type: ignore[arg-type]
    else:
        target, top = (scope.name,), scope.node
        facts = param_facts.subject_facts(parsed.module, scope.node, None)  # type: ignore[arg-type]
    if sites is None:
        sites = callers.sites(path, text, target) if callers is not None else []
    if sites:
        facts = {**facts, "callers": [s.to_json() for s in sites]}
    keep = param_facts.providers(parsed.module) | {name for s in sites for name in s.uses}
    source = _blank_except(parsed, _keep(parsed, top, keep))
    return Side(source, path, target, (scope.start, scope.end), watch_for(parsed, scope, start, end), facts)


def fixed_lines(finding: Finding) -> tuple[int, int]:
    """Where the finding's statement is in the fixed file."""
    s = finding.suggestion
    assert s is not None
    added = len(fixes.split_lines(s.replacement)) - (s.end_line - s.start_line + 1)
    if finding.end_line < s.start_line:
        return finding.line, finding.end_line
    if finding.line > s.end_line:
        return finding.line + added, finding.end_line + added
    new_end = max(s.start_line, s.start_line + len(fixes.split_lines(s.replacement)) - 1)
    return max(s.start_line, min(finding.line, new_end)), new_end if finding.end_line >= s.end_line else min(finding.end_line, new_end)


def build(finding: Finding, text: str, callers: Callers | None = None) -> Subject:
    """Raises NotRunnable when the finding's code cannot be run on its own."""
    original = side_for(finding.path, text, finding.line, finding.end_line, callers)
    sites = [CallSite(c["site"], c["args"], c["init"], tuple(c["uses"])) for c in original.facts.get("callers", [])]
    if finding.suggestion is None:
        return Subject(original, None, "no fix is offered")
    fixed_text = fixes.apply(text, finding.suggestion)
    start, end = fixed_lines(finding)
    try:
        fixed = side_for(finding.path, fixed_text, start, end, sites=sites)
    except NotRunnable as exc:
        return Subject(original, None, f"the fixed file cannot be run: {exc}")
    if fixed.target != original.target:
        return Subject(original, None, f"the fix moves the code out of `{original.qualname}`")
    return Subject(original, fixed)
