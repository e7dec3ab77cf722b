"""The index of a repository, asked lazily: a question about a class or a function reads
only the files that mention it (found with `git grep`), and each file's facts are cached
on disk by the hash of its content, so a re-run, or a review of another commit that left
the file alone, costs a lookup. Deterministic: files are read in path order, and when two
files define the same name the answer must hold for all of them."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import posixpath
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from review_copies.analysis.parse import is_test_path
from review_copies.analysis.semantics import api
from review_copies.analysis.signature import Signature
from review_copies.index.arrays import callers_pass_arrays
from review_copies.index.calls import calls_passing, passed_at, reaching, reading_again
from review_copies.index.facts import Facts, file_facts
from review_copies.source.tree import RepoFiles

# Bump when the facts' meaning changes.
INDEX_VERSION = 43


@dataclass(frozen=True)
class Kept:
    """A method that keeps one of its arguments past the call."""

    path: str
    cls: str
    method: str
    param: str
    attr: str
    line: int
    how: str  # "accumulates" | "stores"


@dataclass
class RepoIndex:
    files: RepoFiles | None
    cache_dir: Path | None = None
    # This file's own text (the new version), asked first and never read from the repository.
    here: tuple[str, str] | None = None
    _facts: dict[str, Facts] = field(default_factory=dict)
    _imports: dict[tuple[str, str, str], bool] = field(default_factory=dict)
    _grad_off_files: frozenset[str] | None = None

    def facts(self, path: str) -> Facts | None:
        if path in self._facts:
            return self._facts[path]
        here = self.here is not None and path == self.here[0]
        # A commit's file is known by its object id: a warm cache answers without reading it.
        blob = None if here or self.files is None else self.files.blob(path)
        if blob is not None:
            facts = self._cached(f"blob\0{blob}", lambda: self.files.read(path) if self.files is not None else None)
        else:
            text = self.here[1] if here and self.here is not None else (self.files.read(path) if self.files is not None else None)
            facts = self._cached(text, lambda: text) if text is not None else None
        if facts is None:
            return None
        self._facts[path] = facts
        return facts

    def _cached(self, identity: str, text_of: Callable[[], str | None]) -> Facts | None:
        """Facts cached under the file's identity (its text, or its object id at a commit)."""
        key = hashlib.sha256(f"{INDEX_VERSION}\0{identity}".encode()).hexdigest()
        path = self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir is not None else None
        if path is not None:
            with contextlib.suppress(OSError, ValueError):
                return json.loads(path.read_text(encoding="utf-8"))
        text = text_of()
        if text is None:
            return None
        facts = file_facts(text)
        if path is not None:
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(facts, handle)
                os.replace(tmp, path)
        return facts

    def paths_mentioning(self, word: str) -> list[str]:
        """The repository's files whose text holds `word`, this file first."""
        here = [self.here[0]] if self.here is not None and word in self.here[1] else []
        others = self.files.mentioning(word) if self.files is not None else []
        return here + [p for p in others if not self.here or p != self.here[0]]

    def keeps(self, cls: str, method: str, position: int | None, keyword: str | None) -> Kept | None:
        """Whether `cls.method` keeps the argument at `position` (after `self`) or passed as
        `keyword`: every class of that name in the repository must (None otherwise)."""
        found: list[Kept] = []
        for path in self.paths_mentioning(f"class {cls}"):
            facts = self.facts(path)
            info: dict[str, Any] | None = (facts or {}).get("classes", {}).get(cls)
            if info is None:
                continue
            fn = info["methods"].get(method)
            if fn is None:
                return None
            params = fn["params"][_after_self(fn) :]
            param = keyword if keyword is not None else (params[position] if position is not None and position < len(params) else None)
            kept = fn["keeps"].get(param) if param else None
            if kept is None:
                return None
            found.append(Kept(path, cls, method, param, kept[0], kept[1], kept[2]))
        return found[0] if found else None

    def follows_saving_layer(self, cls: str) -> bool:
        """Whether some `nn.Sequential` of the repository puts a `cls` right after a layer that
        saves its output for backward (`nn.Tanh()`, `nn.ReLU()`): there, `cls`'s input is a
        tensor autograd needs unchanged."""
        for path in self.paths_mentioning(f"{cls}("):
            facts = self.facts(path) or {}
            # `nn.Linear(...)`, or a bare `Linear(...)` imported from torch.nn, is torch's class.
            theirs = {"nn", "torch.nn"} | ({""} if {cls, "*"} & set(facts.get("nn_names", ())) else set())
            for layers in facts.get("sequences", []):
                for before, here in itertools.pairwise(layers):
                    owner, _, name = here.rpartition(".")
                    if name == cls and owner not in theirs and before.rpartition(".")[2] in api.MODULE_SAVES_OUTPUT:
                        return True
        return False

    def callers_drop(self, name: str, position: int | None, keyword: str | None, accepts: Signature | None = None, depth: int = 2, owner: tuple[str, str] | None = None) -> bool | None:
        """Whether every call of `name` in the repository that passes a name for the
        parameter at `position` (after `self` for a method) or `keyword` never reads that
        name again: True when each does so and one of them is outside the tests, False when
        one reads it again or passes something else that may be shared (an attribute, a
        subscript), None when no call outside the tests passes it. With `accepts`, a call
        that could not bind to that signature is another function's and is left out. A
        caller that hands on its own parameter and never reads it again is asked about its
        own callers in turn (`depth` levels): a pass-through wrapper drops what its callers drop.
        With `owner` (the method's file and class), a `super().name(...)` that cannot reach
        that class's method is left out (`calls.reaching`)."""
        seen = False
        for path, call, where in calls_passing(self, name, position, keyword, accepts, reaching(self, owner)):
            passed = passed_at(call, where)
            if passed is not None and passed in call.get("through", ()) and depth > 1:
                if self._wrapper_callers_drop(path, call, passed, depth - 1) is not True:
                    return False
            elif passed is None or passed in call["kept"]:
                return False  # something that may be shared, or a name read again
            # A test that checks only the result says nothing of how real callers use
            # their tensor afterwards (a library's users are not in the repository).
            seen = seen or not is_test_path(path)
        return True if seen else None

    def caller_reading_again(self, name: str, position: int | None, keyword: str | None, accepts: Signature | None = None, owner: tuple[str, str] | None = None) -> tuple[str, int, str] | None:
        """Where a call of `name` passes a name for the parameter and reads it again (`calls.reading_again`)."""
        return reading_again(self, name, position, keyword, accepts, reaching(self, owner))

    def _wrapper_callers_drop(self, path: str, call: Facts, param: str, depth: int) -> bool | None:
        """`callers_drop` for the function that made `call` in `path`, about its parameter
        `param` that it passed on; every definition of that name in the file must take
        `param` at the same place."""
        caller, kind = call.get("in", ("", "module"))
        if kind == "module":
            return None
        facts = self.facts(path) or {}
        defs = [facts.get("functions", {}).get(caller)] if kind == "function" else [c["methods"].get(caller) for c in facts.get("classes", {}).values()]
        passed = [fn["params"][_after_self(fn, kind) :] for fn in defs if fn is not None]
        places = {params.index(param) for params in passed if param in params}
        if len(places) != 1:
            return None
        return self.callers_drop(caller, places.pop(), param, None, depth)

    def instance_names(self, cls: str) -> frozenset[str]:
        """The names the repository binds instances of the class `cls` to, where it builds
        them (`chooser = Chooser(...)`, `self.chooser = Chooser.from_pb(...)`, a keyword
        argument `chooser=Chooser(...)`): a call of the instance, `batch.chooser(...)`, is a
        call of `cls.__call__`. An instance reached another way (a list, a factory) is not
        seen, so the answer is only as complete as these bindings."""
        binding = re.compile(rf"(?<![\w.])(?:self\.)?(\w+)\s*(?::[^=\n]+)?=\s*{re.escape(cls)}(?:\.from_\w+)?\(")
        return frozenset(m.group(1) for path in self.paths_mentioning(f"{cls}") for m in binding.finditer(self.text(path) or ""))

    def instance_callers_drop(self, cls: str, position: int | None, keyword: str | None, accepts: Signature | None = None) -> bool | None:
        """`callers_drop` for `cls.__call__`: over the calls of every name an instance of
        `cls` is bound to (`instance_names`); False as soon as one of them reads again."""
        answers = [self.callers_drop(name, position, keyword, accepts) for name in sorted(self.instance_names(cls))]
        return False if False in answers else (True if True in answers else None)

    def instance_callers_pass_arrays(self, cls: str, position: int | None, keyword: str | None) -> bool:
        """`callers_pass_arrays` for `cls.__call__`: every call of a name an instance of `cls`
        is bound to passes a NumPy array there, and there is one (`self.neig_enc(graph,
        emb)`, with `graph` what a function of the file builds with `np.zeros`)."""
        names = sorted(self.instance_names(cls))
        called = [name for name in names if next(calls_passing(self, name, position, keyword), None) is not None]
        return bool(called) and all(callers_pass_arrays(self, name, position, keyword) for name in called)

    def _functions(self, name: str) -> Iterator[Facts]:
        """Every module-level definition of the function `name` in the repository."""
        for path in self.paths_mentioning(f"def {name}("):
            fn = (self.facts(path) or {}).get("functions", {}).get(name)
            if fn is not None:
                yield fn

    def only_reads(self, name: str, position: int | None, keyword: str | None) -> bool:
        """Whether every definition of the function `name` in the repository (one at least)
        only looks into the argument at `position` or passed as `keyword` (the index's
        `reads`: no write anywhere in the body, and the argument only indexed or asked for
        its items)."""
        found = False
        for fn in self._functions(name):
            param = keyword if keyword is not None else (fn["params"][position] if position is not None and position < len(fn["params"]) else None)
            if param is None or param not in fn.get("reads", ()):
                return False
            found = True
        return found

    def changes_nothing(self, name: str) -> bool:
        """Whether every definition of the function `name` in the repository (one at least)
        changes no tensor itself: no in-place write but into containers it builds, no
        optimizer step, backward or `load_state_dict` (the index's `mutates`). What the
        functions it calls do is not followed."""
        found = False
        for fn in self._functions(name):
            if fn.get("mutates", True):
                return False
            found = True
        return found

    def returns_no_graph(self, name: str) -> bool:
        """Whether every definition of the function or method `name` in the repository runs
        with autograd off by its decorator (`@torch.no_grad()`) or returns only values that
        can carry no graph (`x.new_zeros(n, dtype=torch.long)`), and there is one; abstract
        declarations (`raise NotImplementedError`) are not definitions."""
        return _all_without_graph(_definitions(self, name)) is True

    def hands_on_another_objects_result(self, name: str, cls: str = "") -> bool:
        """Whether every definition of the method `name` (in the classes named `cls`, when
        given) returns only what a method of an object it holds computes (`return
        self.crf.decode(emissions, mask)`), and there is one: what the call hands back, a
        graph or none, is unknown here, not a forward pass's output."""
        defs = _methods_of(self, cls, name) if cls else _definitions(self, name)
        return _every_definition(defs, lambda fn: bool(fn.get("delegates"))) is True

    def called_grad_off(self, name: str, kind: str, depth: int = 3, origin: str | None = None, accepts: Signature | None = None) -> bool:
        """Whether every call of the function `name` outside the tests runs with autograd off,
        and there is one: under `with torch.no_grad():`, from a function decorated so, or from
        a function that is itself only ever called so (followed `depth` calls up). Tests
        neither vouch nor veto: they call helpers however is handy. Only functions and private
        methods are followed: a public method may be called by a framework the repository
        does not show (a trainer's `training_step`, a module's `forward`). `origin`, the file
        that defines the function: a file that defines a function of the same name, or
        imports it from another module, calls that one (recipes that each have their own
        `beam_search.py` and `decode_dataset`), not this one. `accepts`, what the function
        takes: a call that could not bind to it (`net.load_from(weights=w)` beside
        `load_from(self, weights, n_block, n_unit)`) calls another of the same name."""
        if not _visible(name, kind):
            return False
        seen = False
        for path in self.paths_mentioning(name[:-1] if kind == "table" else f"{name}("):
            if is_test_path(path):
                continue
            facts = self.facts(path) or {}
            if kind == "function" and origin is not None and path != origin and (name in facts.get("functions", {}) or self._imports_another(path, name, origin)):
                continue
            for call in facts.get("calls", []):
                if call["callee"] != name or (accepts is not None and not accepts.admits(call)):
                    continue
                if not call.get("off"):
                    caller, caller_kind = call.get("in", ("", "module"))
                    if depth <= 1 or caller == name or not self.called_grad_off(caller, caller_kind, depth - 1, path):
                        return False
                seen = True
        if kind == "function" and origin is not None:
            # Reached through a dispatch table of its file (`EXPERIMENTS[name](model, ...)` under
            # `with torch.no_grad():`): every call through the table counts as a call of it.
            for table, held in sorted(((self.facts(origin) or {}).get("tables") or {}).items()):
                if name in held:
                    if not self.called_grad_off(f"{table}[]", "table", depth, None):
                        return False
                    seen = True
        return seen

    def text(self, path: str) -> str | None:
        if self.here is not None and path == self.here[0]:
            return self.here[1]
        return self.files.read(path) if self.files is not None else None

    def _imports_another(self, path: str, name: str, origin: str) -> bool:
        """Does `path` take `name` from a module that is not the file `origin`?
        (`from beam_search import search` beside another recipe's `beam_search.py`.)"""
        key = (path, name, origin)
        if key not in self._imports:
            self._imports[key] = _read_imports_another(self.text, path, name, origin)
        return self._imports[key]


    def grad_off_at_import(self, path: str) -> bool:
        """Whether importing the file `path` turns autograd off for the whole process: a
        statement at module level, `torch.set_grad_enabled(False)`, in the file itself or in
        the `__init__` of a package that holds it (an inference server's `models/__init__.py`).
        Python runs every enclosing package's `__init__` before the module, so whatever the
        file defines runs with autograd off unless something turns it back on."""
        folder = posixpath.dirname(path)
        candidates = [path]
        while folder:
            candidates.append(f"{folder}/__init__.py")
            folder = posixpath.dirname(folder)
        if self._grad_off_files is None:
            # One `git grep` per review; then only the files that name it are read.
            self._grad_off_files = frozenset(p for p in self.paths_mentioning("set_grad_enabled") if _GRAD_OFF_AT_IMPORT.search(self.text(p) or ""))
        return any(c in self._grad_off_files for c in candidates)

    def only_referenced(self, name: str) -> bool:
        """Whether the private method `name` is never called by name outside the tests, but is
        taken as a value there (`{Linear: self._init_linear}`, `hooks.append(self._hook)`):
        it is reached through a table or a callback, and from where the index cannot say."""
        if not _visible(name, "method") or not name.startswith("_"):
            return False
        reference = re.compile(rf"\.{re.escape(name)}\b(?!\s*\()")
        found = False
        for path in self.paths_mentioning(name):
            if is_test_path(path):
                continue
            if any(call["callee"] == name for call in (self.facts(path) or {}).get("calls", [])):
                return False
            text = self.text(path)
            found = found or bool(text and reference.search(text))
        return found

    def builds_frozen(self, cls: str) -> bool:
        """Whether every class named `cls` in the repository turns off grad for all its
        parameters in its constructor (`for p in self.parameters(): p.requires_grad =
        False`), and there is one: its output holds a graph only through its input."""
        infos = [info for path in self.paths_mentioning(f"class {cls}") if (info := (self.facts(path) or {}).get("classes", {}).get(cls)) is not None]
        return bool(infos) and all(info.get("frozen") for info in infos)

    def method_returns_no_graph(self, cls: str, method: str) -> bool | None:
        """Whether `cls.method` runs with autograd off by its decorator or returns only
        values that can carry no graph, for every class of
        that name in the repository that defines it; None when no class of that name defines
        it here (it is inherited, or the class lives elsewhere)."""
        return _all_without_graph(_methods_of(self, cls, method))


# Column 0 is module level: a call inside a function or a block is indented.
_GRAD_OFF_AT_IMPORT = re.compile(r"^(?:torch\.)?(?:_C\._)?set_grad_enabled\(\s*(?:mode\s*=\s*)?False\s*\)", re.MULTILINE)
_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(?:\(([^)]*)\)|([^\n#]+))", re.MULTILINE)


def _names_file(module: str, importer: str, target: str, defines: Callable[[str], bool | None]) -> bool:
    """Can `from module import ...` in the file `importer` mean the file `target`? The first
    of these that exists is the one imported: a relative import's file, a sibling module
    (scripts run from their folder), a path from the repository's root; when none exists,
    any folder's `module` path (a package under `src/`). A file that is not `target` means
    it only if it does not define the name itself (a package's `__init__` re-exporting it).
    `defines(path)`: whether the file defines the name, None when there is no such file."""
    folder = posixpath.dirname(importer)
    dots = len(module) - len(module.lstrip("."))
    rest = module[dots:].replace(".", "/")
    if dots:
        base = folder
        for _ in range(dots - 1):
            base = posixpath.dirname(base)
        stems = [posixpath.join(base, rest) if rest else base]
    else:
        stems = [posixpath.join(folder, rest), rest]
    for stem in stems:
        for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
            if candidate == target:
                return True
            own = defines(candidate)
            if own is not None:
                return not own
    return not dots and (target.endswith(f"/{rest}.py") or target.endswith(f"/{rest}/__init__.py"))


def _after_self(fn: Facts, kind: str = "method") -> int:
    """How many leading parameters a call does not pass: `self` for a method, none for a
    function or a `@staticmethod`."""
    return 1 if kind == "method" and not fn.get("static") else 0


# Methods a framework calls for the repository: a module's `forward`, an optimizer's `step`,
# a trainer's `training_step` and hooks, dunders. Their calls are not all written out in it.
_FRAMEWORK_CALLED = re.compile(r"^(?:forward|step|backward|fit|train|run|setup|teardown|\w*_step|on_\w+|configure_\w+|\w*_hook|__\w+__)$")


def _read_imports_another(read: Callable[[str], str | None], path: str, name: str, origin: str) -> bool:
    text = read(path)
    if not text:
        return False
    definition = re.compile(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(name)}\b", re.MULTILINE)

    def defines(candidate: str) -> bool | None:
        other = read(candidate)
        return None if other is None else bool(definition.search(other))

    for match in _FROM_IMPORT.finditer(text):
        names = {part.split(" as ")[0].strip() for part in (match.group(2) or match.group(3)).replace("\n", " ").split(",")}
        if name in names:
            return not _names_file(match.group(1), path, origin, defines)
    return False


def _visible(name: str, kind: str) -> bool:
    """Whether every call of the function is written out in the repository: a module-level
    function or a method is called by name (a handler's `eval_batch` from the `@torch.no_grad()`
    loop that owns it), a dispatch table by its name and a key (`TABLE[key](...)`, kind
    "table"); a method a framework calls for the repository is not."""
    return bool(name) and (kind in ("function", "table") or (kind == "method" and not _FRAMEWORK_CALLED.match(name)))


def _definitions(index: RepoIndex, name: str) -> Iterator[Facts | None]:
    """Each function and method the repository defines under `name`."""
    for path in index.paths_mentioning(f"def {name}("):
        facts = index.facts(path) or {}
        yield facts.get("functions", {}).get(name)
        yield from (c["methods"].get(name) for c in facts.get("classes", {}).values())


def grad_flag_setters(index: RepoIndex, name: str) -> list[Facts]:
    """How each definition of the function or method `name` sets the grad flag of the
    modules it is handed (the index's `grad_flags`); empty unless every definition (one at
    least) sets them."""
    found = []
    for fn in _definitions(index, name):
        if fn is None:
            continue  # (the file's other classes and functions)
        if fn.get("grad_flags") is None:
            return []
        found.append(fn["grad_flags"])
    return found


def _methods_of(index: RepoIndex, cls: str, method: str) -> Iterator[Facts | None]:
    """`cls.method` in each class of that name the repository defines (None where one
    does not define it)."""
    for path in index.paths_mentioning(f"class {cls}"):
        info = (index.facts(path) or {}).get("classes", {}).get(cls)
        yield info["methods"].get(method) if info is not None else None


def _all_without_graph(defs: Iterable[Facts | None]) -> bool | None:
    """Whether every definition runs under a grad-off decorator or returns only graph-free
    values, None when there is none."""
    return _every_definition(defs, lambda fn: bool(fn.get("grad_off") or fn.get("no_graph")))


def _every_definition(defs: Iterable[Facts | None], holds: Callable[[Facts], bool]) -> bool | None:
    """Whether `holds` for every definition (read lazily: the first that fails settles it),
    None when there is none; abstract declarations (`raise NotImplementedError`) are left
    out: the implementations decide."""
    found: bool | None = None
    for fn in defs:
        if fn is None or fn.get("stub"):
            continue
        if not holds(fn):
            return False
        found = True
    return found
