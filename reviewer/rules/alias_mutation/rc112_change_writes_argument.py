"""RC112 change-writes-argument."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.guesses import COUNT_NAME
from review_copies.analysis.queries.aliasing import last_bind, on_every_path
from review_copies.analysis.queries.intent import declares_mutation, is_mutating_function, registered_op, state_like
from review_copies.analysis.rewrite import out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import names_in, short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.alias_mutation.helpers import caller_reading_again, callers_in_repository_drop
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_VALID = (
    Valid(
        """
        import torch
        def fit(model, tasks: list, epochs):
            if not isinstance(epochs, list):
                epochs = [epochs] * len(tasks)
            epochs += [epochs[-1]] * (len(tasks) - len(epochs)) if len(epochs) < len(tasks) else []
            for task, n in zip(tasks, epochs):
                model.fit(task, n)
        """,
        "`+=` of a list extends a list: a tensor takes no list, so no caller's tensor is written (distributed-continual-learning)",
        before="""
        import torch
        def fit(model, tasks: list, epochs):
            if not isinstance(epochs, list):
                epochs = [epochs] * len(tasks)
            for task, n in zip(tasks, epochs):
                model.fit(task, n)
        """,
    ),
    Valid(
        """
        import torch
        from torch import nn
        class NeuralMemory(nn.Module):
            def __init__(self, dim: int, heads: int, momentum_order = 1, include_zeroth = False):
                super().__init__()
                if include_zeroth:
                    momentum_order += 1
                self.combine = nn.Linear(dim, heads * momentum_order)
        """,
        "`momentum_order = 1` is a count: `+=` binds the name anew and writes nothing a caller holds (titans-pytorch)",
        before="""
        import torch
        from torch import nn
        class NeuralMemory(nn.Module):
            def __init__(self, dim: int, heads: int, momentum_order = 1):
                super().__init__()
                self.combine = nn.Linear(dim, heads * momentum_order)
        """,
    ),
    Valid(
        """
        import torch
        from tensordict import TensorDict


        def get_distance_matrix(locs):
            return (locs[..., :, None, :] - locs[..., None, :, :]).norm(p=2, dim=-1)


        class AntSystem:
            def local_search(self, td: TensorDict, env, actions: torch.Tensor):
                device = td.device
                if env.name in ["tsp", "cvrp"]:
                    td = td.detach().cpu()
                    td["distances"] = get_distance_matrix(td["locs"])
                    actions = actions.detach().cpu()
                td_cpu, reward = env.local_search(td=td, actions=actions)
                return td_cpu.to(device), reward
        """,
        "`td[\"distances\"] = ...` sets an entry of a TensorDict made by `td.detach().cpu()`: a string key writes no tensor memory the caller holds (rl4co's ant system)",
        before="""
        import torch
        from tensordict import TensorDict


        def get_distance_matrix(locs):
            return (locs[..., :, None, :] - locs[..., None, :, :]).norm(p=2, dim=-1)


        class AntSystem:
            def local_search(self, td: TensorDict, env, actions: torch.Tensor):
                device = td.device
                if env.name in ["tsp", "cvrp"]:
                    td = td.detach().cpu()
                    actions = actions.detach().cpu()
                td_cpu, reward = env.local_search(td=td, actions=actions)
                return td_cpu.to(device), reward
        """,
    ),
    Valid(
        """
        import torch
        class LinearChain:
            def _check_potentials(self, edge, lengths=None):
                batch, n, c, c2 = edge.shape
                edge.requires_grad_(True)
                if lengths is None:
                    lengths = torch.LongTensor([n + 1] * batch)
                return edge, batch, n + 1, c, lengths
            def _dp(self, log_potentials, lengths=None):
                log_potentials, batch, n, c, lengths = self._check_potentials(log_potentials, lengths)
                return log_potentials.logsumexp(-1).sum(), lengths
        """,
        "`requires_grad_(True)` sets a flag and writes none of the values callers read (torch-struct marks its potentials for their marginals)",
        before="""
        import torch
        class LinearChain:
            def _check_potentials(self, edge, lengths=None):
                batch, n, c, c2 = edge.shape
                if lengths is None:
                    lengths = torch.LongTensor([n + 1] * batch)
                return edge, batch, n + 1, c, lengths
            def _dp(self, log_potentials, lengths=None):
                log_potentials.requires_grad_(True)
                log_potentials, batch, n, c, lengths = self._check_potentials(log_potentials, lengths)
                return log_potentials.logsumexp(-1).sum(), lengths
        """,
    ),
    Valid(
        """
        import torch
        def additive_margin_softmax_ce(similarities, targets, memory_flags, scale=1.0, margin=0.4, old_classes_temperature=None):
            similarities = scale * (similarities - margin)
            if old_classes_temperature:
                temps = torch.ones_like(similarities)
                temps[memory_flags.bool()] = old_classes_temperature
                similarities.div_(temps)
            return torch.nn.functional.cross_entropy(similarities, targets)
        """,
        "`similarities` was bound to a new tensor first: the write goes into it, not into the caller's (incremental_learning.pytorch)",
        before="""
        import torch
        def additive_margin_softmax_ce(similarities, targets, memory_flags, scale=1.0, margin=0.4, old_classes_temperature=None):
            similarities = scale * (similarities - margin)
            return torch.nn.functional.cross_entropy(similarities, targets)
        """,
    ),
    Valid(
        """
        import torch
        import triton
        import triton.language as tl
        @triton.heuristics({"USE_G": lambda args: args["g"] is not None})
        @triton.jit(do_not_specialize=["T"])
        def bwd_kernel_dq(q, g, dq, T, H: tl.constexpr, K: tl.constexpr):
            i_t, i_bh = tl.program_id(0), tl.program_id(1)
            q += i_bh * T * K
            dq += i_bh * T * K
            g += i_bh * T
            b_q = tl.load(q + i_t * K + tl.arange(0, K))
            tl.store(dq + i_t * K + tl.arange(0, K), b_q * tl.load(g + i_t))
        """,
        "a Triton kernel: its arguments are pointers, and `dq += offset` moves one (flash-linear-attention)",
        before="""
        import torch
        import triton
        import triton.language as tl
        @triton.jit
        def bwd_kernel_dq(q, g, dq, T, H: tl.constexpr, K: tl.constexpr):
            i_t, i_bh = tl.program_id(0), tl.program_id(1)
            b_q = tl.load(q + i_bh * T * K + i_t * K + tl.arange(0, K))
            tl.store(dq + i_bh * T * K + i_t * K + tl.arange(0, K), b_q * tl.load(g + i_bh * T + i_t))
        """,
    ),
    Valid(
        """
        import torch
        from torch import nn
        class UNet(nn.Module):
            def __init__(self, in_channels, model_channels, lq_size=256):
                super().__init__()
                base_chn = 3 if lq_size == 256 else 16
                in_channels += base_chn
                self.conv = nn.Conv2d(in_channels, model_channels, 3, padding=1)
        """,
        "`in_channels` is a channel count: `+=` rebinds a number (ResShift's UNet)",
        before="""
        import torch
        from torch import nn
        class UNet(nn.Module):
            def __init__(self, in_channels, model_channels, lq_size=256):
                super().__init__()
                self.conv = nn.Conv2d(in_channels, model_channels, 3, padding=1)
        """,
    ),
    Valid(
        """
        import torch
        from generators import Generator1D
        class Solver:
            def __init__(self, train_generator=None, t_min=0.0, t_max=1.0, n_input_units=2):
                if train_generator is None:
                    train_generator = Generator1D(32, t_min=t_min, t_max=t_max)
                    for i in range(n_input_units - 1):
                        train_generator ^= Generator1D(32, t_min=t_min, t_max=t_max)
                self.train_generator = train_generator
        """,
        "the name was bound to a new generator in the same arm: `^=` works on that, never on what the caller passed (neurodiffeq)",
        before="""
        from generators import Generator1D
        class Solver:
            def __init__(self, train_generator=None, t_min=0.0, t_max=1.0, n_input_units=2):
                if train_generator is None:
                    train_generator = Generator1D(32, t_min=t_min, t_max=t_max)
                self.train_generator = train_generator
        """,
    ),
    Valid(
        """
        import torch
        def downsample(coords: torch.Tensor, stride: torch.Tensor):
            coords = coords.clone()
            coords[:, :3] = coords[:, :3] // stride * stride
            return torch.unique(coords, dim=0)
        """,
        "the write goes into the copy the function made first (torchsparse's `spdownsample`)",
        before="""
        import torch
        def downsample(coords: torch.Tensor, stride: torch.Tensor):
            return torch.unique(coords // stride * stride, dim=0)
        """,
    ),
    Valid(
        """
        import torch
        def sinkhorn(q: torch.Tensor, num_iters: int) -> torch.Tensor:
            q /= torch.sum(q)
            for _ in range(num_iters):
                q *= (1.0 / torch.sum(q, dim=1)).unsqueeze(1)
            return q.t()
        """,
        "the change renames `Q` to `q`: the base version already wrote into that same argument",
        before="""
        import torch
        def sinkhorn(Q: torch.Tensor, num_iters: int) -> torch.Tensor:
            Q /= torch.sum(Q)
            for _ in range(num_iters):
                Q *= (1.0 / torch.sum(Q, dim=1)).unsqueeze(1)
            return Q.t()
        """,
    ),
    Valid(
        """
        import torch
        def step_(w, g, lr):
            w.sub_(lr * g)
        """,
        "named to mutate (trailing underscore)",
        before="""
        import torch
        def step_(w, g, lr):
            w.data.add_(-lr * g)
        """,
    ),
    Valid(
        """
        import torch
        def clip(x, bound):
            x.clamp_(-bound, bound)
            return x
        """,
        "the base version already wrote `x` in place: writing it is the function's job",
        before="""
        import torch
        def clip(x, bound):
            x.clamp_(min=-bound)
            x.clamp_(max=bound)
            return x
        """,
    ),
    Valid(
        """
        import torch
        def scaled(tensor, std):
            def fill(tensor, std):
                tensor.normal_(0.0, std)
                return tensor
            return fill(tensor.new_empty(tensor.shape), std)
        """,
        "the write is into the nested function's own parameter, which only shares the name",
        before="""
        import torch
        def scaled(tensor, std):
            return torch.randn_like(tensor) * std
        """,
    ),
)


class ChangeWritesArgument(Rule):
    """
    ## What it does
    Finds a change that makes a function write into one of its arguments in place
    (`img.sub_(mean)`, `x /= norm`, `t[mask] = 0`) when the base version of the same
    function never wrote that argument.

    ## Why is this bad?
    The change altered the function's contract: callers that pass a tensor and keep using
    it afterwards now see it changed behind their back (allennlp's `Covariance` metric
    masked the caller's predictions with `predictions *= mask`; torchmetrics' pairwise
    cosine similarity normalised the caller's `x` with `x /= norm`). A function that
    always wrote its argument is left alone: that was its job.

    ## Example
    ```python
    # before the change: img = (img - mean) / std
    def normalize(img, mean, std):
        img.sub_(mean).div_(std)
        return img
    ```

    ## Use instead
    ```python
    def normalize(img, mean, std):
        return (img - mean) / std
    ```

    ## Fix safety
    A plain `x += v` or `x.op_(v)` is rewritten out of place (`x = x + v`), which keeps
    the result and leaves the caller's tensor alone; other writes get no automatic fix.

    ## Known problems
    Only direct writes through the parameter's own name are seen; a write through an
    alias made on another line is left to RC101/RC102. Functions named for mutating
    (`*_`, `update_*`, `reset_*`) or that take an `inplace` flag are not reported, nor a
    module's `forward` (its input written in place is RC204's), nor a function every call
    of which in the repository passes something its caller never reads again (the index
    says; a library's users outside the repository are not seen, so a function no code
    here calls is still reported). A parameter named for a count or a size (`in_channels`,
    `num_heads`, `hidden_size`) that nothing else says is a tensor is taken for a number.
    """

    code = "RC112"
    name = "change-writes-argument"
    category = Category.ALIAS_MUTATION
    severity = Severity.WARNING
    prefilter = ("torch",)
    recipes = ("input-mutation",)
    follows_change = True

    VALID = _VALID
    INVALID = (
        Invalid(
            """
            import torch
            def cosine(x, y):
                x /= x.norm(dim=1, keepdim=True)
                y = y / y.norm(dim=1, keepdim=True)
                return x @ y.T
            """,
            line=3,
            before="""
            import torch
            def cosine(x, y):
                x = x / x.norm(dim=1, keepdim=True)
                y = y / y.norm(dim=1, keepdim=True)
                return x @ y.T
            """,
            fix="""
            import torch
            def cosine(x, y):
                x = x / x.norm(dim=1, keepdim=True)
                y = y / y.norm(dim=1, keepdim=True)
                return x @ y.T
            """,
            note="torchmetrics' pairwise cosine similarity, simplified",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        change = flow.change
        if change is None or change.new or flow.scope is None or not isinstance(flow.scope.node, cst.FunctionDef):
            return
        if is_mutating_function(flow) or declares_mutation(flow) or registered_op(flow):
            return
        if flow.is_forward:
            return  # a module's input written in place is an autograd matter (RC204), not an alias one
        # Hits off the change's lines are dropped when placed; an unchanged line that writes
        # the argument was in the base version too, which `base_writes` already says.
        reported: set[str] = set()
        for stmt, param in _writes(flow, set(flow.params)):
            if param in reported or param in change.base_writes or state_like(param):
                continue
            if callers_in_repository_drop(flow, param):
                continue  # every call in the repository passes something it never reads again: no caller sees the write
            reported.add(param)
            where = f"`{flow.scope.name}`"
            caller = caller_reading_again(flow, param)
            message = (
                f"This change makes {where} write into its argument `{param}` (`{short_code(stmt)}`): the base version left the "
                f"caller's tensor alone, so callers that keep using `{param}` after the call now see it changed"
                f"{f' ({caller})' if caller else ''}. Use the out-of-place op."
            )
            yield Hit(stmt, message, out_of_place(stmt, lambda m: api.method_returns(m) == "tensor"))


def _writes(flow: FunctionFlow, params: set[str]) -> Iterator[tuple[cst.CSTNode, str]]:
    """Statements that write in place through a parameter's own name, in order."""
    out: list[tuple[cst.CSTNode, str]] = []
    kinds = {name: value.kind for name, value in flow.params.items()}
    assert flow.scope is not None and isinstance(flow.scope.node, cst.FunctionDef)
    # `momentum_order = 1`: an integer (or flag) default says the parameter is a count, and
    # `momentum_order += 1` binds the name anew; no caller's memory is written.
    counts = {p.name.value for p in (*flow.scope.node.params.params, *flow.scope.node.params.kwonly_params) if _int_literal(p.default)}

    def tensorish(name: str) -> bool:
        kind = kinds.get(name, Kind.UNKNOWN)
        return kind in (Kind.TENSOR, Kind.NDARRAY) or (kind is Kind.UNKNOWN and not COUNT_NAME.search(name) and name not in counts)

    class Find(cst.CSTVisitor):
        def __init__(self) -> None:
            # Names a nested function takes as its own parameters: inside it they are not ours.
            self.shadowed: list[set[str]] = [set()]

        def ours(self, name: str) -> bool:
            return name in params and name not in self.shadowed[-1]

        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            own = {p.name.value for p in (*node.params.params, *node.params.kwonly_params, *node.params.posonly_params)}
            self.shadowed.append(self.shadowed[-1] | own if node is not flow.scope.node else set())

        def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
            self.shadowed.pop()

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name) and self.ours(node.target.value) and tensorish(node.target.value) and not _sequence(node.value):
                out.append((node, node.target.value))

        def visit_Expr(self, node: cst.Expr) -> None:
            call = node.value
            while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
                method = call.func.attr.value
                receiver = call.func.value
                # `x.requires_grad_(True)` sets a flag and writes no values: what callers read of
                # `x` is unchanged (torch-struct marks its potentials for its marginals this way).
                if isinstance(receiver, cst.Name) and self.ours(receiver.value) and api.is_inplace_method(method) and method != "requires_grad_":
                    out.append((node, receiver.value))
                    return
                call = receiver

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                t = target.target
                # `td["distances"] = ...`: a string key sets an entry of a mapping (a TensorDict),
                # which no tensor or array has; nothing in memory the caller holds is written.
                keyed = isinstance(t, cst.Subscript) and any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.SimpleString) for e in t.slice)
                if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and self.ours(t.value.value) and kinds.get(t.value.value) in (Kind.TENSOR, Kind.NDARRAY) and not keyed:
                    out.append((node, t.value.value))

    flow.scope.node.visit(Find())
    # What the interpreter saw written at each statement: `coords = coords.clone()` before
    # `coords[:, :3] = ...` writes into the copy, not into the caller's tensor.
    seen: dict[int, list[Write]] = {}
    for write in flow.of(Write):
        seen.setdefault(id(write.stmt), []).append(write)

    def elsewhere(node: cst.CSTNode, param: str) -> bool:
        """Every write there surely lands in memory the function made itself, or the name
        was bound to arithmetic first (`sims = scale * (sims - m)`), a new value whatever its
        operands are; a name bound to a helper's result (`x = _check_input(x)`) may still be
        the argument."""
        writes = seen.get(id(node))
        if writes is None:
            return _made_afresh(flow, node, param)

        def arithmetic(write: Write) -> bool:
            bind = last_bind(flow, param, write.index, reaching=write)
            return bind is not None and isinstance(bind.expr, (cst.BinaryOperation, cst.UnaryOperation))

        return all(roots.allocated_here(w.target.roots) or arithmetic(w) for w in writes)

    yield from sorted(((node, param) for node, param in out if not elsewhere(node, param)), key=lambda pair: flow.file.line_of(pair[0]))


def _made_afresh(flow: FunctionFlow, node: cst.CSTNode, param: str) -> bool:
    """`gen = Generator1D(...)`, then `gen ^= Generator1D(...)` in the same arm: the name was
    bound to something made without the argument on every path to the write, so whatever
    the operator does, the caller's object is not what it works on."""
    anchor = next((e for e in flow.events if e.stmt is node), None)
    if anchor is None:
        return False
    bind = last_bind(flow, param, anchor.index, reaching=anchor)
    return bind is not None and bind.expr is not None and param not in names_in(bind.expr) and on_every_path(bind, anchor, anchor)


def _sequence(node: cst.BaseExpression) -> bool:
    """A list, tuple or string, made however (`[epochs[-1]] * n if short else []`): `+=` of one
    extends a list or a string, since a tensor takes neither (`TypeError`)."""
    if isinstance(node, cst.IfExp):
        return _sequence(node.body) and _sequence(node.orelse)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Multiply)):
        return _sequence(node.left) or _sequence(node.right)
    return isinstance(node, (cst.List, cst.Tuple, cst.ListComp, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))


def _int_literal(node: cst.BaseExpression | None) -> bool:
    """`1`, `-1`, `True`: a default no tensor is written like."""
    if isinstance(node, cst.UnaryOperation):
        node = node.expression
    return isinstance(node, cst.Integer) or (isinstance(node, cst.Name) and node.value in ("True", "False"))

