"""One parse per file: the new version of a changed file, decoded, parsed by libcst, with
its imports resolved and its functions and classes located.

Position metadata is the expensive part, so it is resolved lazily, only for files where
a rule's prefilter hit or whose hunks need context.
"""

from __future__ import annotations

import io
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

TORCH_MARKERS = ("torch",)


class SourceProblem(Exception):
    """The file cannot be reviewed (binary, undecodable, does not parse); the text says why."""


def decode(data: bytes) -> str:
    if b"\0" in data[:8192]:
        raise SourceProblem("binary file, skipped")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise SourceProblem(f"bad encoding declaration ({exc}), skipped") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        where = f" at byte {exc.start}" if isinstance(exc, UnicodeDecodeError) else ""
        raise SourceProblem(f"not valid {encoding}{where}, skipped") from None
    if "\r" in text.replace("\r\n", ""):
        raise SourceProblem("uses lone carriage returns as line breaks, which git and Python number differently; skipped")
    return text


def mentions_torch(text: str) -> bool:
    return any(marker in text for marker in TORCH_MARKERS)


# ----------------------------------------------------------------------------- imports


@dataclass(frozen=True)
class ImportMap:
    """Local names bound by imports, to the qualified names they may stand for.

    A name imported in two ways (try/except ImportError) keeps both; lookups return them
    sorted, and callers accept any match, so results never depend on hash order.
    """

    module_level: Mapping[str, frozenset[str]]
    # Imports inside functions, keyed by the function node.
    local: Mapping[cst.CSTNode, Mapping[str, frozenset[str]]]
    statements: tuple[cst.CSTNode, ...] = ()

    def lookup(self, name: str, scopes: tuple[cst.CSTNode, ...] = ()) -> tuple[str, ...]:
        found: set[str] = set()
        for scope in scopes:
            found |= self.local.get(scope, {}).get(name, frozenset())
        found |= self.module_level.get(name, frozenset())
        return tuple(sorted(found))

    def module_alias(self, module: str) -> str | None:
        """The local name bound to exactly `module` at module level (`torch`, `T`), if any."""
        names = sorted(n for n, quals in self.module_level.items() if quals == frozenset((module,)))
        return names[0] if names else None

    def aliases_of(self, prefix: str) -> set[str]:
        """Every local name that is bound to `prefix` or something inside it."""
        names = set()
        for table in (self.module_level, *self.local.values()):
            for name, quals in table.items():
                if any(q == prefix or q.startswith(prefix + ".") for q in quals):
                    names.add(name)
        return names


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _bindings(stmt: cst.Import | cst.ImportFrom) -> Iterator[tuple[str, str]]:
    if isinstance(stmt, cst.Import):
        for alias in stmt.names:
            full = _dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full
            else:
                top = full.split(".", 1)[0]
                yield top, top
        return
    if stmt.relative or stmt.module is None or isinstance(stmt.names, cst.ImportStar):
        return
    base = _dotted(stmt.module)
    for alias in stmt.names:
        name = _dotted(alias.name)
        local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
        yield local, f"{base}.{name}"


def _statement_bodies(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The statements directly inside a compound statement (all its blocks)."""
    for child in node.children:
        if isinstance(child, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            yield from child.body
        elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)):
            yield from _statement_bodies(child)


def scan_imports(module: cst.Module) -> ImportMap:
    """Collect imports by walking statements only (never expressions): cheap."""
    module_level: dict[str, set[str]] = {}
    local: dict[cst.CSTNode, dict[str, set[str]]] = {}
    top_statements: list[cst.CSTNode] = []

    def walk(stmts: Iterator[cst.CSTNode] | list[cst.CSTNode] | tuple[cst.CSTNode, ...], function: cst.CSTNode | None) -> None:
        for stmt in stmts:
            if isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, (cst.Import, cst.ImportFrom)):
                        table = module_level if function is None else local.setdefault(function, {})
                        for name, qual in _bindings(small):
                            table.setdefault(name, set()).add(qual)
                        if function is None:
                            top_statements.append(stmt)
                continue
            inner = stmt if isinstance(stmt, cst.FunctionDef) else function
            walk(list(_statement_bodies(stmt)), inner)

    walk(module.body, None)
    return ImportMap(
        module_level={k: frozenset(v) for k, v in module_level.items()},
        local={fn: {k: frozenset(v) for k, v in table.items()} for fn, table in local.items()},
        statements=tuple(top_statements),
    )


# --------------------------------------------------------------------------- scopes


@dataclass(frozen=True)
class Scope:
    """A function, method or class, with its lines in the new file."""

    kind: str  # function | method | class
    name: str
    qualname: str
    node: cst.FunctionDef | cst.ClassDef = field(repr=False, compare=False)
    start: int
    end: int
    # Line of the `def`/`class` keyword (decorators come before it).
    header: int
    parents: tuple[cst.CSTNode, ...] = field(default=(), repr=False, compare=False)
    class_node: cst.ClassDef | None = field(default=None, repr=False, compare=False)

    def contains(self, line: int) -> bool:
        return self.start <= line <= self.end


@dataclass
class ParsedFile:
    path: str
    text: str
    module: cst.Module
    imports: ImportMap
    _wrapper: MetadataWrapper | None = field(default=None, repr=False)

    @cached_property
    def lines(self) -> list[str]:
        lines = self.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]

    @cached_property
    def newline(self) -> str:
        return "\r\n" if "\r\n" in self.text else "\n"

    @cached_property
    def positions(self) -> Mapping[cst.CSTNode, CodeRange]:
        wrapper = self._wrapper or MetadataWrapper(self.module, unsafe_skip_copy=True)
        return wrapper.resolve(PositionProvider)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        pos = self.positions[node]
        return pos.start.line, pos.end.line

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    @cached_property
    def scopes(self) -> list[Scope]:
        """Every function, method and class, outermost first."""
        found: list[Scope] = []

        def walk(stmts: list[cst.CSTNode] | tuple[cst.CSTNode, ...], prefix: str, parents: tuple[cst.CSTNode, ...], cls: cst.ClassDef | None) -> None:
            for stmt in stmts:
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    pos = self.positions[stmt]
                    header = self.positions[stmt.name].start.line
                    start = min([self.positions[d].start.line for d in stmt.decorators] + [header])
                    qual = f"{prefix}{stmt.name.value}"
                    if isinstance(stmt, cst.ClassDef):
                        kind = "class"
                    else:
                        kind = "method" if cls is not None and parents and parents[-1] is cls else "function"
                    found.append(Scope(kind, stmt.name.value, qual, stmt, start, pos.end.line, header, parents, cls))
                    inner_cls = stmt if isinstance(stmt, cst.ClassDef) else cls
                    walk(list(_statement_bodies(stmt)), qual + ".", (*parents, stmt), inner_cls)
                elif not isinstance(stmt, cst.SimpleStatementLine):
                    walk(list(_statement_bodies(stmt)), prefix, parents, cls)

        walk(self.module.body, "", (), None)
        return found

    def innermost_scope(self, line: int, kinds: tuple[str, ...] = ("function", "method", "class")) -> Scope | None:
        best: Scope | None = None
        for scope in self.scopes:
            if scope.kind in kinds and scope.contains(line) and (best is None or scope.start >= best.start):
                best = scope
        return best

    def import_lines(self) -> list[tuple[int, str]]:
        out = []
        for stmt in self.imports.statements:
            start, end = self.span(stmt)
            out.extend((n, self.lines[n - 1]) for n in range(start, end + 1))
        return out


def parse(path: str, text: str) -> ParsedFile:
    """Parse once. Raises SourceProblem with the parser's one-line reason."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        raise SourceProblem(f"does not parse (line {exc.raw_line}, column {exc.raw_column}: {exc.message.splitlines()[0] if exc.message else 'syntax error'}); skipped") from None
    except (RecursionError, ValueError) as exc:
        raise SourceProblem(f"does not parse ({type(exc).__name__}); skipped") from None
    return ParsedFile(path=path, text=text, module=module, imports=scan_imports(module))
