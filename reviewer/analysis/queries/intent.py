"""What a function is for, as its name, signature and decorators say: helpers whose job is
to write into their arguments, op implementations, writes that are the point of the code
(an optimizer step, loading weights, `nn.init`). These decide when an in-place write is
intended rather than a hazard; the name lists are in `analysis.guesses`."""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow, Return, Use, Write
from review_copies.analysis.guesses import MUTATING_FUNCTION_PREFIXES, OP_REGISTRATION_WORDS, OUTPUT_PARAMETER_NAMES, STATE_WORDS, WRITER_NAME
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import built_on_optimizer, code_of, dotted, names_in
from review_copies.analysis.values import Kind, Value

# `t.set_(src)` swaps the storage under the tensor object itself: the one way to update a
# tensor its owner holds (error-feedback buffers, swapped parameters), never done by accident.
DELIBERATE_WRITE_OPS = ("optimizer.step()", "load_state_dict", ".set_()")


def deliberate_write(write: Write) -> bool:
    """Writes whose job is to change the tensor: optimizer steps, loading, nn.init, `set_`."""
    return write.op in DELIBERATE_WRITE_OPS or write.op.startswith("nn.init.")


def loaded_back(flow: FunctionFlow, write: Write) -> bool:
    """The function loads the state it wrote into back into the module itself
    (`weights = model.state_dict(); weights[name][i] = kernel; model.load_state_dict(weights)`):
    changing the module is what it is for (Focused-Flip's `inject_handcrafted_filters`)."""
    return any(c.method == "load_state_dict" and c.receiver is not None and c.receiver.roots & write.target.roots for c in flow.of(Call))


def indexed_by_its_own_copy(write: Write) -> bool:
    """`mask[mask.clone()] = matched`: the index was copied because the write goes into the
    very tensor it is read from, so the author knows where the write lands and makes it on
    purpose (SimOTA's `dynamic_k_matching` refines the caller's mask so)."""
    node = write.node
    if write.op != "[...] =" or not isinstance(node, cst.Subscript):
        return False
    owner = code_of(node.value)
    for element in node.slice:
        index = element.slice.value if isinstance(element.slice, cst.Index) else None
        func = index.func if isinstance(index, cst.Call) else None
        if isinstance(func, cst.Attribute) and func.attr.value == "clone" and code_of(func.value) == owner:
            return True
    return False


def is_mutating_function(flow: FunctionFlow) -> bool:
    """Named to mutate: a trailing `_`, `init_*`, `reset_*`, `update_*`..., or named as an
    initializer is (`fanin_init`, `xavier_init`: `nn.init`'s job, filling what it is given)."""
    if flow.scope is None:
        return False
    name = flow.scope.name
    if name.startswith("__") and name.endswith("__"):
        return False  # __call__, __getitem__: dunders, not the trailing-underscore convention
    return name.endswith(("_", "_init")) or name.startswith(MUTATING_FUNCTION_PREFIXES)


def in_place_by_name(flow: FunctionFlow) -> bool:
    """Named with a trailing underscore as torch's in-place methods are (`clamp_`,
    `normalize_`), dunders aside: it writes what it is called on or given, by contract."""
    name = flow.scope.name if flow.scope is not None else ""
    return name.endswith("_") and not name.startswith("__")


def gathered_per_call(flow: FunctionFlow, param: str) -> bool:
    """`message(self, x_i, x_j)` of a PyG `MessagePassing` layer: `propagate` builds every
    `*_i` / `*_j` argument afresh for the call by indexing the node features along the edges
    (`x.index_select(0, edge_index[0])`), so the tensor is the call's own to write into."""
    scope = flow.scope
    if scope is None or scope.name != "message" or scope.class_node is None or not param.endswith(("_i", "_j")):
        return False
    return any(dotted(b.value).endswith("MessagePassing") for b in scope.class_node.bases)


def optimizer_method(flow: FunctionFlow) -> bool:
    """A method of a class built on an optimizer (`class Adasum(torch.optim.Optimizer)`):
    updating the parameters it is handed, in `step` or in its helpers, is the class's job."""
    scope = flow.scope
    return scope is not None and scope.class_node is not None and built_on_optimizer(scope.class_node)


def in_place_module(flow: FunctionFlow) -> bool:
    """A module class named as an in-place op is (`class Add_(nn.Module)`): its forward
    writes into its input by declaration, as `Tensor.add_` does."""
    scope = flow.scope
    return scope is not None and scope.class_node is not None and scope.class_node.name.value.endswith("_") and not scope.class_node.name.value.endswith("__")


def declares_mutation(flow: FunctionFlow) -> bool:
    """The signature says the function writes: an `inplace` flag, an autograd `ctx`, a writer's name."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    names = [p.name.value for p in (*scope.node.params.params, *scope.node.params.kwonly_params)]
    if any("inplace" in n for n in names) or (bool(names) and names[0] == "ctx") or bool(WRITER_NAME.search(scope.name)):
        return True
    if "hook" in names[1:]:
        return True  # a TransformerLens hook, `f(activation, hook)` (it is called with `hook=`): editing the activation is its job
    # The docstring says so ("It's an in-place function"), or the write sits behind a flag
    # named for it (`if use_inplace and x.is_cuda:`).
    docstring = scope.node.get_docstring() or ""
    if _SAYS_IN_PLACE.search(docstring) or any(_INPLACE_FLAG.search(code_of(test)) for test in _if_tests(scope.node)):
        return True
    # A closure defined in the arm an `inplace` flag chose (`if inplace: def f(m, v): return
    # m.div_(v)`, with an out-of-place twin in the `else`): its writes are the mode the caller asked for.
    outer = scope.enclosing_function
    return outer is not None and any(
        _INPLACE_FLAG.search(code_of(branch.test)) and _defines(branch.body, scope.node) for branch in _ifs(outer)
    )


# "in-place" / "in place" / "inplace", not as "not in place", "non-inplace" or "out-of-place".
_SAYS_IN_PLACE = re.compile(r"(?<![\w-])(?<!not )(?<!non-)(?<!non )in[- ]?place\b(?! of\b)", re.I)
_INPLACE_FLAG = re.compile(r"\b\w*in_?place\w*\b", re.I)


def _if_tests(fn: cst.FunctionDef) -> list[cst.BaseExpression]:
    return [branch.test for branch in _ifs(fn)]


def _ifs(fn: cst.FunctionDef) -> list[cst.If]:
    """The `if` statements of `fn`'s own body (not of the functions it defines)."""
    found: list[cst.If] = []

    class Ifs(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            found.append(node)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    fn.visit(Ifs())
    return found


def _defines(block: cst.BaseSuite, fn: cst.CSTNode) -> bool:
    """`fn` is one of the statements of `block` itself."""
    return isinstance(block, cst.IndentedBlock) and any(stmt is fn for stmt in block.body)


def registered_op(flow: FunctionFlow) -> bool:
    """Implementations registered for an op (custom ops, library impls) mutate as their schema says."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    return any(any(w in code_of(d.decorator) for w in OP_REGISTRATION_WORDS) for d in scope.node.decorators)


def state_like(name: str) -> bool:
    """Parameters meant to be written: outputs, buffers, caches, running state."""
    return name in OUTPUT_PARAMETER_NAMES or any(word in name.lower() for word in STATE_WORDS)


def returns_something(flow: FunctionFlow) -> bool:
    return any(e.value.kind is not Kind.NONE and e.value_node is not None for e in flow.of(Return))


def returns_a_number(flow: FunctionFlow) -> bool:
    """`return lam` after mixing the batch in place: the function's tensor output is the
    argument it wrote, and its result is a number about it. Also a function annotated to
    return numbers (`-> List[int]`: the ids a cache allocator had to recycle): what it
    computes on tensors, it leaves in them."""
    # `return loss.item(), prediction.item()`: a tuple of numbers is numbers too.
    kinds = {Kind.SCALAR if _numbers_tuple(e.value) else e.value.kind for e in flow.of(Return) if e.value_node is not None}
    if Kind.SCALAR in kinds and not kinds & {Kind.TENSOR, Kind.NDARRAY, Kind.LIST, Kind.TUPLE, Kind.DICT}:
        return True
    scope = flow.scope
    node = scope.node if scope is not None else None
    return isinstance(node, cst.FunctionDef) and node.returns is not None and _numbers(node.returns.annotation)


def _numbers_tuple(value: Value) -> bool:
    return value.kind is Kind.TUPLE and bool(value.items) and all(item.kind is Kind.SCALAR for item in value.items)


_NUMBER_TYPES = frozenset(("int", "float", "bool"))
_SEQUENCE_TYPES = frozenset(("List", "list", "Tuple", "tuple", "Set", "set", "Sequence"))


def _numbers(annotation: cst.BaseExpression) -> bool:
    """`int`, `List[int]`, `Tuple[int, ...]`, `set[int]`: numbers, no tensor among them."""
    if isinstance(annotation, cst.Name):
        return annotation.value in _NUMBER_TYPES
    if isinstance(annotation, cst.Subscript):
        outer = annotation.value
        name = outer.attr.value if isinstance(outer, cst.Attribute) else outer.value if isinstance(outer, cst.Name) else ""
        if name not in _SEQUENCE_TYPES:
            return False
        items = [e.slice.value for e in annotation.slice if isinstance(e.slice, cst.Index)]
        return bool(items) and all(isinstance(i, cst.Ellipsis) or _numbers(i) for i in items)
    return False


def returns_its_original(flow: FunctionFlow, arg: str, write: Write) -> bool:
    """self-critical.pytorch's `add_diversity`: `unaug = logprobs.clone()`, then the argument
    is lowered in place and `return unaug`. The function copied what it was handed before
    writing and hands the copy back: the write into the argument is its other output, on
    purpose, and the caller reads the changed tensor because it asked for it."""
    copies = {f"{arg}.clone()", f"{arg}.detach().clone()", f"{arg}.clone().detach()", f"torch.clone({arg})", f"copy.deepcopy({arg})", f"{arg}.copy()"}
    kept = {b.name for b in flow.of(Bind) if b.index < write.index and b.expr is not None and code_of(b.expr) in copies}
    return bool(kept) and any(e.value_node is not None and names_in(e.value_node) & kept for e in flow.of(Return))


def restored(flow: FunctionFlow, write: Write) -> bool:
    """Perturb and restore: the argument is written, then put back with `x.copy_(saved)`, or
    from a copy of the same slice taken before (`kept = w[i].clone()`; `w[i] = 0`, measure,
    `w[i] = kept`: an ablation), or a sentinel is swapped out and written back (`x[x == -1] =
    0`, later `x[~mask] = -1`)."""
    writes = [w for w in flow.of(Write) if w.target.roots & write.target.roots]
    if len(writes) > 1 and any(w.op == ".copy_()" for w in writes):
        return True
    if any(w.loops == write.loops and w.arms == write.arms and (_puts_back(flow, write, w) if w.index > write.index else _puts_back(flow, w, write)) for w in writes if w is not write):
        return True
    if isinstance(write.stmt, cst.Assign) and any(
        w.index < write.index and _swapped_sentinel(w) == (_target_name(write.stmt), code_of(write.stmt.value)) for w in writes
    ):
        return True  # the write that puts the sentinel back
    sentinel = _swapped_sentinel(write)
    return sentinel is not None and any(
        w.index > write.index and isinstance(w.stmt, cst.Assign) and code_of(w.stmt.value) == sentinel[1] and code_of(w.stmt.targets[0].target).startswith(f"{sentinel[0]}[")
        for w in writes
    )


def _puts_back(flow: FunctionFlow, write: Write, later: Write) -> bool:
    """`w[i] = kept` after `w[i] = 0`, where `kept` was bound before the first write to a copy
    of that same slice (`w[i].clone()`, `.detach().clone()`)."""
    first, second = write.stmt, later.stmt
    if not (isinstance(first, cst.Assign) and isinstance(second, cst.Assign) and len(first.targets) == len(second.targets) == 1):
        return False
    target = code_of(first.targets[0].target)
    if code_of(second.targets[0].target) != target or not isinstance(second.value, cst.Name):
        return False
    kept = [e for e in flow.of(Bind) if e.name == second.value.value and e.index < later.index]
    if not kept or kept[-1].index > write.index or kept[-1].expr is None:
        return False
    expr, cloned = kept[-1].expr, False
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("clone", "detach") and not expr.args:
        cloned = cloned or expr.func.attr.value == "clone"
        expr = expr.func.value
    return cloned and code_of(expr) == target


def _target_name(stmt: cst.Assign) -> str:
    """`x` of `x[...] = v`."""
    target = stmt.targets[0].target if len(stmt.targets) == 1 else None
    return target.value.value if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) else ""


def _swapped_sentinel(write: Write) -> tuple[str, str] | None:
    """(`x`, `-1`) for `x[x == -1] = 0`: a constant of `x` replaced by another for a while."""
    stmt = write.stmt
    if not isinstance(stmt, cst.Assign) or len(stmt.targets) != 1:
        return None
    target = stmt.targets[0].target
    if not isinstance(target, cst.Subscript) or not isinstance(target.value, cst.Name) or len(target.slice) != 1:
        return None
    index = target.slice[0].slice
    test = index.value if isinstance(index, cst.Index) else None
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.Equal):
        return None
    constant = test.comparisons[0].comparator
    if code_of(test.left) != target.value.value or not isinstance(constant, (cst.Integer, cst.Float, cst.UnaryOperation)):
        return None
    return target.value.value, code_of(constant)


def sets_its_data(flow: FunctionFlow, arg: str) -> bool:
    """The function assigns `arg.data = ...` (advertorch's `rand_init_delta(delta, x, ...)`):
    that can only be meant to change the caller's tensor, so changing it is the function's job."""
    return _per_argument(flow, arg, _sets_its_data)


def _sets_its_data(fn: cst.FunctionDef, arg: str) -> bool:
    found = False

    class Assigns(cst.CSTVisitor):
        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal found
            target = node.target
            if isinstance(target, cst.Attribute) and target.attr.value == "data" and isinstance(target.value, cst.Name) and target.value.value == arg:
                found = True

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is fn

    fn.visit(Assigns())
    return found


def write_only(flow: FunctionFlow, arg: str) -> bool:
    """The function only ever writes into `arg` (`counts[i] += n`, `out.add_(x)`) and never
    reads it for anything else: an output the caller hands over to be filled, whatever it
    is named. Asked for every write a rule looks at, so kept per function and argument."""
    return _per_argument(flow, arg, _write_only)


def _write_only(fn: cst.FunctionDef, arg: str) -> bool:
    written: set[int] = set()
    seen: list[cst.Name] = []

    def base(target: cst.BaseExpression) -> cst.BaseExpression:
        while isinstance(target, cst.Subscript):
            target = target.value
        return target

    class _Walk(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            written.add(id(base(node.target)))

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            if isinstance(node.target, cst.Subscript):
                written.add(id(base(node.target)))

        def visit_Expr(self, node: cst.Expr) -> None:
            call = node.value
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and api.is_inplace_method(call.func.attr.value):
                written.add(id(base(call.func.value)))

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == arg:
                seen.append(node)

    fn.body.visit(_Walk())
    return bool(seen) and all(id(n) in written for n in seen)


_RESET_METHODS = frozenset(("zero_", "fill_", "mul_"))


def reset_before_use(flow: FunctionFlow, arg: str) -> bool:
    """The first thing the function does with `arg` (after checking it against None) is to
    clear all of it (`grads *= 0.0`, `out.zero_()`, `buf.fill_(0)`, `buf[:] = 0`): its old
    contents are never read, so it is a buffer the caller hands over to be filled. Kept per
    function and argument, like `write_only`."""
    return _per_argument(flow, arg, _reset_before_use)


def _reset_before_use(fn: cst.FunctionDef, arg: str) -> bool:
    found: list[tuple[cst.Name, bool]] = []  # each mention, and whether it is a reset
    resets: set[int] = set()
    none_checks: set[int] = set()

    def zero(node: cst.BaseExpression) -> bool:
        return isinstance(node, (cst.Integer, cst.Float)) and node.evaluated_value == 0  # `0`, `0.0`, `0x0`, `0_0`

    def constant(node: cst.BaseExpression) -> bool:
        inner = node.expression if isinstance(node, cst.UnaryOperation) else node
        return isinstance(inner, (cst.Integer, cst.Float))

    def whole(target: cst.BaseExpression) -> cst.BaseExpression | None:
        """`buf[:]`, `buf[...]`: the whole tensor, written through an index."""
        if isinstance(target, cst.Subscript) and len(target.slice) == 1:
            part = target.slice[0].slice
            if isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None:
                return target.value
            if isinstance(part, cst.Index) and isinstance(part.value, cst.Ellipsis):
                return target.value
        return None

    class _Walk(cst.CSTVisitor):
        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.operator, cst.MultiplyAssign) and zero(node.value):
                resets.add(id(node.target))

        def visit_Assign(self, node: cst.Assign) -> None:
            if len(node.targets) == 1 and constant(node.value):
                base = whole(node.targets[0].target)
                if base is not None:
                    resets.add(id(base))

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _RESET_METHODS:
                args = [a.value for a in node.args]
                if func.attr.value == "zero_" or (func.attr.value == "fill_" and len(args) == 1 and constant(args[0])) or (len(args) == 1 and zero(args[0])):
                    resets.add(id(func.value))

        def visit_Comparison(self, node: cst.Comparison) -> None:
            if any(isinstance(c.operator, (cst.Is, cst.IsNot)) and isinstance(c.comparator, cst.Name) and c.comparator.value == "None" for c in node.comparisons):
                none_checks.add(id(node.left))

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == arg and id(node) not in none_checks:
                found.append((node, id(node) in resets))

    fn.body.visit(_Walk())
    return bool(found) and found[0][1]


def in_evaluation_arm(flow: FunctionFlow, node: cst.CSTNode) -> bool:
    """`node` runs only when the module is in evaluation mode: in the body of `if not
    self.training:` (alone or joined with `and`), or the `else` of `if self.training:`.
    Nothing backpropagates through what evaluation computes, unless a caller trains a model
    left in `eval()`, which is rare and deliberate."""
    scope = flow.scope.node if flow.scope is not None else None
    if scope is None:
        return False
    line = flow.file.line_of(node)
    found = False

    class Find(cst.CSTVisitor):
        def visit_If(self, branch: cst.If) -> None:
            nonlocal found
            body_start, body_end = flow.file.span(branch.body)
            if body_start <= line <= body_end:
                found = found or _evaluation_test(branch.test)
            elif branch.orelse is not None and isinstance(branch.orelse, cst.Else):
                start, end = flow.file.span(branch.orelse)
                found = found or (start <= line <= end and code_of(branch.test) == "self.training")

    scope.visit(Find())
    return found


def _evaluation_test(test: cst.BaseExpression) -> bool:
    """`not self.training`, or an `and` one of whose operands is."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _evaluation_test(test.left) or _evaluation_test(test.right)
    return isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and code_of(test.expression) == "self.training"


# Calls that compare what they are given: inside an `assert`, or asserting themselves.
_COMPARING_CALLS = frozenset("equal allclose isclose all_close array_equal".split())


def checks_the_write(read: Use) -> bool:
    """A read of a name that a test's assertion compares (`assert (td0 != 1.0).all()`,
    `assert (td[i].get(k) == 0).all()`, `torch.testing.assert_close(td0, ...)`), or a loop
    over its keys for such assertions (`for key in td.keys():`, which sees no values): after
    a write through an alias, what such reads check is that the write reached the name. A
    name handed to code under test (`assert f(td0).sum() > 0`) is read as data."""
    stmt = read.stmt
    if isinstance(stmt, cst.For):
        it = stmt.iter
        return isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value == "keys" and it.func.value is read.node
    if isinstance(stmt, cst.Assert):
        checked = [stmt.test]
    elif isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call) and dotted(stmt.value.func).rpartition(".")[2].startswith("assert"):
        checked = [a.value for a in stmt.value.args]
    else:
        return False
    while checked:
        expr = checked.pop()
        while True:  # the object a chain of items, attributes and methods starts from
            if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
                if expr.func.attr.value in _COMPARING_CALLS:
                    checked.extend(a.value for a in expr.args)
                expr = expr.func.value
            elif isinstance(expr, (cst.Subscript, cst.Attribute)):
                expr = expr.value
            else:
                break
        if expr is read.node:
            return True
        if isinstance(expr, cst.Comparison):
            checked.append(expr.left)
            checked.extend(c.comparator for c in expr.comparisons)
        elif isinstance(expr, cst.BooleanOperation):
            checked.extend((expr.left, expr.right))
        elif isinstance(expr, cst.UnaryOperation):
            checked.append(expr.expression)
        elif isinstance(expr, cst.Call) and dotted(expr.func).rpartition(".")[2] in _COMPARING_CALLS:
            checked.extend(a.value for a in expr.args)
    return False


def _per_argument(flow: FunctionFlow, arg: str, fact: Callable[[cst.FunctionDef, str], bool]) -> bool:
    """`fact(function, arg)`, computed once per function and argument and kept with the parse:
    the rules ask it for every write they look at."""
    scope = flow.scope
    if scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    node = scope.node
    return flow.file.once((fact.__name__, id(node), arg), lambda: fact(node, arg))
