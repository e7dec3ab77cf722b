"""The statement walker: runs a function's statements in order and keeps what each name
holds. Both arms of a branch run and their states join; a loop's body runs twice, the
first time as a replay that records nothing, so loop-carried values settle before the
recorded pass. Expressions are `analysis.expressions`' job, library calls
`analysis.semantics`'."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import libcst as cst

from review_copies.analysis import expressions, parameters
from review_copies.analysis.assignments import Assignments
from review_copies.analysis.context import State, join_states
from review_copies.analysis.events import Accumulate, Bind, FunctionFlow, Loop, Return
from review_copies.analysis.freezing import grad_flags_set
from review_copies.analysis.guesses import usage_evidence
from review_copies.analysis.narrowing import gpu_flag_test, narrow
from review_copies.analysis.queries.callers import called_only_under_no_grad, under_grad_off_fixture
from review_copies.analysis.queries.hooks import registered_as_backward_hook
from review_copies.analysis.semantics import api
from review_copies.analysis.semantics.containers import element_of
from review_copies.analysis.syntax import bound_names, dotted, names_in, opt_in_arm, statement_bodies
from review_copies.analysis.values import NONE, OTHER, UNKNOWN, Kind, Value

# Deeper loops run once: replaying every level would cost 2**depth passes.
MAX_LOOP_NESTING_REPLAYED = 3


class Interpreter(Assignments):
    # ------------------------------------------------------------ entry points

    def run_function(self, fn: cst.FunctionDef) -> FunctionFlow:
        self.state.update({k: v for k, v in self.facts.constants().items() if k not in self.state})
        for decorator in fn.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if any(q in api.GRAD_MODE_OFF for q in self.qualnames(target)):
                self.no_grad += 1
        if not self.no_grad and self.scope is not None and (
            called_only_under_no_grad(self.file, self.scope)
            or under_grad_off_fixture(self.file, self.scope)
            or self.lightning_evaluation_hook(fn)
            or registered_as_backward_hook(self.file, self.scope)
        ):
            self.no_grad = self.no_grad_from_callers = 1  # a helper every caller in the file runs under no_grad (or autograd's backward pass does)
        parameters.bind(self, fn)
        self.block(list(statement_bodies(fn)))
        self.flow.final_state = dict(self.state)
        return self.flow

    def run_module(self, module: cst.Module) -> FunctionFlow:
        self.backward_names = frozenset(usage_evidence(self.file.text).backward)
        self.block([s for s in module.body if not isinstance(s, (cst.FunctionDef, cst.ClassDef))])
        self.flow.final_state = dict(self.state)
        return self.flow

    def replay(self) -> Interpreter:
        """A twin that walks on a copy of the state and records nothing: a loop's first pass."""
        twin = copy.copy(self)
        twin.recording = False
        twin.state = dict(self.state)
        twin.flow = FunctionFlow(file=self.file, scope=self.scope, in_module_class=self.module_class)
        return twin

    # ------------------------------------------------------------------ hooks

    def ev(self, node: cst.BaseExpression | None) -> Value:
        if node is None:
            return UNKNOWN
        return self.record(node, expressions.evaluate(self, node))

    def narrowing(self, test: cst.BaseExpression) -> tuple[State, State]:
        return narrow(self, test)

    # ------------------------------------------------------------- statements

    def block(self, stmts: Sequence[cst.CSTNode]) -> None:
        for stmt in stmts:
            self.statement(stmt)

    def statement(self, stmt: cst.CSTNode) -> None:
        self.current_line = stmt
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                self.small(small)
            return
        self.current = stmt
        if isinstance(stmt, cst.If):
            self.if_statement(stmt)
        elif isinstance(stmt, cst.Else):
            self.block(list(statement_bodies(stmt)))
        elif isinstance(stmt, (cst.For, cst.While)):
            self.loop(stmt)
        elif isinstance(stmt, cst.With):
            self.with_block(stmt)
        elif isinstance(stmt, (cst.Try, cst.TryStar)):
            self.try_statement(stmt)
        elif isinstance(stmt, cst.Match):
            self.match_statement(stmt)
        elif isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            self.state[stmt.name.value] = OTHER

    def if_statement(self, stmt: cst.If) -> None:
        if _is_type_checking(stmt.test):
            # Only the type checker reads this branch: `x = torch.Tensor(x)` there is a cast
            # for mypy, never a call at run time.
            if stmt.orelse is not None:
                self.statement(stmt.orelse) if isinstance(stmt.orelse, cst.If) else self.block(list(statement_bodies(stmt.orelse)))
            return
        self.ev(stmt.test)
        before = dict(self.state)
        when_true, when_false = self.narrowing(stmt.test)
        self.state.update(when_true)
        branch, flip = self.flag_branch(stmt.test)
        seen_arms = self.flag_roots.get(branch) if branch else None
        if seen_arms is not None:
            self.state = _unreachable(self.state, seen_arms[1 - flip])
        self.arm_stack.append((branch, flip))
        flagged = opt_in_arm(stmt.test)
        self.opted_in += flagged == 0
        self.block(stmt.body.body)
        self.opted_in -= flagged == 0
        body_exits, else_exits = _exits(stmt.body.body), _orelse_exits(stmt)
        if body_exits:
            self.flow.exited_arms.add((branch, flip))
        self.arm_stack[-1] = (branch, 1 - flip)
        after_body = self.state
        self.state = {**before, **when_false}
        if seen_arms is not None:
            self.state = _unreachable(self.state, seen_arms[flip])
        if stmt.orelse is not None:
            self.opted_in += flagged == 1
            self.statement(stmt.orelse) if isinstance(stmt.orelse, cst.If) else self.block(list(statement_bodies(stmt.orelse)))
            self.opted_in -= flagged == 1
            if else_exits:
                self.flow.exited_arms.add((branch, 1 - flip))
        self.arm_stack.pop()
        after_else = self.state
        self.state = _after_if(body_exits, else_exits, after_body, after_else)
        if branch and not body_exits and not else_exits and any(b == branch for b, _ in self.flag_branches.values()):
            # (Only a flag's branch id comes back; another test's is never asked for again.)
            held_body, held_else = _held(after_body), _held(after_else)
            only_body, only_else = held_body - held_else, held_else - held_body
            self.flag_roots[branch] = (only_body, only_else) if flip == 0 else (only_else, only_body)
        flag = gpu_flag_test(stmt.test)
        if flag and stmt.orelse is None and not body_exits:
            # `if use_gpu: x = x.cuda()`: x is on a GPU exactly when use_gpu holds.
            for key, value in after_body.items():
                unmoved = after_else.get(key)
                # (Not tracked before the `if`, a parameter say: not known to be on a GPU either.)
                if value.device.may_be_gpu and (unmoved is None or not unmoved.device.may_be_gpu) and key in self.state:
                    self.state[key] = self.state[key].but(gpu_if=flag)

    def flag_branch(self, test: cst.BaseExpression) -> tuple[int, int]:
        """The branch id of an `if` and which arm its body is (0, or 1 under `not`). Two
        `if`s on the same flag (`if FINE_TUNE:` ... `if FINE_TUNE:`, `if not self.training:`),
        with nothing binding the flag between them, take the same arms in one run: they share
        an id, so what one arm binds is never what the other flag arm reads."""
        flip = 0
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            flip, test = 1 - flip, test.expression
        key = dotted(test)
        if not key or self.loop_stack:
            return self.branch_id(), 0
        seen = self.flag_branches.get(key)
        if seen is not None and not any(isinstance(e, Bind) and (e.name == key or key.startswith(e.name + ".")) for e in self.flow.events[seen[1] :]):
            return seen[0], flip
        branch = self.branch_id()
        self.flag_branches[key] = (branch, len(self.flow.events))
        return branch, flip

    def branch_id(self) -> int:
        """A new branch's id; 0 inside a loop, where one iteration may take one arm and
        the next iteration another, so its arms are never exclusive."""
        return 0 if self.loop_stack else next(self.counters.branches)

    def try_statement(self, stmt: cst.Try | cst.TryStar) -> None:
        before = dict(self.state)
        self.block(stmt.body.body)
        after = self.state
        for handler in stmt.handlers:
            self.state = join_states(before, after)
            if handler.type is not None:
                self.ev(handler.type)
            self.block(handler.body.body)
            if not _exits(handler.body.body):
                after = join_states(after, self.state)  # a handler that raises or returns flows nowhere after
        self.state = after
        if stmt.orelse is not None:
            self.block(stmt.orelse.body.body)
        if stmt.finalbody is not None:
            self.block(stmt.finalbody.body.body)

    def match_statement(self, stmt: cst.Match) -> None:
        self.ev(stmt.subject)
        before = dict(self.state)
        merged: State | None = None
        branch = self.branch_id()
        for arm, case in enumerate(stmt.cases):
            self.state = dict(before)
            self.arm_stack.append((branch, arm))
            self.block(list(statement_bodies(case)))
            self.arm_stack.pop()
            merged = self.state if merged is None else join_states(merged, self.state)
        self.state = join_states(before, merged or before)

    def lightning_evaluation_hook(self, fn: cst.FunctionDef) -> bool:
        """`validation_step`, `on_validation_epoch_end`... of a LightningModule or a Lightning
        callback: Lightning calls them from its evaluation loops, with autograd off."""
        cls = self.scope.class_node if self.scope is not None else None
        if cls is None or fn.name.value not in api.LIGHTNING_EVALUATION_HOOKS:
            return False
        return any(api.LIGHTNING_BASE.match(q) for base in cls.bases for q in self.qualnames(base.value))

    def with_block(self, stmt: cst.With) -> None:
        grad_change = 0
        restored = self.no_grad
        for item in stmt.items:
            value = self.ev(item.item)
            target = item.item.func if isinstance(item.item, cst.Call) else item.item
            quals = self.qualnames(target)
            if not quals and isinstance(target, cst.Attribute) and target.attr.value in api.GRAD_MODE_NAMES:
                # `torch, nn = _torch()`: a module bound at run time; only torch spells these.
                quals = (f"torch.{target.attr.value}",)
            if any(q in api.GRAD_MODE_OFF for q in quals):
                grad_change = 1
            elif any(q in api.GRAD_MODE_ON for q in quals):
                grad_change = -1
            elif any(q == "torch.set_grad_enabled" for q in quals) and isinstance(item.item, cst.Call) and item.item.args:
                flag = item.item.args[0].value
                if isinstance(flag, cst.Name) and flag.value in ("False", "True"):
                    grad_change = 1 if flag.value == "False" else -1
            if item.asname is not None:
                self.assign(item.asname.name, UNKNOWN if value.kind is Kind.OTHER else value, None)
        if grad_change == 1:
            self.no_grad += 1
        elif grad_change == -1:
            self.no_grad = 0
        self.block(stmt.body.body)
        self.no_grad = restored

    def loop(self, stmt: cst.For | cst.While) -> None:
        loop_id = next(self.counters.loops)
        start, end = self.file.span(stmt)
        self.flow.loops[loop_id] = Loop(stmt, start, end)
        element = UNKNOWN
        if isinstance(stmt, cst.For):
            element = element_of(self.ev(stmt.iter), stmt.iter)
        before = dict(self.state)
        replayed = len(self.loop_stack) < MAX_LOOP_NESTING_REPLAYED
        self.loop_stack.append(loop_id)
        if replayed:
            twin = self.replay()
            twin.loop_pass(stmt, element)
            self.state = join_states(before, twin.state)
        self.loop_pass(stmt, element)
        self.loop_stack.pop()
        self.state = join_states(before, self.state)
        if isinstance(stmt, cst.For):
            for owner, on in grad_flags_set(stmt).items():
                self.set_parameters_grad(owner, on)
        if stmt.orelse is not None:
            self.block(stmt.orelse.body.body)

    def loop_pass(self, stmt: cst.For | cst.While, element: Value) -> None:
        if isinstance(stmt, cst.For):
            self.assign(stmt.target, element, None)
        else:
            self.ev(stmt.test)
        self.block(stmt.body.body)

    def _combines(self, expr: cst.BaseExpression, key: str) -> bool:
        """Does `key = expr` combine the old value with more (`total + loss`,
        `torch.add(total, loss)`, `total.add(loss)`)? A call of the repository's own function
        (`embeds = model.update(embeds)`) computes a new value, which may hold no graph of
        the old one: what it returns is not known here."""
        if key not in names_in(expr, attributes=True, into_lambdas=False):
            return False
        if not isinstance(expr, cst.Call):
            return True
        if _reshaped(expr, key):
            return False  # `self.h = self.h.unsqueeze(0)`: the same values in another shape, nothing added
        func = expr.func
        if isinstance(func, cst.Attribute) and dotted(func.value) == key:
            return True
        return any(q.startswith("torch.") for q in self.qualnames(func))

    def small(self, small: cst.BaseSmallStatement) -> None:
        self.current = small
        if isinstance(small, cst.Expr):
            self.ev(small.value)
        elif isinstance(small, cst.Assign):
            value = self.ev(small.value)
            for target in small.targets:
                key = dotted(target.target)
                if key and value.kind is Kind.TENSOR and value.attached and not value.leaf and self._combines(small.value, key):
                    # `total = total + loss`: an accumulation written out of place. (A new leaf,
                    # `nn.Parameter(f(self.w))`, holds no graph: it starts one.)
                    self.emit(Accumulate, small, name=key, value=value, value_node=small.value, before=self.state.get(key, UNKNOWN))
                self.assign(target.target, value, small.value)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.ev(small.value), small.value)
        elif isinstance(small, cst.AugAssign):
            self.aug_assign(small)
        elif isinstance(small, cst.Return):
            value = self.ev(small.value) if small.value is not None else NONE
            self.emit(Return, small, value=value, value_node=small.value)
        elif isinstance(small, cst.Del):
            for name in bound_names(small.target):
                self.state.pop(name, None)
        elif isinstance(small, (cst.Raise, cst.Assert)):
            for child in small.children:
                if isinstance(child, cst.BaseExpression):
                    self.ev(child)


def _is_type_checking(test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.Name):
        return test.value == "TYPE_CHECKING"
    return isinstance(test, cst.Attribute) and test.attr.value == "TYPE_CHECKING" and isinstance(test.value, cst.Name) and test.value.value in ("typing", "typing_extensions")


def _held(state: State) -> frozenset[str]:
    return frozenset(r for value in state.values() for r in value.roots)


def _unreachable(state: State, gone: frozenset[str]) -> State:
    """The state of an arm that a second `if` on the same flag shares with an earlier one:
    memory that only the earlier `if`'s other arm left reachable is not what any name holds
    here (`if not_tensor: im /= 255` writes into what `im` became in the first
    `if not_tensor:`, never into the caller's tensor)."""
    if not gone:
        return state
    return {k: v.but(roots=v.roots - gone) if v.roots & gone else v for k, v in state.items()}


def _after_if(body_exits: bool, else_exits: bool, after_body: State, after_else: State) -> State:
    """What holds after an `if`. An arm that always leaves the function (`return`, `raise`)
    does not reach what follows: after `if device != "cpu": return`, only the other arm's
    facts hold. (`continue`/`break` arms still reach the loop's next iteration: joined.)"""
    if body_exits and not else_exits:
        return after_else
    if else_exits and not body_exits:
        return after_body
    return join_states(after_body, after_else)


def _orelse_exits(stmt: cst.If) -> bool:
    """Does the `else` (or the `elif` chain, `else` included) always leave the function?"""
    if stmt.orelse is None:
        return False
    if isinstance(stmt.orelse, cst.If):
        return _if_exits(stmt.orelse)
    return _exits(list(statement_bodies(stmt.orelse)))


def _exits(body: Sequence[cst.BaseStatement]) -> bool:
    """Does this block always leave the function by its last statement (`return`, `raise`)?"""
    if not body:
        return False
    last_stmt = body[-1]
    if isinstance(last_stmt, cst.If):
        return _if_exits(last_stmt)
    return isinstance(last_stmt, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Raise)) for s in last_stmt.body)


def _if_exits(stmt: cst.If) -> bool:
    """An `if` leaves the function when it has an `else` and every arm ends by leaving:
    `if inplace: return x.mul_(w)` / `else: return x * w`."""
    return stmt.orelse is not None and _exits(stmt.body.body) and _orelse_exits(stmt)


def _reshaped(expr: cst.BaseExpression, key: str) -> bool:
    """Is `expr` `key` itself through view and reshape methods only (`key.unsqueeze(0).expand(n, -1, -1)`)?"""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in api.VIEW_METHODS | api.MAYBE_VIEW_METHODS:
        expr = expr.func.value
    return not isinstance(expr, cst.Call) and dotted(expr) == key
