"""Loops: which one an event runs in, whether it is a training loop, what lives across it."""

from __future__ import annotations

import re

import libcst as cst

from review_copies.analysis.events import Accumulate, Backward, Bind, Call, Event, FunctionFlow, Loop, Return, Use, Write
from review_copies.analysis.guesses import TRAINING_ITERABLE
from review_copies.analysis.syntax import bound_names, code_of, names_in
from review_copies.analysis.values import Tri


def loop_of(flow: FunctionFlow, event: Event) -> Loop | None:
    return flow.loops.get(event.loops[-1]) if event.loops else None


def outermost_loop(flow: FunctionFlow, event: Event) -> Loop | None:
    return flow.loops.get(event.loops[0]) if event.loops else None


def step_loop(flow: FunctionFlow, event: Event) -> Loop | None:
    """The innermost loop around the event whose iterations are training or evaluation steps
    (`for batch in loader`, a loop that backpropagates): what outlives one of its iterations
    outlives a step. A loop over pairs or heads inside one step is not it."""
    for loop_id in reversed(event.loops):
        loop = flow.loops.get(loop_id)
        if loop is not None and training_loop(flow, loop):
            return loop
    return None


def training_loop(flow: FunctionFlow, loop: Loop) -> bool:
    """A loop over training or evaluation steps: it backpropagates or steps an optimizer, or
    iterates a data loader. None is inside a module's `forward` (or any method so named: a
    base class from another package, `BaseModule`, is a module too): a loop there (over
    layers, timesteps, refinement steps) is the model's own computation."""
    if flow.scope is not None and flow.scope.kind == "method" and flow.scope.name == "forward":
        return False
    if trains_inside(flow, loop):
        return True
    node = loop.node
    return isinstance(node, cst.For) and bool(TRAINING_ITERABLE.search(code_of(node.iter)))


def trains_inside(flow: FunctionFlow, loop: Loop) -> bool:
    """Something in the loop backpropagates or steps an optimizer."""
    return any(loop.start <= e.line <= loop.end and (isinstance(e, Backward) or (isinstance(e, Write) and e.op == "optimizer.step()")) for e in flow.events)


# At most this many iterations, written out, is a fixed handful (a test's two or three
# steps), not a run whose memory grows step after step.
FEW_STEPS = 8


def few_steps(loop: Loop, flow: FunctionFlow | None = None) -> bool:
    """`for i in range(3)`, `for lr in (0.1, 0.01)`: a literal, small number of iterations;
    with `flow`, also a parameter whose default is such a literal (`def predict(self, x,
    img_sizes=(-1,))`: scales of a multi-scale test, a handful at most)."""
    node = loop.node
    if not isinstance(node, cst.For):
        return False
    it = node.iter
    if isinstance(it, cst.Name) and flow is not None and flow.scope is not None and isinstance(flow.scope.node, cst.FunctionDef):
        params = flow.scope.node.params
        default = next((p.default for p in (*params.params, *params.kwonly_params) if p.name.value == it.value), None)
        rebound = any(isinstance(e, Bind) and e.name == it.value and e.line < loop.start for e in flow.events)
        it = default if default is not None and not rebound else it
    if isinstance(it, (cst.List, cst.Tuple)):
        return len(it.elements) <= FEW_STEPS
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" and 1 <= len(it.args) <= 2:
        stop = it.args[-1].value
        start = it.args[0].value if len(it.args) == 2 else cst.Integer("0")
        if isinstance(stop, cst.Integer) and isinstance(start, cst.Integer):
            return int(stop.value) - int(start.value) <= FEW_STEPS
    return False


def _leaves_after(flow: FunctionFlow, block: cst.BaseSuite, line: int) -> bool:
    """Is the line in a block of the loop that ends in `break` or `return` (`total_loss +=
    loss; break`): once it runs, the loop is left, so it runs at most once. Nested loops are
    not entered: their `break` leaves them, not this loop."""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return False
    first, last = flow.file.span(block.body[0])[0], flow.file.span(block.body[-1])[1]
    if not first <= line <= last:
        return False
    tail = block.body[-1]
    if isinstance(tail, cst.SimpleStatementLine) and any(isinstance(small, (cst.Break, cst.Return)) for small in tail.body):
        return True
    for stmt in block.body:
        if isinstance(stmt, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.SimpleStatementLine)):
            continue
        for child in stmt.children:
            suites = [child] if isinstance(child, cst.IndentedBlock) else [c for c in child.children if isinstance(c, cst.IndentedBlock)]
            if any(_leaves_after(flow, suite, line) for suite in suites):
                return True
    return False


def one_iteration(flow: FunctionFlow, event: Event, loop: Loop) -> bool:
    """Does the event run in a single iteration of the loop only (or a fixed few: `if t == 0
    or t == T - 1:`): in a block that leaves the loop (`...; break`), under `if step == 0:`
    (the loop's own counter compared with a number) or, where the loop counts (`range`,
    `enumerate`: no value comes twice), `if i == start:` with a name the loop never
    rebinds? What it keeps is then one step's."""
    node = loop.node
    if _leaves_after(flow, node.body, event.line):
        return True
    if not isinstance(node, cst.For):
        return False
    counters = names_in(node.target)
    invariant: frozenset[str] = frozenset()
    counting = _counting(node)
    if counting:
        rebound = {e.name for e in flow.of(Bind) if loop.start <= e.line <= loop.end}
        invariant = frozenset(n for n in names_in(node.body) if n not in rebound and n not in counters)
    finder = _IfCounterIs(counters, counting, invariant)
    node.body.visit(finder)
    for branch in finder.found:
        if not isinstance(branch.body, cst.IndentedBlock):
            if event.line == flow.file.span(branch)[0]:  # `if step == 0: kept.append(loss)`
                return True
            continue
        first, last = branch.body.body[0], branch.body.body[-1]
        if flow.file.span(first)[0] <= event.line <= flow.file.span(last)[1]:
            return True
    return False


class _IfCounterIs(cst.CSTVisitor):
    """The `if COUNTER == NUMBER:` (or `== NAME` with a name in `invariant`) statements of a
    loop body (nested loops not entered: their iterations are not the outer loop's)."""

    def __init__(self, counters: frozenset[str], counting: frozenset[str], invariant: frozenset[str]) -> None:
        self.counters = counters
        self.counting = counting
        self.invariant = invariant
        self.found: list[cst.If] = []

    def _once(self, counter: cst.BaseExpression, other: cst.BaseExpression) -> bool:
        if not isinstance(counter, cst.Name):
            return False
        if isinstance(other, cst.Integer):
            return counter.value in self.counters
        if counter.value not in self.counting:
            return False
        if isinstance(other, cst.Name):
            return other.value in self.invariant
        # `t == net.T - 1`: arithmetic on names the loop never rebinds, with no call in it.
        return isinstance(other, (cst.BinaryOperation, cst.Attribute)) and "(" not in code_of(other) and names_in(other) <= self.invariant

    def _equal_once(self, test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            # `if t == 0 or t == T - 1:` runs on a fixed two iterations, however many there are.
            return self._equal_once(test.left) and self._equal_once(test.right)
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)):
            return False
        sides = (test.left, test.comparisons[0].comparator)
        return self._once(*sides) or self._once(*sides[::-1])

    def visit_For(self, node: cst.For) -> bool:
        return False

    def visit_While(self, node: cst.While) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_If(self, node: cst.If) -> None:
        if self._equal_once(node.test):
            self.found.append(node)


def _counting(node: cst.For) -> frozenset[str]:
    """The loop's counter, which takes each value once: the target of `range(...)`, the
    first target of `enumerate(...)`; none for other iterables (a value may come twice)."""
    it = node.iter
    if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Name)):
        return frozenset()
    if it.func.value == "range" and isinstance(node.target, cst.Name):
        return frozenset({node.target.value})
    if it.func.value == "enumerate" and isinstance(node.target, cst.Tuple) and isinstance(node.target.elements[0].value, cst.Name):
        return frozenset({node.target.elements[0].value.value})
    return frozenset()


def bound_outside(flow: FunctionFlow, name: str, loop: Loop) -> bool:
    """Does `name` hold a value from before the loop (an accumulator, a list, self.x)?"""
    if name in flow.params or name.startswith("self."):
        return True
    return any(isinstance(e, (Bind, Use)) and e.name == name and e.line < loop.start for e in flow.events)


def bound_each_step(flow: FunctionFlow, name: str, loop: Loop, before: int) -> bool:
    """Is `name` bound anew in every pass of the loop before line `before`: a target of the
    loop itself (`for x, batch in loader:`) or assigned at the top of its body? Then what is
    stored in it goes with that pass's object, not into one that outlives the steps."""
    node = loop.node
    if isinstance(node, cst.For) and name in bound_names(node.target):
        return True
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    for stmt in body:
        if flow.file.span(stmt)[0] >= before:
            break
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Assign) and any(name in bound_names(t.target) for t in small.targets):
                    return True
    return False


def reset_each_optimizer_step(flow: FunctionFlow, name: str, loop: Loop) -> bool:
    """Is `name` set back to a value holding no graph (`running_loss = 0`) inside the loop,
    in the arm that steps the optimizer? Then what it sums is the micro-batches of one
    optimizer step (gradient accumulation), not a run of steps; a reset only when the loop
    logs (`if step % 100 == 0:`) still keeps a hundred steps' graphs."""
    sums = {e.line for e in flow.of(Accumulate) if e.name == name}
    resets = [e.line for e in flow.of(Bind) if e.name == name and loop.start <= e.line <= loop.end and e.line not in sums and e.value.grad is Tri.NO]
    steps = [e.line for e in flow.of(Call) if e.method == "step" and loop.start <= e.line <= loop.end]
    if not resets or not steps:
        return False
    bodies = _if_bodies(flow, loop)
    for reset in resets:
        around = [b for b in bodies if b[0] <= reset <= b[1]]
        if around:
            first, last = min(around, key=lambda b: b[1] - b[0])  # the innermost `if` around the reset
            if any(first <= step <= last for step in steps):
                return True
    return False


def _if_bodies(flow: FunctionFlow, loop: Loop) -> list[tuple[int, int]]:
    """The lines of the body of each `if` in the loop (up to its `else`, if any)."""
    found: list[cst.If] = []

    class _Ifs(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            found.append(node)

    loop.node.visit(_Ifs())
    bodies = []
    for node in found:
        start, end = flow.file.span(node)
        if node.orelse is not None:
            end = flow.file.span(node.orelse)[0] - 1
        bodies.append((start, end))
    return bodies


def returned(flow: FunctionFlow, name: str) -> bool:
    return any(e.value_node is not None and name in names_in(e.value_node, attributes=True) for e in flow.of(Return))


def opposite_arms(flow: FunctionFlow, one: int, other: int) -> bool:
    """Whether the two lines sit in the two arms of one `if` of the function."""
    if flow.scope is None:
        return False
    found = False

    class Find(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            nonlocal found
            if node.orelse is None:
                return
            (a, b), (c, d) = flow.file.span(node.body), flow.file.span(node.orelse)
            found = found or (a <= one <= b and c <= other <= d) or (a <= other <= b and c <= one <= d)

    flow.scope.node.visit(Find())
    return found


def unbound_on_the_first_pass(flow: FunctionFlow, name: str, event: Event) -> bool:
    """single-image-test-time-adaptation's `tmp_weight = torch.tensor(tmp_weight)` in a loop,
    with `tmp_weight` bound nowhere before it: no parameter, no binding earlier in the
    function, no mention of the name anywhere else in the file (a global, the enclosing
    function's variable). The first pass raises NameError there, so no pass ever reads the value a
    later line of the loop binds; what the analysis carries round the loop is never seen."""
    scope = flow.scope
    if scope is None or name in flow.params or not event.loops:
        return False
    binds = [e for e in flow.of(Bind) if e.name == name]
    if not binds or any(b.index < event.index for b in binds):
        return False
    word = re.compile(rf"\b{re.escape(name)}\b")
    return not any(word.search(line) for n, line in enumerate(flow.file.text.splitlines(), 1) if not scope.start <= n <= scope.end)
