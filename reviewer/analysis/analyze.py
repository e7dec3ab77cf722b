"""The analysis of one file: the flows of the functions a change touches, and the file-level
facts they need (cached per file, computed by running the interpreter on other parts of it).
"""

from __future__ import annotations

import re

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.change import FunctionChange
from review_copies.analysis.context import State
from review_copies.analysis.events import FunctionFlow, Return
from review_copies.analysis.facts import is_module_class
from review_copies.analysis.interpreter import Interpreter
from review_copies.analysis.parse import ParsedFile, Scope
from review_copies.analysis.semantics import api
from review_copies.analysis.semantics.callables import OUTPUT_ORIGIN
from review_copies.analysis.syntax import dotted
from review_copies.analysis.transforms import pipeline_steps
from review_copies.analysis.values import Kind, Value

_PIPELINE_HINT = re.compile(r"Compose\(|\b(\w+)\s*=\s*\w+\(\s*\1\s*\)")


class FileAnalysis:
    """One file's analysis: what each function does (`function`), and the file-level facts
    the interpreter asks for, computed once."""

    def __init__(self, file: ParsedFile) -> None:
        self.file = file
        self._constants: State | None = None
        self._pipeline_inputs: dict[str, str] | None = None

    def function(self, scope: Scope, class_attrs: State | None = None) -> FunctionFlow:
        module_class = scope.class_node is not None and is_module_class(self.file, scope.class_node)
        assert isinstance(scope.node, cst.FunctionDef)
        return Interpreter(self, scope, class_attrs, module_class=module_class).run_function(scope.node)

    def module_body(self) -> FunctionFlow:
        return Interpreter(self, None).run_module(self.file.module)

    # --------------------------------------------------------------- facts

    def constants(self) -> State:
        """Module-level names bound once to a device, a dtype or a literal (`DEVICE = torch.device("cpu")`)."""
        if self._constants is not None:
            return self._constants
        # Evaluating a constant asks for none: the cache holds an empty table meanwhile.
        self._constants = {}
        evaluator = Interpreter(self, None, recording=False)
        # Each value's own statement: a line found without position metadata for the file.
        statements = {small.value: stmt for stmt in self.file.module.body if isinstance(stmt, cst.SimpleStatementLine) for small in stmt.body if isinstance(small, cst.Assign)}
        constants: State = {}
        for name, bound in self.file.module_assignments().items():
            if len(bound) != 1:
                continue
            evaluator.current = evaluator.current_line = statements.get(bound[0])
            value = evaluator.ev(bound[0])
            if value.kind in (Kind.DEVICE, Kind.SCALAR) or (value.kind is Kind.OTHER and value.dtype is not None):
                constants[name] = value
        self._constants = constants
        return constants

    def pipeline_input(self, class_name: str) -> str | None:
        return self.pipeline_inputs().get(class_name)

    def pipeline_inputs(self) -> dict[str, str]:
        """Classes of this file whose `__call__` is handed a tensor by the step before it in a
        pipeline (analysis.transforms), each with the reason, which becomes the argument's origin."""
        if self._pipeline_inputs is not None:
            return self._pipeline_inputs
        found: dict[str, str] = {}
        # Analysing a step below asks again for its own input: it sees what is known so far.
        self._pipeline_inputs = found
        if not _PIPELINE_HINT.search(self.file.text):
            return found
        steps = list(pipeline_steps(self.file.module))
        returns: dict[str, bool] = {}  # what each step returns, given the inputs known so far
        grew = True
        while grew:  # a chain of steps: each one known to return a tensor feeds the next
            grew = False
            for step in steps:
                name, previous = dotted(step.call.func), dotted(step.previous.func)
                if name in found or self._call_method(name) is None:
                    continue
                if previous not in returns:
                    returns[previous] = self._returns_tensor(step.previous)
                if not returns[previous]:
                    continue
                line = self.file.line_of(step.statement)
                found[name] = f"{OUTPUT_ORIGIN} `{previous}(...)`, the step before it in the pipeline at line {line}"
                returns.pop(name, None)  # its input is a tensor now: what it returns may change
                grew = True
        return found

    def _call_method(self, class_name: str) -> Scope | None:
        for scope in self.file.scopes:
            # A top-level class only (its method's sole parent): the step is built by its plain name.
            if scope.kind == "method" and scope.name == "__call__" and len(scope.parents) == 1 and scope.class_node is not None and scope.class_node.name.value == class_name:
                return scope
        return None

    def _returns_tensor(self, build: cst.Call) -> bool:
        """Does the step that `build` makes return a tensor: a torchvision transform that always
        does, or a class of this file whose `__call__` returns one on every path?"""
        if any(q in api.TENSOR_TRANSFORMS for q in Interpreter(self, None, recording=False).qualnames(build.func)):
            return True
        scope = self._call_method(dotted(build.func))
        if scope is None:
            return False
        returns = list(self.function(scope).of(Return))
        return bool(returns) and all(r.value.kind is Kind.TENSOR for r in returns)


def analyze_function(file: ParsedFile, scope: Scope, class_attrs: State | None = None) -> FunctionFlow:
    return FileAnalysis(file).function(scope, class_attrs)


def analyze_file(
    file: ParsedFile, lines: frozenset[int] | None = None, changes: dict[str, FunctionChange] | None = None, index: object = None,
) -> list[FunctionFlow]:
    """The flows of every function touching `lines` (all when None) and of the module body
    when it does. Methods are analysed after their class's __init__, whose attributes they see.
    `changes` (from `analysis.change`) says what the change did to each function; `index`
    is the repository's (`index.RepoIndex`), handed to the rules."""
    analysis = FileAnalysis(file)
    functions = [s for s in file.scopes if s.kind in ("function", "method") and not _a_triton_kernel(file, s)]
    if lines is None:
        wanted = functions
        module_body = True
    else:
        innermost = {file.innermost_scope(line, ("function", "method")) for line in lines}
        wanted = [s for s in functions if s in innermost]
        module_body = None in innermost
    inits = {s.class_node: s for s in functions if s.kind == "method" and s.name == "__init__"}
    needed_inits = {inits[s.class_node] for s in wanted if s.kind == "method" and s.class_node in inits}
    flows: list[FunctionFlow] = []
    class_attrs: dict[cst.CSTNode, State] = {}
    for init in sorted(needed_inits, key=lambda s: s.start):
        flow = analysis.function(init)
        params = frozenset(p.name.value for p in (*init.node.params.params, *init.node.params.kwonly_params, *init.node.params.posonly_params))
        class_attrs[init.class_node] = {k: _as_seen_from_methods(v, params) for k, v in flow.final_state.items() if k.startswith("self.")}
        if init in wanted:
            flows.append(flow)
    for scope in wanted:
        if scope in needed_inits:
            continue
        attrs = class_attrs.get(scope.class_node) if scope.kind == "method" else None
        flows.append(analysis.function(scope, attrs))
    flows.sort(key=lambda f: f.scope.start if f.scope else 0)
    if module_body:
        flows.append(analysis.module_body())
    for flow in flows:
        flow.change = (changes or {}).get(flow.name)
        flow.index = index
    return flows


def _a_triton_kernel(file: ParsedFile, scope: Scope) -> bool:
    """`@triton.jit` (or `autotune`, `heuristics`, or `jit` imported from triton): the
    function is a kernel, whose tensor arguments are pointers. `g += bos * H` moves a pointer
    and `tl.store` writes through one; nothing in it has torch's copy semantics."""
    node = scope.node
    if not isinstance(node, cst.FunctionDef):
        return False
    for decorator in node.decorators:
        expr = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        name = dotted(expr)
        if name and any(q == "triton" or q.startswith("triton.") for q in file.imports.resolve(name)):
            return True
    return False


def _as_seen_from_methods(value: Value, params: frozenset[str]) -> Value:
    """An attribute `__init__` set, with the roots of its parameters renamed: another method's
    parameter of the same name is another object."""
    if not value.roots and value.element is None and value.items is None:
        return value
    return value.but(
        roots=frozenset(roots.of_constructor(r, params) for r in value.roots),
        element=_as_seen_from_methods(value.element, params) if value.element is not None else None,
        items=tuple(_as_seen_from_methods(i, params) for i in value.items) if value.items is not None else None,
    )
