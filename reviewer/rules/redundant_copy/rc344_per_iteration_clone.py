"""RC344 per-iteration-clone."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import libcst as cst

from review_copies.analysis.events import Accumulate, Backward, Bind, Call, FunctionFlow, Loop, Store, Use, Write
from review_copies.analysis.parse import is_test_path
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.queries.loops import bound_outside, few_steps, one_iteration
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import dotted, names_in, short_code
from review_copies.analysis.values import Kind, Tri, Value
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.redundant_copy.helpers import clone_receiver, held_roots, read_only_copy

# Container methods that keep what they are handed: a list, a deque, a queue (`add` is a tensor's too).
_GROWING = frozenset(("append", "extend", "insert", "appendleft", "put"))

_VALID = (
    Valid(
        """
        import torch
        def train(model, seed: torch.Tensor, epochs: int, every: int, writer):
            for epoch in range(epochs):
                if epoch % every == 0:
                    x_eval = seed.clone()
                    for _ in range(16):
                        x_eval = model(x_eval)
                    writer(x_eval.detach().cpu())
        """,
        "an evaluation every `every` epochs: one copy in that many iterations (MonashDeepNeuron's growing automaton)",
    ),
    Valid(
        """
        import torch
        def denoise(gt_bbox: torch.Tensor, copies: int, noise: float, boxes: list):
            for _ in range(copies):
                noisy = gt_bbox.clone()
                if noise > 0.0:
                    noisy = noisy + torch.randn_like(noisy) * noise
                boxes.append(noisy)
            return boxes
        """,
        "without noise the clone itself is appended: every iteration's copy is kept (YOLOZU's denoising targets)",
    ),
    Valid(
        """
        import torch
        from torch import nn


        class Decoder(nn.Module):
            def forward(self, td, encoded_inputs: torch.Tensor, env, attn, V, h_old, encoder):
                reward_list = []
                ll_list = []
                td_list = [td.clone() for i in range(self.num_paths)]
                for i in range(self.num_paths):
                    _encoded_inputs = encoded_inputs.clone()
                    _attn = attn.clone()
                    outputs, actions = [], []
                    fixed = self._precompute(_encoded_inputs, path_index=i)
                    j = 0
                    while not td_list[i]["done"].all():
                        if j > 1:
                            _encoded_inputs, _ = encoder.change(_attn, mask)
                            fixed = self._precompute(_encoded_inputs, path_index=i)
                        logprobs, mask = self._get_logprobs(fixed, td_list[i], i)
                        action = logprobs[:, 0, :].argmax(-1)
                        td_list[i] = env.step(td_list[i])["next"]
                        outputs.append(logprobs[:, 0, :])
                        actions.append(action)
                        j += 1
                    outputs, actions = torch.stack(outputs, 1), torch.stack(actions, 1)
                    ll = outputs.gather(2, actions.unsqueeze(-1)).sum(1)
                    reward_list.append(env.get_reward(td, actions))
                    ll_list.append(ll)
                return torch.stack(reward_list, 1), torch.stack(ll_list, 1)
        """,
        "each path's copy feeds outputs the decoder keeps past the path (bound through `logprobs, mask = ...`): one buffer refilled in place would change what the graph saved (rl4co's MDAM decoder)",
    ),
    Valid(
        """
        import torch
        from tensordict import TensorDict
        from tqdm import trange
        class AntSystem:
            def run(self, td_initial: TensorDict, env, n_iterations: int):
                for i in trange(n_iterations):
                    td = td_initial.clone()
                    self._one_step(td, env)
                    self.cache[i] = self.final_reward.clone()
                return self.cache
            def _one_step(self, td: TensorDict, env):
                td = env.step(td)
                self.final_reward = td["reward"] + torch.zeros(1)
        """,
        "`td_initial: TensorDict`: another library's class, whose clone a refill with `copy_` need not replace (rl4co's ant system)",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        class SegmentationModule(torch.nn.Module):
            def predict(self, tensor, imgSizes=(-1,), segSize=None):
                with torch.no_grad():
                    scores = torch.zeros(1, 150, tensor.shape[2], tensor.shape[3])
                    for img_size in imgSizes:
                        if img_size != -1:
                            img_data = F.interpolate(tensor.clone(), size=img_size)
                        else:
                            img_data = tensor.clone()
                        pred_current = self.forward(img_data, segSize=segSize)
                        scores = scores + pred_current / len(imgSizes)
                    return scores.argmax(1)
        """,
        "a loop over the scales of a multi-scale test (`imgSizes=(-1,)` by default): a handful of passes, each a full forward (lama's ADE20k segmenter)",
    ),
    Valid(
        """
        import matplotlib.pyplot as plt
        import torch
        def show(net, encoder, loader, plot_map):
            with torch.no_grad():
                for img, label in loader:
                    out_spikes = 0
                    for t in range(net.T):
                        out_spikes += encoder(img).squeeze()
                        if t == 0 or t == net.T - 1:
                            out_spikes_c = out_spikes.clone()
                            for i in range(out_spikes_c.shape[0]):
                                if out_spikes_c[i].max().item() > out_spikes_c[i].min().item():
                                    out_spikes_c[i] = (out_spikes_c[i] - out_spikes_c[i].min()) / (out_spikes_c[i].max() - out_spikes_c[i].min())
                            plot_map(out_spikes_c)
                            plt.show()
        """,
        "the copy is made on the first and the last step only (`if t == 0 or t == net.T - 1:`), not on every iteration (spikingjelly's tutorial plot)",
    ),
    Valid(
        """
        import torch
        def mtp_losses(lm_head, hidden_states, labels, loss_fn):
            shifted = None
            total = 0.0
            for hidden in hidden_states:
                logits = lm_head(hidden)
                if shifted is None:
                    shifted = labels.clone()
                shifted = torch.roll(shifted, -1, dims=-1)
                total = total + loss_fn(logits.flatten(0, 1), shifted.flatten())
            return total
        """,
        "`if shifted is None:` clones on the first iteration only; later ones roll the previous result",
    ),
    Valid(
        """
        import torch
        def f(template: torch.Tensor, steps: int):
            out = []
            for step in range(steps):
                work = template.clone()
                work.add_(step)
                out.append(work)
            return out
        """,
        "each copy is kept",
    ),
    Valid(
        """
        import torch
        def children(parent_value: torch.Tensor, parent_label: torch.Tensor, n: int, sigma: float):
            found = []
            for _ in range(n):
                child_value = parent_value + sigma * torch.randn_like(parent_value)
                child_label = parent_label.clone()
                found.append((child_value, child_label))
            return found
        """,
        "each copy is kept, inside the tuple the loop appends",
    ),
    Valid(
        """
        import torch
        def run(layers, x: torch.Tensor, edge_attr: torch.Tensor, recalc):
            original_edge_attr = edge_attr.clone()
            for i, layer in enumerate(layers):
                edge_attr = torch.cat([edge_attr[:, :-1], edge_attr[:, -1:].long().float()], dim=-1)
                x = layer(x, edge_attr)
                if recalc is not None:
                    edge_attr = recalc(x.detach())
                else:
                    edge_attr = original_edge_attr.clone()
            return x
        """,
        "the next pass reads `edge_attr` before setting it: each copy lives into the next iteration",
    ),
    Valid(
        """
        import torch
        def f(meshes, offsets: torch.Tensor):
            areas = []
            for offset in offsets:
                moved = meshes.clone()
                moved.offset_verts_(offset)
                areas.append(moved.area().sum().item())
            return areas
        """,
        "`meshes` is no tensor (a structure with its own `clone`): `empty_like` would not fit it",
    ),
    Valid(
        """
        import torch
        import torch.distributed as dist
        def reduce_logs(log_vars: dict[str, torch.Tensor]) -> dict[str, float]:
            out = {}
            for name, value in log_vars.items():
                value = value.data.clone()
                dist.all_reduce(value)
                out[name] = value.item()
            return out
        """,
        "the loop clones another tensor every iteration (`value.data` of its own `value`): no one buffer fits them all",
    ),
    Valid(
        """
        import torch
        def route(logits: torch.Tensor, budgets, num_experts: int):
            scores_for_topk = 0
            for budget in budgets:
                masked = logits.clone()
                masked[:, int(budget * num_experts):] = float("-inf")
                scores = torch.sigmoid(masked)
                scores_for_topk += scores
            return scores_for_topk
        """,
        "each clone feeds a graph that outlives its iteration: one refilled buffer would change what that graph saved",
    ),
    Valid(
        """
        import torch
        from torch import nn
        def normalize_prototypes(head: nn.Module):
            for j in range(head.nmb_heads):
                w = getattr(head, "prototypes" + str(j)).weight.data.clone()
                w = nn.functional.normalize(w, dim=1, p=2)
                getattr(head, "prototypes" + str(j)).weight.copy_(w)
        """,
        "the source is looked up anew each iteration (another layer, maybe another shape): no one buffer fits them all",
    ),
    Valid(
        """
        import torch
        def search(A, log_probs, blank_id: int):
            B = HypothesisList()
            for h in range(len(A)):
                hyp = A[h]
                for k in range(log_probs.size(0)):
                    new_hyp = hyp.clone()
                    new_hyp.log_prob_blank = hyp.log_prob + log_probs[k]
                    B.add(new_hyp)
            return B
        """,
        "`hyp` has attributes no tensor has (`log_prob`): a hypothesis object, whose clone is not a tensor buffer",
    ),
    Valid(
        """
        import torch
        def generate(model, init_out: torch.Tensor, init_state: torch.Tensor, start: int, length: int):
            tokens = []
            for i in range(start, start + length):
                if i == start:
                    out = init_out.clone()
                    state = init_state.clone()
                else:
                    out, state = model(tokens[-1], state)
                out[0] = -1e9
                tokens.append(int(out.argmax()))
            return tokens
        """,
        "the clones run in the loop's first iteration only (`if i == start:`): one copy per loop, not one per iteration",
    ),
    Valid(
        """
        import torch
        def best_swap(coords: torch.Tensor, swaps, score):
            best = coords
            best_score = score(coords)
            for swap in swaps:
                for i, j in swap:
                    trial = coords.clone()
                    trial[:, j] = coords[:, i]
                    if score(trial) > best_score:
                        best = trial
                        best_score = score(trial)
                coords = best.clone()
            return coords
        """,
        "the best try is kept as `best`: one buffer refilled every iteration would change what `best` holds",
    ),
    Valid(
        """
        import torch
        def train(net, loader, loss_func, optimizer, w_glob: torch.Tensor, idx: int, lam: float):
            for images, labels in loader:
                loss = loss_func(net(images), labels)
                w = w_glob.clone()
                w[:, idx] = torch.cat([p.flatten() for p in net.parameters()])
                loss = loss + lam * w.norm() ** 2
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        "the copy is written with the parameters and backpropagated: one buffer refilled with `copy_` would chain every "
        "iteration's graph onto the last, and the next backward would run through freed ones (FedRep's regularizer)",
    ),
)


class PerIterationCloneIntoNewTensor(Rule):
    """
    ## What it does
    Finds a loop that clones the same loop-invariant tensor into a new tensor on every
    iteration, only to modify the copy in place and drop it.

    ## Why is this bad?
    Each iteration allocates and frees a full-size tensor. A buffer allocated once before
    the loop and refilled with `buf.copy_(src)` does the same work without the
    allocations (and without allocator churn on the GPU).

    ## Example
    ```python
    for step in range(steps):
        work = template.clone()
        work.add_(noise[step])
        results.append(work.sum())
    ```

    ## Use instead
    ```python
    work = torch.empty_like(template)
    for step in range(steps):
        work.copy_(template)
        work.add_(noise[step])
        results.append(work.sum())
    ```

    ## Fix safety
    No automatic fix (it moves code out of the loop); the message says what to change.
    Clones that are kept (appended, yielded, returned) are not reported, nor clones under
    `if i == 0:` (or `if i == start:` in a `range`/`enumerate` loop), which run once, nor loops in
    a test's file (`tests/`, `test_*.py`), which run a few times to check results.
    """

    code = "RC344"
    name = "per-iteration-clone"
    category = Category.REDUNDANT_COPY
    severity = Severity.INFO
    prefilter = ("clone(",)
    recipes = ("copy-bytes",)

    VALID = _VALID
    INVALID = (
        Invalid(
            """
            import torch
            def f(template: torch.Tensor, noise: torch.Tensor, steps: int):
                sums = []
                for step in range(steps):
                    work = template.clone()
                    work.add_(noise[step])
                    sums.append(work.sum().item())
                return sums
            """,
            line=5,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if is_test_path(flow.file.path):
            return  # a test's loop runs a few times to check results: an allocation there costs nothing worth a rewrite
        for bind in flow.of(Bind):
            if not bind.loops or bind.expr is None:
                continue
            source = clone_receiver(bind.expr)
            if source is None or not isinstance(source, (cst.Name, cst.Attribute)):
                continue
            loop = flow.loops[bind.loops[-1]]
            if few_steps(loop, flow):
                continue  # `for size in (300, 450)`: a handful of passes, each doing far more work than one copy
            if one_iteration(flow, bind, loop) or _set_once(flow, bind, loop):
                continue  # `if i == start: out = init.clone()`: one copy per loop, not one per iteration
            if _periodic(flow, bind, loop):
                continue  # `if epoch % eval_every == 0: x = seed.clone()`: an evaluation's copy now and then
            src_name = name_of(source)
            if not src_name:
                continue  # `getattr(head, f"proto{j}").weight.clone()`: the source is looked up anew every iteration
            # `loss_value.data.clone()` in `for name, loss_value in ...`: the attribute of a name
            # the loop rebinds is another tensor (maybe of another shape) every iteration too.
            rebound = {src_name, src_name.split(".")[0]}
            if any(isinstance(e, Bind) and e.name in rebound and set(e.loops) & {bind.loops[-1]} for e in flow.events):
                continue  # the source changes every iteration
            roots = bind.value.roots
            kept = (
                any(isinstance(e, Store) and held_roots(e.value) & roots for e in flow.events)
                or any(type(e).__name__ == "Return" and held_roots(e.value) & roots for e in flow.events)
                or _appended(flow, roots)
            )
            holders = {bind.name} | _aliases_in_loop(flow, bind, loop)
            used_after = any(isinstance(e, Use) and e.name in holders and e.line > loop.end for e in flow.events)
            if kept or used_after or bind.value.kind is not Kind.TENSOR:
                continue
            if _carried(flow, bind, loop):
                continue  # read by the next iteration before it is set again: the copy outlives its iteration
            if _used_as_other_class(flow, {src_name, bind.name}):
                continue  # `mesh.clone()`, `cameras.clone()`: other classes clone too, and `empty_like` fits only tensors
            if not bind.no_grad and bind.value.grad is not Tri.NO and _outlives_iteration(flow, bind, loop):
                continue  # a graph built on the clone outlives the iteration: refilling one buffer would change what it saved
            if _written_with_a_graph(flow, bind, loop):
                continue  # the copy joins the graph: a buffer refilled in place would carry each iteration's graph into the next
            copies = f"`{bind.name} = {short_code(bind.expr)}` allocates a new full-size copy on every iteration of the loop at line {loop.start}"
            if read_only_copy(flow, bind, loop, source):
                message = (
                    f"{copies}, and nothing in the iteration writes into the copy or into `{src_name}`, nor hands the copy to a call that could: "
                    f"`{bind.name} = {src_name}` reads the same values without copying."
                )
            else:
                message = (
                    f"{copies}, used only within the iteration. Allocate once before the loop (`{bind.name} = torch.empty_like({src_name})`) "
                    f"and refill it with `{bind.name}.copy_({src_name})` inside."
                )
            yield Hit(bind.node, message)


def _appended(flow: FunctionFlow, roots: frozenset[str]) -> bool:
    """`bbox_list.append(noisy_bbox)` into a list the analysis does not know (a parameter, a
    list or None): each iteration's copy is kept, on the path where nothing rebound the name."""
    return any(
        isinstance(e, Call) and e.method in _GROWING and (e.receiver is None or e.receiver.kind is not Kind.TENSOR) and any(held_roots(a) & roots for a in e.args)
        for e in flow.events
    )


def _carried(flow: FunctionFlow, bind: Bind, loop: Loop) -> bool:
    """egnn's `else: edge_attr = original_edge_attr.clone()` at the end of a layer loop whose
    next pass starts by reading `edge_attr`: the name's first event in the loop body is a
    read, so each iteration's copy lives on into the next."""
    inside = [e for e in flow.events if isinstance(e, (Use, Bind)) and e.name == bind.name and loop.start <= e.line <= loop.end]
    first = min(inside, key=lambda e: e.index, default=None)
    return isinstance(first, Use) and first.index < bind.index


def _written_with_a_graph(flow: FunctionFlow, bind: Bind, loop: Loop) -> bool:
    """`w = w_glob.clone(); w[:, idx] = torch.cat(params)`, then a backward through `w` in the
    same iteration: the copy joins the graph. An in-place write keeps the tensor's history,
    so a buffer reused across iterations would carry every earlier graph into the next
    backward."""
    later = [e for e in flow.events if bind.index < e.index and e.line <= loop.end]
    if not any(
        isinstance(e, Write) and not e.no_grad and e.target.roots & bind.value.roots and e.source is not None and _may_carry_graph(e.source) for e in later
    ):
        return False
    derived = {bind.name}
    for event in later:
        made = event.expr if isinstance(event, Bind) else event.value_node if isinstance(event, Accumulate) else None
        if isinstance(event, (Bind, Accumulate)) and made is not None and names_in(made) & derived:
            derived.add(event.name)
        elif isinstance(event, Backward) and event.outputs is not None and names_in(event.outputs) & derived:
            return True
    return False


def _periodic(flow: FunctionFlow, bind: Bind, loop: Loop) -> bool:
    """The clone sits under `if <n> % <k> == 0:` in the loop (an evaluation or a log every k
    steps): one copy in k iterations, not one per iteration."""
    return _guarded(flow, bind, loop, lambda test: isinstance(test, cst.Comparison) and isinstance(test.left, cst.BinaryOperation) and isinstance(test.left.operator, cst.Modulo))


def _set_once(flow: FunctionFlow, bind: Bind, loop: Loop) -> bool:
    """`if shifted is None: shifted = labels.clone()` in the loop, and the loop never sets
    the name back to None: the clone is made on the first iteration only."""
    if any(isinstance(e, Bind) and e.name == bind.name and isinstance(e.expr, cst.Name) and e.expr.value == "None" and loop.start <= e.line <= loop.end for e in flow.events):
        return False
    return _guarded(
        flow,
        bind,
        loop,
        lambda test: isinstance(test, cst.Comparison)
        and name_of(test.left) == bind.name
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Is)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None",
    )


def _guarded(flow: FunctionFlow, bind: Bind, loop: Loop, test: Callable[[cst.BaseExpression], bool]) -> bool:
    """The bind sits in the body of an `if` of the loop whose test passes `test`."""
    found = False

    class Guards(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            nonlocal found
            if test(node.test):
                start, end = flow.file.span(node.body)
                found = found or start <= bind.line <= end

    loop.node.body.visit(Guards())
    return found


def _aliases_in_loop(flow: FunctionFlow, bind: Bind, loop: Loop) -> set[str]:
    """Names the loop binds to the clone as it is (`best = trial`): read after the loop, they
    keep the iteration's copy alive past it (boltz keeps its best symmetry swap so)."""
    return {e.name for e in flow.of(Bind) if bind.index < e.index and e.line <= loop.end and e.name != bind.name and isinstance(e.expr, cst.Name) and e.expr.value == bind.name}


def _used_as_other_class(flow: FunctionFlow, names: set[str]) -> bool:
    """Is one of `names` called with a method torch.Tensor does not have (`offset_verts_`,
    `transform_boxes_`, `get_world_to_view_transform`), or is an attribute torch.Tensor does
    not have read or set on it (`new_hyp.ys = ...`, `hyp.log_prob`: a hypothesis object)?"""
    tensor_attributes = api.tensor_methods()
    for call in flow.of(Call):
        func = call.call.func
        if isinstance(func, cst.Attribute) and name_of(func.value) in names and func.attr.value not in tensor_attributes:
            return True
    scope = flow.scope
    if scope is None:
        return False
    if isinstance(scope.node, cst.FunctionDef) and _annotated_other_class(flow, scope.node, names):
        return True
    found = False

    class Attributes(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            nonlocal found
            attr = node.attr.value
            if isinstance(node.value, cst.Name) and node.value.value in names and attr not in tensor_attributes and not attr.startswith(("is_", "_")):
                found = True

    scope.node.visit(Attributes())
    return found


def _outlives_iteration(flow: FunctionFlow, bind: Bind, loop: Loop) -> bool:
    """Something computed from the clone in this iteration is kept past it: added into an
    accumulator from before the loop, or stored (`scores_for_topk += sigmoid(clone)`)."""
    derived = {bind.name}
    for event in flow.events:
        if event.index <= bind.index or event.line > loop.end:
            continue
        made = _made_from(event) if isinstance(event, Bind) else None
        if made is not None and names_in(made) & derived:
            derived.add(event.name)
        elif isinstance(event, Accumulate) and names_in(event.value_node) & derived and _may_carry_graph(event.value):
            if bound_outside(flow, event.name, loop):
                return True
        elif isinstance(event, Store) and event.value_node is not None and names_in(event.value_node) & derived and _may_carry_graph(event.value):
            return True
    return False


def _made_from(bind: Bind) -> cst.BaseExpression | None:
    """What a name was bound from, the whole right-hand side for a tuple target (`logprobs,
    mask = self._get_logprobs(fixed, ...)` in MDAM's decoder, whose paths keep the outputs)."""
    if bind.expr is not None:
        return bind.expr
    return bind.stmt.value if isinstance(bind.stmt, (cst.Assign, cst.AnnAssign)) else None


def _may_carry_graph(value: Value) -> bool:
    """A tensor that may be attached (not `.item()`, not `.detach()`)."""
    return value.kind in (Kind.TENSOR, Kind.UNKNOWN) and value.grad is not Tri.NO


def _annotated_other_class(flow: FunctionFlow, node: cst.FunctionDef, names: set[str]) -> bool:
    """`td_initial: TensorDict`, imported from a package other than torch: a parameter
    annotated with another library's class. Its `clone()` is that class's, and `empty_like`
    plus `copy_` need not fit it (an environment step adds keys to a TensorDict that a
    refill would leave behind)."""
    for param in (*node.params.params, *node.params.kwonly_params):
        if param.name.value not in names or param.annotation is None:
            continue
        spelled = dotted(param.annotation.annotation)
        if not spelled or not spelled.rsplit(".", 1)[-1][:1].isupper():
            continue
        quals = flow.file.imports.resolve(spelled)
        if quals and all(q.split(".")[0] not in ("torch", "typing", "typing_extensions", "numpy", "builtins") for q in quals):
            return True
    return False
