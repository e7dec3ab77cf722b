"""RC252 stored-attached-tensor."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow, Loop, Store, Write
from review_copies.analysis.queries.aliasing import emptied_before
from review_copies.analysis.queries.autograd import another_objects_result, graphless_method_call
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.loops import bound_each_step, bound_outside, few_steps, loop_of, one_iteration, step_loop
from review_copies.analysis.syntax import names_in, short_code
from review_copies.analysis.values import Kind, Tri
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.graph_retention.helpers import (
    backward_after,
    backward_on_built,
    carried_into_next_pass,
    combined_after,
    detached,
    emptied_by_another_method,
    keeps_graph,
    made_into_array,
    same_key_each_pass,
    stored_expression,
    trimmed,
    under_tensor_methods,
)

_VALID = (
    Valid(
        """
        import torch
        def run_network(network_fn, pts: torch.Tensor, chunk: int):
            batches = pts.reshape(-1, pts.shape[-1]).split(chunk)
            preds = []
            for batch in batches:
                preds.append(network_fn(batch))
            return torch.cat(preds).reshape(*pts.shape[:-1], -1)
        """,
        "one forward over the call's own points, chunked to fit in memory and put back together: not a step loop (a NeRF's `run_network`)",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        def inner_loop(fnet, inputs, labels, lr: float, num_steps: int = 1):
            fast_weights = list(fnet.parameters())
            train_losses = []
            for _ in range(num_steps):
                loss = F.mse_loss(fnet(inputs, params=fast_weights), labels)
                grads = torch.autograd.grad(loss, fast_weights, create_graph=True)
                fast_weights = [w - lr * g for w, g in zip(fast_weights, grads)]
                train_losses.append(loss)
            return fast_weights, train_losses
        """,
        "an inner loop of meta-learning: the next fast weights are built from `create_graph=True` gradients of the loss, so they hold its graph anyway",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class Pulse(nn.Module):
            def __init__(self, hamil, n_steps: int):
                super().__init__()
                self.hamil = hamil
                self.shape = nn.Parameter(torch.ones(n_steps))
                self.n_steps = n_steps
            def get_unitary(self):
                unitary_per_step = []
                for k in range(self.n_steps):
                    unitary_per_step.append(torch.matrix_exp(-1j * self.hamil * self.shape[k]))
                u = unitary_per_step[0]
                for step in unitary_per_step[1:]:
                    u = u @ step
                return u
        """,
        "time steps of one evolution, multiplied into the result after the loop: the graph is the result's",
    ),
    Valid(
        """
        import torch
        from torch import nn
        from mmengine.model import BaseModule
        class DICNet(BaseModule):
            def __init__(self, num_steps: int):
                super().__init__()
                self.num_steps = num_steps
                self.block = nn.Conv2d(3, 3, 3, padding=1)
                self.conv_last = nn.Conv2d(3, 3, 3, padding=1)
            def forward(self, x):
                sr_outputs = []
                for step in range(self.num_steps):
                    sr = self.conv_last(self.block(x))
                    sr_outputs.append(sr)
                return sr_outputs
        """,
        "a model's forward keeps each refinement step's output for the loss: the loop is the model's computation, not a training loop (the base class comes from another package)",
    ),
    Valid(
        """
        import torch
        import torch.nn as nn
        class Pruned(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.feats = []
            def forward(self, x):
                x = self.conv(x)
                self.feats.append(x)
                return x
            def reset(self):
                self.feats = []
        """,
        "the class's `reset()` empties the list: it keeps what the caller wants kept, until the caller resets it",
    ),
    Valid(
        """
        import torch
        class Offload:
            def __init__(self):
                self.hooks = []
            def attach(self, module):
                self.hooks.append(module.register_forward_hook(self._post))
                self.hooks.append(module.register_forward_pre_hook(self._pre))
            def _pre(self, module, inputs):
                return None
            def _post(self, module, inputs, output):
                return None
        """,
        "nn.Module's own methods return hook handles, not a submodule's output: nothing attached is kept",
    ),
    Valid(
        """
        import torch
        def train(model, loader, optimizer):
            losses = []
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            return losses
        """
    ),
    Valid(
        """
        import torch
        def multi_loss(model, batches):
            losses = []
            for x, y in batches:
                losses.append((model(x) - y).pow(2).mean())
            torch.stack(losses).sum().backward()
        """,
        "kept to be backpropagated together",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        from torch import autograd
        def estimate_fisher(model, data_loader, sample_size: int, batch_size: int):
            loglikelihoods = []
            for x, y in data_loader:
                loglikelihoods.append(F.log_softmax(model(x), dim=1)[range(batch_size), y])
                if len(loglikelihoods) >= sample_size // batch_size:
                    break
            loglikelihoods = torch.cat(loglikelihoods).unbind()
            grads = zip(*[autograd.grad(l, model.parameters(), retain_graph=(i < len(loglikelihoods))) for i, l in enumerate(loglikelihoods, 1)])
            return [torch.stack(g).pow(2).mean(0) for g in grads]
        """,
        "each sample's log-likelihood is kept to be differentiated after the loop (backdoors101's Fisher information)",
    ),
    Valid(
        """
        import torch
        def train(model, loss_func, optimizer, train_loader, subdivision: int):
            for step, (data, targets) in enumerate(train_loader):
                optimizer.zero_grad()
                outputs = []
                losses = []
                for data_chunk, target_chunk in zip(data.chunk(subdivision), targets.chunk(subdivision)):
                    output_chunk = model(data_chunk)
                    outputs.append(output_chunk)
                    loss = loss_func(output_chunk, target_chunk)
                    losses.append(loss)
                    loss.backward()
                optimizer.step()
                outputs = torch.cat(outputs)
                acc = (outputs.argmax(dim=1) == targets).float().mean().item()
                print(step, sum(losses).item(), acc)
        """,
        "the lists hold the chunks of one optimizer step and are made anew for the next (hysts' pytorch_image_classification)",
    ),
    Valid(
        """
        import torch
        def compare(model, reference, loader, optimizer):
            outputs = []
            for step, (x, y) in enumerate(loader):
                out = model(x)
                out.sum().backward()
                optimizer.step()
                if step == 0:
                    outputs.append(out)
                else:
                    with torch.no_grad():
                        outputs[0].copy_(out)
            return outputs
        """,
        "stored in the first step only: one step's graph is kept, and memory does not grow with the steps",
    ),
    Valid(
        """
        import torch
        class Fitter:
            def __init__(self):
                self.opt_params = []
            def set_param(self, param: torch.Tensor):
                param.requires_grad = True
                self.opt_params.append(param)
        """,
        "setting `requires_grad` raises on anything but a leaf: what is stored is a leaf to optimize, with no graph",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class Runner:
            def __init__(self, model: nn.Module, n: int):
                self.model = model
                self.pose_vecs = nn.Embedding(n, 7)
            def run(self, loader, plot_loader, optimizer):
                indices, model_input, ground_truth = next(iter(plot_loader))
                for indices, model_input, ground_truth in loader:
                    pose_input = self.pose_vecs(indices)
                    model_input["pose"] = pose_input
                    loss = (self.model(model_input) - ground_truth).abs().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        "`model_input` is each step's own batch dict, bound anew by the loop: what is stored in it goes with the step",
    ),
    Valid(
        """
        import numpy as np
        def get_embeddings(model_interf, batches):
            embs = []
            for batch in batches:
                embs.extend(model_interf(batch))
            return np.array(embs)
        """,
        "`np.array(embs)` would raise on a tensor that requires grad: the callable hands back arrays or detached values",
    ),
    Valid(
        """
        import torch
        def fit(solver, batch, num_epochs: int):
            radius = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))
            opt = torch.optim.Adam([radius], lr=0.1)
            inputs = dict(batch)
            for epoch in range(num_epochs):
                opt.zero_grad()
                inputs["log_radius"] = radius.unsqueeze(1).clone()
                loss = solver(inputs).sum()
                loss.backward()
                opt.step()
        """,
        "the same key in every pass: the entry is replaced, so the dict holds one step's tensor, not one per step",
    ),
    Valid(
        """
        import torch
        def unroll(model, predicted, unpredicted, n_in: int, steps: int):
            unpred_i, pred_i = unpredicted[:, :n_in], predicted[:, :n_in]
            model_predicted = []
            for i in range(steps):
                model_pred_i = model(torch.cat([pred_i, unpred_i], dim=2).flatten(1, 2))
                model_predicted.append(model_pred_i)
                unpred_i = unpredicted[:, i : n_in + i]
                pred_i = torch.cat([pred_i[:, 1:], model_pred_i.unsqueeze(1)], dim=1)
            return torch.stack(model_predicted, dim=1)
        """,
        "a rollout: each prediction feeds the next input, so the last one's graph holds every earlier one anyway",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class HistoryHead(nn.Module):
            def __init__(self, dim: int, history_len: int):
                super().__init__()
                self.fc = nn.Linear(dim, dim)
                self.history_len = history_len
                self.history_memory = []
            def forward(self, feature: torch.Tensor):
                feature = self.fc(feature)
                self.history_memory.append(feature)
                while len(self.history_memory) > self.history_len:
                    self.history_memory.pop(0)
                return torch.cat(self.history_memory, dim=1).mean(dim=1)
        """,
        "a window of the last `history_len` steps: the method drops the oldest itself, so the list does not grow call after call",
    ),
    Valid(
        """
        import torch
        def train(module, loader, optimizer):
            module.train()
            outputs = []
            for i, batch in enumerate(loader):
                optimizer.zero_grad()
                output = module.training_step(batch, i)
                output["loss"].backward()
                optimizer.step()
                output["loss"] = output["loss"].detach()
                outputs.append(output)
            return module.training_epoch_end(outputs)
        """,
        "the step's dict is kept after its loss was replaced by the detached value (packnet-sfm's trainer)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        from torchcrf import CRF
        class Tagger(nn.Module):
            def __init__(self, hidden: int, tags: int):
                super().__init__()
                self.fc = nn.Linear(hidden, tags)
                self.crf = CRF(tags, batch_first=True)
            def forward(self, x):
                return self.fc(x)
            def crf_decode(self, emissions, mask):
                return self.crf.decode(emissions, mask)
        def train(model, loader, optimizer):
            paths = []
            for x, y, mask in loader:
                out = model(x)
                loss = -model.crf(out, y, mask)
                loss.backward()
                optimizer.step()
                paths.append(model.crf_decode(out, mask))
            return paths
        """,
        "`crf_decode` is the model's own method handing back what the CRF object's `decode` computes (Viterbi paths, lists of tag ids), not a submodule's forward output",
    ),
)


class StoredAttachedTensor(Rule):
    """
    ## What it does
    Finds a tensor attached to the graph (a loss, a model output) stored in a list, a
    dict or an attribute that outlives the loop iteration (`losses.append(loss)`,
    `history["loss"] = loss`, `self.outputs.append(out)`), without `.detach()` or
    `.item()`.

    ## Why is this bad?
    The container keeps each iteration's whole graph alive: memory grows with every step
    until the container is dropped, and a long run ends in an out-of-memory error.

    ## Example
    ```python
    losses = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    ```

    ## Use instead
    ```python
        losses.append(loss.item())      # or loss.detach()
    ```

    ## Fix safety
    Safe: `.detach()` stores the same values; only the graph is let go. Lists that are
    summed and backpropagated afterwards are not reported.

    ## Known problems
    A list on `self` that another method of the class empties (`reset()`) is not reported:
    how long it holds the graphs is its callers' choice, which one file does not show.
    """

    code = "RC252"
    name = "stored-attached-tensor"
    category = Category.GRAPH_RETENTION
    severity = Severity.WARNING
    prefilter = ("append", "[", "self.", "extend", "insert")
    recipes = ("retention",)

    VALID = _VALID
    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            from torch.utils.data import DataLoader
            def test(model: nn.Module, predictor: nn.Module, emb, pos_edge, batch_size: int):
                model.eval()
                node_emb = model(emb)
                pos_preds = []
                for perm in DataLoader(range(pos_edge.size(0)), batch_size):
                    edge = pos_edge[perm].t()
                    pos_preds += [predictor(node_emb[edge[0]], node_emb[edge[1]]).squeeze().cpu()]
                pos_pred = torch.cat(pos_preds, dim=0)
                return -torch.log(pos_pred + 1e-15).mean()
            """,
            line=10,
            fix="""
            import torch
            from torch import nn
            from torch.utils.data import DataLoader
            def test(model: nn.Module, predictor: nn.Module, emb, pos_edge, batch_size: int):
                model.eval()
                node_emb = model(emb)
                pos_preds = []
                for perm in DataLoader(range(pos_edge.size(0)), batch_size):
                    edge = pos_edge[perm].t()
                    pos_preds += [predictor(node_emb[edge[0]], node_emb[edge[1]]).squeeze().cpu().detach()]
                pos_pred = torch.cat(pos_preds, dim=0)
                return -torch.log(pos_pred + 1e-15).mean()
            """,
        ),
        Invalid(
            """
            import torch
            def train(model, loader, optimizer):
                losses = []
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss)
                return losses
            """,
            line=8,
            fix="""
            import torch
            def train(model, loader, optimizer):
                losses = []
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    losses.append(loss.detach())
                return losses
            """,
        ),
        Invalid(
            """
            import torch
            def train(model, loader, optimizer, log: dict):
                for step, (x, y) in enumerate(loader):
                    out = model(x)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    log[step] = loss
            """,
            line=8,
            fix="""
            import torch
            def train(model, loader, optimizer, log: dict):
                for step, (x, y) in enumerate(loader):
                    out = model(x)
                    loss = (out - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    log[step] = loss.detach()
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        yield from _stores(flow)


def _stores(flow: FunctionFlow) -> Iterator[Hit]:
    for store in flow.of(Store):
        if store.how not in ("append", "insert", "extend", "setitem", "add") or store.no_grad or not store.value.attached:
            continue
        if store.value.kind is not Kind.TENSOR or store.value_node is None or store.value.leaf:
            continue
        loop = loop_of(flow, store)
        container = store.container
        # Growing a list on self keeps every call's graph; a keyed cache on self does not grow.
        persistent = container.startswith("self.") and store.how in ("append", "extend", "insert") and not emptied_before(flow, container, store)
        if loop is None and not persistent:
            continue
        if persistent and loop is None and trimmed(flow, container):
            continue  # a window the method trims itself (`self.history.pop(0)`): it does not grow call after call
        if persistent and loop is None and emptied_by_another_method(flow, container):
            continue  # the class's `reset()` empties it: how long it holds the graphs is the caller's to decide
        # The list must outlive a step: made before the step loop, not anew in each step.
        outer = step_loop(flow, store) if loop is not None else None
        if loop is not None and not persistent and (outer is None or not bound_outside(flow, container, outer) or few_steps(outer)):
            continue
        if outer is not None and not persistent and (bound_each_step(flow, container, outer, store.line) or same_key_each_pass(flow, store, outer)):
            continue  # each step's own dict (`for x, batch in loader: batch["pose"] = ...`): it goes with the step
        if outer is not None and not persistent and _one_optimizer_step(flow, container, store, outer):
            continue  # the micro-batches of one optimizer step, in a list made anew for each step
        if outer is not None and carried_into_next_pass(flow, store, outer):
            continue  # an unrolled rollout: the next input is built from it, so the loop keeps its graph anyway
        if loop is not None and _entry_let_go(flow, store, loop):
            continue  # a step's dict whose graph-carrying entry was replaced by its detached value
        if made_into_array(flow, container, store):
            continue  # numpy would raise on a tensor that requires grad: what is kept holds no graph
        if another_objects_result(flow, stored_expression(flow, store)):
            continue  # `model.crf_decode(out, mask)`: what `self.crf.decode(...)` hands back, no forward output
        if graphless_method_call(flow, stored_expression(flow, store), store.index):
            continue  # `sae.training_step(batch, opt)`: a method whose result holds numbers, not a submodule's output
        if outer is not None and combined_after(flow, container, outer):
            continue  # per-time-step pieces of this function's own result, put together after the loop
        if outer is not None and one_iteration(flow, store, outer):
            continue  # one step's graph, kept once: memory does not grow with the steps
        if loop is not None and backward_after(flow, loop, container):
            continue
        what = short_code(store.value_node)
        where = f"on every iteration of the loop at line {outer.start}" if outer is not None else "on every call"
        freed = _backward_through(flow, store, loop)
        kept = (
            f"its step's graph nodes alive (the backward pass at line {freed} freed the saved activations, not the nodes), so memory "
            "grows a little with every step"
            if freed is not None
            else "its step's whole graph alive, so memory grows step after step"
        )
        message = (
            f"`{what}` is attached to the autograd graph and is kept in `{container}` {where}: each stored tensor keeps "
            f"{kept}. Store `{short_code(detached(store.value_node))}` (or `.item()` for a number)."
        )
        if called_grad_off_in_repository(flow):
            return  # every caller runs it with autograd off: nothing it keeps holds a graph
        yield Hit(store.node, message, (store.value_node, detached(store.value_node)))


def _entry_let_go(flow: FunctionFlow, store: Store, loop: Loop) -> bool:
    """packnet-sfm's trainer: `output["loss"] = output["loss"].detach()` just before
    `outputs.append(output)`. The stored value is the step's dict, whose graph-carrying entry
    the step replaced with its detached value; the other entries are the callee's to say, and
    the author has shown what was attached."""
    if not isinstance(store.value_node, cst.Name):
        return False
    name = store.value_node.value
    return any(
        e.container == name and e.how == "setitem" and loop.start <= e.line < store.line and e.value_node is not None and not keeps_graph(e.value_node)
        for e in flow.of(Store)
    )


def _one_optimizer_step(flow: FunctionFlow, container: str, store: Store, loop: Loop) -> bool:
    """`outputs = []` at the top of each pass of a loop that steps the optimizer, filled in an
    inner loop that backpropagates chunk by chunk and steps nothing (gradient accumulation
    over a batch split in chunks): the list lives one optimizer step, not the run."""
    if _steps_inside(flow, loop):
        return False
    enclosing = [flow.loops[i] for i in store.loops if i in flow.loops and flow.loops[i] is not loop and flow.loops[i].start < loop.start]
    for step in sorted(enclosing, key=lambda candidate: candidate.start, reverse=True):
        if _steps_inside(flow, step):
            # Made anew before the inner loop in each pass that reaches it (under an `if` too).
            return bound_each_step(flow, container, step, loop.start) or any(
                isinstance(e, Bind) and e.name == container and step.start <= e.line < loop.start and store.arms[: len(e.arms)] == e.arms and e.value.grad is Tri.NO
                for e in flow.events
            )
    return False


def _steps_inside(flow: FunctionFlow, loop: Loop) -> bool:
    return any(loop.start <= e.line <= loop.end and ((isinstance(e, Call) and e.method == "step") or (isinstance(e, Write) and e.op == "optimizer.step()")) for e in flow.events)


def _backward_through(flow: FunctionFlow, store: Store, loop: Loop | None) -> int | None:
    """The line of the backward pass, in the same loop body, through the stored name or a
    name computed from it there (`loss = criterion(output, y); loss.backward()`), if any; of
    `log_p.to(w.dtype)`, through `log_p`."""
    node = under_tensor_methods(store.value_node)
    if loop is None or not isinstance(node, cst.Name):
        return None
    in_loop = (b for b in flow.of(Bind) if loop.start <= b.line <= loop.end)
    for event in backward_on_built(flow, node.value, in_loop, reads=names_in):
        if not loop.start <= event.line <= loop.end:
            continue
        if isinstance(event.node, cst.Call) and any(a.keyword is not None and a.keyword.value == "retain_graph" for a in event.node.args):
            return None  # the saved activations are kept for another backward
        return event.line
    return None

