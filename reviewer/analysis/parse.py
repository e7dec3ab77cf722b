"""One parse per file: the new version of a changed file, decoded, parsed by libcst, with
its imports resolved and its functions and classes located.

Position metadata is the expensive part, so it is resolved lazily, only for files where
a rule's prefilter hit or whose hunks need context.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from review_copies.analysis.syntax import dotted, statement_bodies

TORCH_MARKERS = ("torch",)
T = TypeVar("T")


class SourceProblem(Exception):
    """The file cannot be reviewed (binary, undecodable, does not parse); the text says why."""


def decode_source(data: bytes) -> str:
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


# Array frameworks whose `x += y` and `x.at[i].set(v)` build new arrays, or whose tensors
# copy by other rules: a file that imports one of them and nothing of torch is not torch code,
# whatever its comments say ("see torch.optim.lr_scheduler").
OTHER_FRAMEWORKS = frozenset(("jax", "tensorflow", "mlx", "paddle", "jittor", "mindspore", "oneflow", "megengine"))
# Those whose layers and tensors have torch's method names (`named_parameters()`,
# `state_dict()`, `.numpy()`, `.detach()`): beside one, those uses do not say which framework
# a value belongs to (PaddleOCR's converters take both).
LOOKALIKE_FRAMEWORKS = frozenset(("paddle", "jittor", "mindspore", "oneflow", "megengine"))


def imported_packages(imports: ImportMap) -> frozenset[str]:
    """The top-level packages the file imports anything from, at any depth."""
    tables = (imports.module_level, *imports.local.values())
    return frozenset(q.split(".", 1)[0] for table in tables for qualnames in table.values() for q in qualnames)


def another_framework_only(imports: ImportMap) -> bool:
    """The file imports another array framework and no torch module."""
    packages = imported_packages(imports)
    return "torch" not in packages and bool(packages & OTHER_FRAMEWORKS)


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

    def resolve(self, name: str, scopes: tuple[cst.CSTNode, ...] = ()) -> tuple[str, ...]:
        """The qualified names a dotted name may stand for: `nn.Linear` -> `torch.nn.Linear`
        when `nn` is imported from torch."""
        head, _, rest = name.partition(".")
        if not head:
            return ()
        return tuple(f"{q}.{rest}" if rest else q for q in self.lookup(head, scopes))

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


def _bindings(stmt: cst.Import | cst.ImportFrom) -> Iterator[tuple[str, str]]:
    if isinstance(stmt, cst.Import):
        for alias in stmt.names:
            full = dotted(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full
            else:
                top = full.split(".", 1)[0]
                yield top, top
        return
    if stmt.relative or stmt.module is None or isinstance(stmt.names, cst.ImportStar):
        return
    base = dotted(stmt.module)
    for alias in stmt.names:
        name = dotted(alias.name)
        local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
        yield local, f"{base}.{name}"


# Calls that import a module and hand it back: `torch = pytest.importorskip("torch")` binds
# `torch` as `import torch` does.
_IMPORTING_CALLS = frozenset(("pytest.importorskip", "importorskip", "importlib.import_module", "import_module"))


def _imported_by_call(small: cst.BaseSmallStatement) -> tuple[str, str] | None:
    if not isinstance(small, cst.Assign) or len(small.targets) != 1 or not isinstance(small.targets[0].target, cst.Name):
        return None
    call = small.value
    if not isinstance(call, cst.Call) or dotted(call.func) not in _IMPORTING_CALLS or not call.args:
        return None
    first = call.args[0]
    if first.keyword is not None or not isinstance(first.value, cst.SimpleString):
        return None
    module = first.value.evaluated_value
    if not isinstance(module, str) or not module.replace(".", "").replace("_", "").isalnum():
        return None
    return small.targets[0].target.value, module


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
                    elif (bound := _imported_by_call(small)) is not None:
                        table = module_level if function is None else local.setdefault(function, {})
                        table.setdefault(bound[0], set()).add(bound[1])
                continue
            inner = stmt if isinstance(stmt, cst.FunctionDef) else function
            walk(list(statement_bodies(stmt)), inner)

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

    @property
    def enclosing_function(self) -> cst.FunctionDef | None:
        """The function this one is defined in (its closure's owner), None at class or module level."""
        return next((p for p in reversed(self.parents) if isinstance(p, cst.FunctionDef)), None)

    @property
    def takes_self(self) -> bool:
        """A method whose first parameter is the instance (or class): not a `@staticmethod`,
        to which a call passes its first argument there."""
        if self.kind != "method" or not isinstance(self.node, cst.FunctionDef):
            return False
        return not any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in self.node.decorators)


def is_test_path(path: str) -> bool:
    """A test's file (`tests/...`, `test_*.py`, `*_test.py`, `conftest.py`): code that checks
    results and runs once, never in a hot loop nor as a library's API."""
    parts = path.replace("\\", "/").split("/")
    name = parts[-1]
    return any(p in ("tests", "test", "testing") for p in parts[:-1]) or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


@dataclass
class ParsedFile:
    path: str
    text: str
    module: cst.Module
    imports: ImportMap
    _wrapper: MetadataWrapper | None = field(default=None, repr=False)
    # Statements left out of the analysis (nested too deeply for it), as notes to show.
    notes: tuple[str, ...] = ()
    # Python's own tree of the text libcst parsed (None: to be parsed when needed), and that
    # text where it differs from `text` (deep statements blanked, lines kept).
    _ast: ast.Module | None = field(default=None, repr=False, compare=False)
    _analysed_text: str | None = field(default=None, repr=False, compare=False)
    # Facts the analysis derives from the whole file (call sites, names read later), each
    # computed once: see `once`.
    _derived: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

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
        """Exact positions of every node: libcst's PositionProvider, the expensive part, so only
        resolved for files with something to report."""
        wrapper = self._wrapper or MetadataWrapper(self.module, unsafe_skip_copy=True)
        return wrapper.resolve(PositionProvider)

    @cached_property
    def _layout(self) -> tuple[dict[cst.CSTNode, tuple[int, int]], dict[cst.CSTNode, int]] | None:
        """Line spans of every statement and the `def`/`class` line of every definition, from
        Python's own parser (an order of magnitude cheaper than position metadata). None if
        the two trees do not line up."""
        tree = self._ast
        if tree is None:
            try:
                tree = ast.parse(self._analysed_text if self._analysed_text is not None else self.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
        spans: dict[cst.CSTNode, tuple[int, int]] = {}
        headers: dict[cst.CSTNode, int] = {}
        if not _pair_blocks(list(self.module.body), tree.body, spans, headers):
            return None
        return spans, headers

    @property
    def statement_lines(self) -> Mapping[cst.CSTNode, tuple[int, int]] | None:
        layout = self._layout
        return layout[0] if layout is not None else None

    def once(self, key: Hashable, compute: Callable[[], T]) -> T:
        """A fact about the whole file, computed on first use and kept with the parse."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def module_assignments(self) -> dict[str, list[cst.BaseExpression]]:
        """What each `NAME = ...` at the top of the file binds, in order (read once per file)."""

        def compute() -> dict[str, list[cst.BaseExpression]]:
            found: dict[str, list[cst.BaseExpression]] = {}
            for stmt in self.module.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name):
                            found.setdefault(small.targets[0].target.value, []).append(small.value)
            return found

        return self.once("module assignments", compute)

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        lines = self.statement_lines
        if lines is not None and node in lines:
            return lines[node]
        pos = self.positions[node]
        return pos.start.line, pos.end.line

    def line_of(self, node: cst.CSTNode) -> int:
        return self.span(node)[0]

    @cached_property
    def scopes(self) -> list[Scope]:
        """Every function, method and class, outermost first."""
        found: list[Scope] = []

        def walk(stmts: list[cst.CSTNode] | tuple[cst.CSTNode, ...], prefix: str, parents: tuple[cst.CSTNode, ...], cls: cst.ClassDef | None) -> None:
            for stmt in stmts:
                if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                    start, end = self.span(stmt)
                    header = self.headers.get(stmt) or self.positions[stmt.name].start.line
                    qual = f"{prefix}{stmt.name.value}"
                    if isinstance(stmt, cst.ClassDef):
                        kind = "class"
                    else:
                        kind = "method" if cls is not None and parents and parents[-1] is cls else "function"
                    found.append(Scope(kind, stmt.name.value, qual, stmt, start, end, header, parents, cls))
                    inner_cls = stmt if isinstance(stmt, cst.ClassDef) else cls
                    walk(list(statement_bodies(stmt)), qual + ".", (*parents, stmt), inner_cls)
                elif not isinstance(stmt, cst.SimpleStatementLine):
                    walk(list(statement_bodies(stmt)), prefix, parents, cls)

        walk(self.module.body, "", (), None)
        return found

    @property
    def headers(self) -> Mapping[cst.CSTNode, int]:
        """The `def`/`class` line of functions and classes (decorators come before it)."""
        layout = self._layout
        return layout[1] if layout is not None else {}

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


def _cst_blocks(stmt: cst.CSTNode) -> list[list[cst.CSTNode]]:
    """The statement lists inside a compound statement, in the order ast lists them."""
    if isinstance(stmt, cst.If):
        orelse = stmt.orelse
        tail: list[cst.CSTNode] = [orelse] if isinstance(orelse, cst.If) else list(_block(orelse.body)) if orelse is not None else []
        return [list(_block(stmt.body)), tail]
    if isinstance(stmt, (cst.For, cst.While)):
        return [list(_block(stmt.body)), list(_block(stmt.orelse.body)) if stmt.orelse is not None else []]
    if isinstance(stmt, (cst.With, cst.FunctionDef, cst.ClassDef)):
        return [list(_block(stmt.body))]
    if isinstance(stmt, (cst.Try, cst.TryStar)):
        return [
            list(_block(stmt.body)),
            *[list(_block(h.body)) for h in stmt.handlers],
            list(_block(stmt.orelse.body)) if stmt.orelse is not None else [],
            list(_block(stmt.finalbody.body)) if stmt.finalbody is not None else [],
        ]
    if isinstance(stmt, cst.Match):
        return [list(_block(c.body)) for c in stmt.cases]
    return []


def _ast_blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(node, ast.If | ast.For | ast.AsyncFor | ast.While):
        return [node.body, node.orelse]
    if isinstance(node, ast.With | ast.AsyncWith | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.body]
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        return [node.body, *[h.body for h in node.handlers], node.orelse, node.finalbody]  # type: ignore[attr-defined]
    if isinstance(node, ast.Match):
        return [c.body for c in node.cases]
    return []


def _block(body: cst.BaseSuite) -> list[cst.CSTNode]:
    if isinstance(body, cst.IndentedBlock):
        return list(body.body)
    return [body]  # a one-line suite: its small statements pair with ast statements below


def _pair_blocks(cst_stmts: list[cst.CSTNode], ast_stmts: list[ast.stmt], spans: dict[cst.CSTNode, tuple[int, int]], headers: dict[cst.CSTNode, int]) -> bool:
    """Walk both trees' statement lists side by side, recording each libcst statement's lines."""
    i = 0
    for stmt in cst_stmts:
        if isinstance(stmt, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            smalls = list(stmt.body)
            group = ast_stmts[i : i + len(smalls)]
            if len(group) != len(smalls):
                return False
            for small, node in zip(smalls, group):
                spans[small] = (node.lineno, node.end_lineno or node.lineno)
            spans[stmt] = (group[0].lineno, group[-1].end_lineno or group[-1].lineno)
            i += len(smalls)
            continue
        if i >= len(ast_stmts):
            return False
        node = ast_stmts[i]
        i += 1
        start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        spans[stmt] = (start, node.end_lineno or node.lineno)
        headers[stmt] = node.lineno
        blocks_cst, blocks_ast = _cst_blocks(stmt), _ast_blocks(node)
        if len(blocks_cst) != len(blocks_ast):
            return False
        for c_block, a_block in zip(blocks_cst, blocks_ast):
            if not _pair_blocks(c_block, a_block, spans, headers):
                return False
    return i == len(ast_stmts)


# Expression nesting a statement may have and still be analysed: the analysis recurses
# along the tree, and real code stays far below this (measured: 50 levels analyse fine,
# 150 exhaust Python's recursion limit).
MAX_DEPTH = 60
# Python's own refusals of code nested too deeply: such a file can never run.
_TOO_DEEP = ("too many nested parentheses", "too many levels of indentation", "too many statically nested blocks", "too deeply nested")


def parse(path: str, text: str) -> ParsedFile:
    """Parse once. Raises SourceProblem with the parser's one-line reason.

    Python's own parser looks first: it has limits, where libcst's native parser has none
    (3,000 nested parentheses crash it, a 20,000-term sum keeps it busy for minutes). Code
    Python refuses for its depth is skipped with a note; a statement nested too deeply for
    the analysis is blanked (its lines kept) and named in a note, and the rest of the file
    is reviewed."""
    tree, deep = _python_tree(text)
    analysed = _blank(text, deep) if deep else text
    try:
        module = cst.parse_module(analysed)
    except cst.ParserSyntaxError as exc:
        raise SourceProblem(f"does not parse (line {exc.raw_line}, column {exc.raw_column}: {exc.message.splitlines()[0] if exc.message else 'syntax error'}); skipped") from None
    except (RecursionError, ValueError) as exc:
        raise SourceProblem(f"does not parse ({type(exc).__name__}); skipped") from None
    notes = tuple(f"line {start}: a statement nested {depth} levels deep is left out of the analysis" for start, _end, _col, depth in deep)
    return ParsedFile(
        path=path, text=text, module=module, imports=scan_imports(module), notes=notes,
        _ast=None if deep else tree, _analysed_text=analysed if deep else None,
    )


def _python_tree(text: str) -> tuple[ast.Module | None, list[tuple[int, int, int, int]]]:
    """Python's tree of `text` and its statements nested deeper than MAX_DEPTH
    (first line, last line, column, depth); (None, []) when Python rejects it for another
    reason than depth (libcst then gives its own: it may know newer syntax)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        if any(words in (exc.msg or "") for words in _TOO_DEEP):
            raise SourceProblem(f"does not parse: {exc.msg} (line {exc.lineno}), as Python itself says; skipped") from None
        return None, []
    except (RecursionError, MemoryError) as exc:
        raise SourceProblem(f"does not parse: nested too deeply for Python itself ({type(exc).__name__}); skipped") from None
    except ValueError:
        return None, []
    worst: dict[ast.stmt, int] = {}
    stack: list[tuple[ast.AST, ast.stmt | None, int]] = [(tree, None, 0)]
    while stack:
        node, owner, depth = stack.pop()
        if isinstance(node, ast.stmt):
            owner, depth = node, 0
        elif owner is not None:
            worst[owner] = max(worst.get(owner, 0), depth)
        stack.extend((child, owner, depth + 1) for child in ast.iter_child_nodes(node))
    deep = [(s.lineno, s.end_lineno or s.lineno, s.col_offset, d) for s, d in worst.items() if d > MAX_DEPTH]
    return tree, sorted(deep)


def _blank(text: str, deep: list[tuple[int, int, int, int]]) -> str:
    """`text` with each deep statement replaced by `pass` and empty lines (line numbers kept)."""
    lines = text.splitlines(keepends=True)
    for start, end, col, _depth in deep:
        if start > len(lines):
            continue
        first = lines[start - 1]
        ending = "\r\n" if first.endswith("\r\n") else "\n"
        lines[start - 1] = first[:col] + "pass" + ending
        for i in range(start, min(end, len(lines))):
            lines[i] = ending
    return "".join(lines)
