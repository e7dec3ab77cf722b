"""RC251 accumulated-attached-tensor."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Accumulate, Backward, FunctionFlow, Loop
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.loops import bound_outside, few_steps, loop_of, one_iteration, reset_each_optimizer_step, step_loop
from review_copies.analysis.rewrite import atom
from review_copies.analysis.syntax import names_in, short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.graph_retention.helpers import (
    carries_only_detached,
    combined_after,
    converted_in_place_of_itself,
    cut_each_pass,
    detached,
    differentiated,
    managed_by_the_caller,
    rebound_this_call,
    restarted_on_request,
)

# The examples are the rule's tests, its docs and the LLM's few-shot block (as in every rule's
# file); kept at module level here only because this class would otherwise pass 300 lines.
_VALID = (
    Valid(
        """
        import torch
        import torch.nn as nn
        def fit(cfg, feats, test_feat, labels):
            adapter = nn.Linear(512, 10, bias=False).cuda()
            optimizer = torch.optim.AdamW(adapter.parameters(), lr=1e-3)
            test_logits = adapter(test_feat)
            for epoch in range(cfg["train_epoch"]):
                loss = nn.functional.cross_entropy(adapter(feats), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                test_logits = adapter(test_feat).squeeze(-1)
                test_logits = torch.stack([torch.diag(l) for l in test_logits], dim=0)
            adapter.weight = torch.load(cfg["cache_dir"] + "/best.pt")
            return test_logits
        """,
        "each pass sets `test_logits` afresh before reshaping it: the pass reshapes its own value, nothing is carried from the pass before",
    ),
    Valid(
        """
        import torch
        from .base import BasePredictor
        class DialoguePredictor(BasePredictor):
            def __init__(self, model_dir, model_cls, user_defined_parameters):
                self.model = model_cls(pretrained_model_name_or_path=model_dir, user_defined_parameters=user_defined_parameters)
                if torch.cuda.is_available():
                    self.model = self.model.cuda()
                self.history = []
                self.history.append("your persona: " + model_dir)
        """,
        "the attribute was set earlier in this same call, on every path to the move: the call moves its own value, nothing piles up",
    ),
    Valid(
        """
        import torch
        from torch.nn import Parameter as Param
        class RGCNConv(torch.nn.Module):
            def __init__(self, g, in_channels, out_channels, num_relations, num_bases):
                super().__init__()
                self.g = g
                self.in_channels = in_channels
                self.out_channels = out_channels
                self.num_relations = num_relations
                self.num_bases = num_bases
                self.basis = Param(torch.empty(num_bases, in_channels, out_channels))
                self.att = Param(torch.empty(num_relations, num_bases))
            def forward(self, x):
                self.w = torch.matmul(self.att, self.basis.view(self.num_bases, -1))
                self.w = self.w.view(self.num_relations, self.in_channels, self.out_channels)
                if x is None:
                    def msg_func(edge):
                        w = self.w.view(-1, self.out_channels)
                        index = edge.data["type"] * self.in_channels + edge.src["id"]
                        m = w.index_select(0, index) * edge.data["norm"].unsqueeze(1)
                        return {"m": m}
                else:
                    self.g.ndata["x"] = x
                    def msg_func(edge):
                        w = self.w.index_select(0, edge.data["type"])
                        m = torch.bmm(edge.src["x"].unsqueeze(1), w).squeeze()
                        m = m * edge.data["norm"].unsqueeze(1)
                        return {"m": m}
                self.g.update_all(msg_func)
                return self.g.ndata.pop("x")
        """,
        "`self.w` is set afresh at the top of every call and only reshaped: nothing carries over from the last call",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        from torch.nn import GRUCell, Linear
        class Readout(torch.nn.Module):
            def __init__(self, channels: int, num_timesteps: int):
                super().__init__()
                self.mol_gru = GRUCell(channels, channels)
                self.lin = Linear(channels, 1)
                self.num_timesteps = num_timesteps
            def forward(self, x: torch.Tensor):
                out = x.sum(0, keepdim=True).relu_()
                for _ in range(self.num_timesteps):
                    h = F.elu(x.mean(0, keepdim=True) + out)
                    out = self.mol_gru(h, out).relu_()
                return self.lin(out)
        """,
        "a recurrence over timesteps inside `forward` is the model: backward must run through every step",
    ),
    Valid(
        """
        import torch
        from torch import nn
        import torch.nn.functional as F
        class Vit(nn.Module):
            def __init__(self):
                super().__init__()
                self.pos_embed = nn.Parameter(torch.zeros(1, 16, 8))
            def set_grid(self, n: int):
                self.pos_embed = nn.Parameter(F.interpolate(self.pos_embed, size=n))
        """,
        "`nn.Parameter(...)` is a new leaf: it holds no graph of what made it",
    ),
    Valid(
        """
        import torch
        def train(model, loader, optimizer):
            total = 0.0
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                optimizer.step()
                total += loss.item()
            return total
        """
    ),
    Valid(
        """
        import torch
        def train(model, batches, optimizer):
            total = 0
            for x, y in batches:
                total += (model(x) - y).pow(2).mean()
            total.backward()
            optimizer.step()
        """,
        "an in-graph sum that is backpropagated",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn
        def query_grads(net: nn.Module, queryloader):
            loss_sum = 0.0
            sizes = []
            for images, labels in queryloader:
                loss = F.cross_entropy(net(images), labels)
                loss_sum += loss * labels.size(0)
                sizes.append(labels.size(0))
            loss_sum = loss_sum / sum(sizes)
            return torch.autograd.grad(loss_sum, list(net.parameters()))
        """,
        "the weighted sum over the query batches is differentiated by `torch.autograd.grad`: its graph is the point",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn
        from genotypes import PRIMITIVES, STEPS, CONCAT
        from model import DARTSCell
        class DARTSCellSearch(DARTSCell):
            def __init__(self, ninp, nhid, dropouth, dropoutx):
                super().__init__(ninp, nhid, dropouth, dropoutx, genotype=None)
                self.bn = nn.BatchNorm1d(nhid, affine=False)
            def cell(self, x, h_prev, x_mask, h_mask):
                s0 = self.bn(self._compute_init_state(x, h_prev, x_mask, h_mask))
                probs = F.softmax(self.weights, dim=-1)
                offset = 0
                states = s0.unsqueeze(0)
                for i in range(STEPS):
                    c, h = torch.split(states.view(-1, self.nhid).mm(self._Ws[i]).view(i + 1, -1, 2 * self.nhid), self.nhid, dim=-1)
                    s = torch.zeros_like(s0)
                    for k, name in enumerate(PRIMITIVES):
                        unweighted = states + c.sigmoid() * (self._get_activation(name)(h) - states)
                        s += torch.sum(probs[offset:offset + i + 1, k].unsqueeze(-1).unsqueeze(-1) * unweighted, dim=0)
                    s = self.bn(s)
                    states = torch.cat([states, s.unsqueeze(0)], 0)
                    offset += i + 1
                return torch.mean(states[-CONCAT:], dim=0)
        """,
        "the cell's intermediate states, stacked over its `STEPS` nodes, are what it returns (DARTS' recurrent cell): "
        "nothing in the loop trains, and their graph is the model's",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        def attack(model, images, labels, eps: float, alpha: float, steps: int):
            images_min, images_max = images - eps, images + eps
            images = images.clone().detach().requires_grad_(True)
            for _ in range(steps):
                loss = F.cross_entropy(model(images), labels)
                loss.backward()
                noise = images.grad.data
                images = images + alpha * torch.sign(noise)
                images = torch.max(torch.min(images, images_max), images_min)
                images = images.detach().requires_grad_(True)
            return images.detach()
        """,
        "each step ends with `images.detach().requires_grad_(True)`, a new leaf: no graph reaches the next step "
        "(torchattacks' PI-FGSM)",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        def l2_attack(model, images, labels, eps: float, alpha: float, steps: int):
            delta = torch.randn_like(images) * eps
            adv = (images + delta).clamp(0, 1)
            for _ in range(steps):
                adv = adv.detach().requires_grad_(True)
                grad = torch.autograd.grad(F.cross_entropy(model(adv), labels), adv)[0]
                delta = adv - images
                delta = delta + alpha * grad
                delta = delta / torch.clamp(delta.flatten(1).norm(dim=1) / eps, min=1.0).view(-1, 1, 1, 1)
                adv = (images + delta).clamp(0, 1)
            return adv.detach()
        """,
        "each pass starts `delta` afresh from the new leaf `adv` and then updates it: nothing is carried from the pass before",
    ),
    Valid(
        """
        import torch
        def evaluate(model, loader):
            total = 0.0
            with torch.no_grad():
                for x, y in loader:
                    total += (model(x) - y).abs().mean()
            return total
        """,
        "under no_grad nothing is attached",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class LoraLinear(nn.Module):
            def __init__(self, weight: nn.Parameter, r: int):
                super().__init__()
                self.weight = weight
                self.lora_A = nn.Parameter(torch.zeros(r, weight.shape[1]))
                self.lora_B = nn.Parameter(torch.zeros(weight.shape[0], r))
                self.scaling = 1.0 / r
                self.merged = False
            def train(self, mode: bool = True):
                self.training = mode
                if not mode and not self.merged:
                    self.weight.data += self.lora_B @ self.lora_A * self.scaling
                    self.merged = True
                return self
        """,
        "`.data +=` sets the weight's data through `set_data`: the sum's graph is not kept",
    ),
    Valid(
        """
        import torch
        def train(model, loader, optimizer, accumulation_steps: int):
            running_loss = 0
            for idx, batch in enumerate(loader):
                loss = model(batch).mean()
                running_loss += loss
                loss.backward()
                if (idx + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    print(running_loss.item())
                    running_loss = 0
        """,
        "set back to 0 after each optimizer step: it holds the few micro-batches of one step, whose activations backward already freed",
    ),
    Valid(
        """
        import torch
        def invert(model, x0: torch.Tensor, target: torch.Tensor, steps: int, lr: float):
            x = x0.clone().requires_grad_(True)
            for i in range(steps):
                loss = torch.nn.functional.mse_loss(model(x), target)
                grad = torch.autograd.grad(loss, x)
                x = x - lr * grad[0]
            return x.detach()
        """,
        "gradient descent on the input itself: `x` is what the gradients are taken with respect to",
    ),
    Valid(
        """
        import torch
        def label_step(model, loader, optimizer, start: int):
            total_loss = 0
            for idx, (x, y) in enumerate(loader):
                if idx < start:
                    continue
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                total_loss += loss
                break
            print(f"loss = {total_loss}")
        """,
        "the loop is left right after the sum: one batch's graph, kept once",
    ),
    Valid(
        """
        import torch
        def compute_aux_loss(aux_list: list, backward: bool = False):
            aux_loss_sum = 0
            for aux_loss in aux_list:
                aux_loss_sum += aux_loss
                if backward is True:
                    aux_loss.backward()
            return aux_loss_sum
        """,
        "the loop adds up the items of a list it was handed: the list keeps those graphs already, and it does not grow",
    ),
    Valid(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        class LSA(nn.Module):
            def __init__(self, dim: int):
                super().__init__()
                self.score = nn.Linear(dim, 1)
                self.cumulative = None
            def init_attention(self, keys: torch.Tensor):
                self.cumulative = torch.zeros(keys.size(0), keys.size(1), device=keys.device)
            def forward(self, keys: torch.Tensor, t: int):
                if t == 0:
                    self.init_attention(keys)
                scores = F.softmax(self.score(keys + self.cumulative.unsqueeze(-1)).squeeze(-1), dim=1)
                self.cumulative = self.cumulative + scores
                return scores
        """,
        "started afresh when the caller begins a sequence (`t == 0`): the sum spans one decoding, whose backward needs it, not every call",
    ),
    Valid(
        """
        import numpy as np
        import torch
        from torch import nn
        class LSeg(nn.Module):
            def __init__(self, dim: int):
                super().__init__()
                self.head = nn.Linear(dim, dim)
                self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07)).exp()
            def forward(self, x: torch.Tensor, text_features: torch.Tensor):
                self.logit_scale = self.logit_scale.to(x.device)
                return self.logit_scale * self.head(x) @ text_features.t() + self.head.bias
        """,
        "`.to(device)` of its own value returns the tensor itself once it is there: converted once, not summed",
    ),
    Valid(
        """
        import torch
        import torch.nn as nn
        class FoldedConvBN(nn.Module):
            def __init__(self, channels: int):
                super().__init__()
                self.conv = nn.Conv2d(channels, channels, 3)
                self.bn = nn.BatchNorm2d(channels)
            def forward(self, x):
                y = self.conv(x)
                batch_mean = torch.mean(y, dim=(0, 2, 3))
                self.bn.running_mean = self.bn.running_mean.detach() * self.bn.momentum + (1 - self.bn.momentum) * batch_mean
                return y - batch_mean.view(1, -1, 1, 1)
        """,
        "the value before enters through `.detach()`: each call keeps its own step's graph only, replaced by the next (HAWQ's folded batch norm)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class StateTrajectoryNetwork(nn.Module):
            def __init__(self, hidden: int):
                super().__init__()
                self.layers = nn.Sequential(nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, 2))
                self.state = None
            def forward(self, x):
                self.state = self.state + self.layers(torch.cat((x, self.state), 1))
                return self.state
            def set_state(self, state):
                self.state = state
            def detach_hidden(self):
                self.state = self.state.detach()
        """,
        "a recurrent state whose caller sets it and cuts it between windows (truncated backpropagation through time): the graph it holds does not grow (a virtual-analog phaser model)",
    ),
    Valid(
        """
        import copy
        import torch
        def diag_hessian(model, inputs, batch_size: int):
            diag_h = copy.deepcopy(model)
            for minibatch in torch.split(inputs, batch_size):
                output = model(minibatch)
                torch.logsumexp(output, dim=1).sum().backward(retain_graph=True)
                for param, diag in zip(model.parameters(), diag_h.parameters()):
                    grad1 = param.grad1 ** 2
                    diag.data -= grad1.sum(dim=0).detach()
                prob = torch.softmax(output, dim=1)
                for k, output_k in enumerate(output.sum(dim=0)):
                    output_k.backward(retain_graph=True)
                    for param, diag in zip(model.parameters(), diag_h.parameters()):
                        grad1 = param.grad1 ** 2
                        grad1 = prob[:, k] @ grad1.flatten(1, -1)
                        diag.data += grad1.reshape(param.shape).detach()
            return diag_h
        """,
        "`grad1 = param.grad1 ** 2` binds the name afresh from an attribute that happens to share it: each pass transforms its own value, nothing carries over",
    ),
    Valid(
        """
        import torch
        from torch import nn
        from torch.nn.utils import parameters_to_vector, vector_to_parameters


        def potential_and_grad(model: nn.Module, loader, position: torch.Tensor, prior_precision: float):
            vector_to_parameters(position, model.parameters())
            model.zero_grad(set_to_none=True)
            criterion = nn.CrossEntropyLoss(reduction="sum")
            nll = torch.zeros(())
            for x, y in loader:
                nll = nll + criterion(model(x), y)
            potential = nll + 0.5 * prior_precision * torch.dot(position, position)
            potential.backward()
            grad = parameters_to_vector([p.grad for p in model.parameters()]).detach()
            return potential.detach(), grad
        """,
        "the negative log-likelihood over the whole data set, summed in the graph on purpose: the potential built from it "
        "backpropagates once after the loop (Hamiltonian Monte Carlo's full-batch gradient)",
    ),
)

_INVALID = (
    Invalid(
        """
        import torch
        def train(model, loader, optimizer):
            total = 0.0
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                optimizer.step()
                total += loss
            return total
        """,
        line=8,
        fix="""
        import torch
        def train(model, loader, optimizer):
            total = 0.0
            for x, y in loader:
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                optimizer.step()
                total += loss.detach()
            return total
        """,
    ),
)


class AccumulatedAttachedTensor(Rule):
    """
    ## What it does
    Finds `total += loss` (or another tensor attached to the graph) in a loop, where the
    accumulator lives across iterations and is never backpropagated.

    ## Why is this bad?
    Each `+=` adds a node that references the iteration's whole graph, so every
    iteration's activations stay alive until the accumulator dies: memory grows with
    every step (torch 2.13, a small MLP: +98.5 MiB over 50 iterations with `+= loss`,
    +4.0 MiB with `+= loss.item()`). This is the first item of PyTorch's FAQ on memory.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    ```

    ## Use instead
    ```python
        total += loss.item()     # or loss.detach()
    ```

    ## Fix safety
    Safe: `.detach()` keeps the same value and type (a tensor), only without the graph;
    `.item()` is the idiom when a Python number is wanted. Accumulators that are
    backpropagated (an in-graph sum of losses) are not reported.
    """

    code = "RC251"
    name = "accumulated-attached-tensor"
    category = Category.GRAPH_RETENTION
    severity = Severity.WARNING
    prefilter = ("+", "-=")
    recipes = ("retention",)

    VALID = _VALID
    INVALID = _INVALID

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        yield from _accumulations(flow)


def _accumulations(flow: FunctionFlow) -> Iterator[Hit]:
    for acc in flow.of(Accumulate):
        loop = loop_of(flow, acc)
        persistent = acc.name.startswith("self.")
        if acc.no_grad or not acc.value.attached or differentiated(flow, acc) or _descended(flow, acc):
            continue
        if loop is None and not persistent:
            continue
        if acc.name.endswith(".data"):
            continue  # `w.data += x` sets the data through `set_data`, which keeps no autograd history
        if converted_in_place_of_itself(acc):
            continue  # `self.scale = self.scale.to(x.device)`: the same tensor once it is there, not a sum
        if carries_only_detached(acc):
            continue  # `self.m = self.m.detach() * k + (1 - k) * x`: the sum before is cut off, one step's graph at a time
        if persistent and restarted_on_request(flow, acc):
            continue  # `if t == 0: self.init_attention(x)`: the caller starts the sum afresh for each sequence
        if persistent and managed_by_the_caller(flow, acc):
            continue  # `def detach_hidden(self): self.state = self.state.detach()`: a recurrent state its caller cuts or sets
        if cut_each_pass(flow, acc):
            continue  # `x = x + step; x = x.detach().requires_grad_()`, or the cut at the pass's top: what the next pass reads holds no graph
        if rebound_this_call(flow, acc):
            continue  # `self.w = a @ b; self.w = self.w.view(...)`: this call's (or this pass's) value, reshaped
        # Sums over layers, heads or pairs inside one step are part of the graph on purpose:
        # only accumulation across training steps (or across calls, on self) retains graphs,
        # so the sum must have been started before the step loop, not reset in each step.
        if loop is not None and len(acc.loops) == 1 and _sums_the_items(loop, acc):
            continue  # `for aux in aux_losses: total += aux`: the list holds those graphs already, and it does not grow
        outer = step_loop(flow, acc) if loop is not None else None
        if loop is not None and not persistent and (outer is None or not bound_outside(flow, acc.name, outer) or few_steps(outer)):
            continue
        if outer is not None and reset_each_optimizer_step(flow, acc.name, outer):
            continue  # a running sum over one optimizer step's micro-batches, started again after it
        if outer is not None and one_iteration(flow, acc, outer):
            continue  # `total += loss; break`: one step's graph, once
        if outer is not None and combined_after(flow, acc.name, outer):
            continue  # `for i in range(STEPS): states = torch.cat([states, s])`, read after: the call's own computation
        what = short_code(acc.value_node)
        operand = short_code(atom(acc.value_node))
        where = f"on every iteration of the loop at line {outer.start}" if outer is not None else "on every call (it lives on `self`)"
        message = (
            f"`{acc.name}` accumulates `{what}`, which is attached to the autograd graph, {where}: each step's graph "
            f"(its nodes, and the activations too until `backward()` frees them) stays alive as long as `{acc.name}`, so memory grows step after step. Accumulate "
            f"`{operand}.item()` or `{operand}.detach()`."
        )
        if called_grad_off_in_repository(flow):
            return  # every caller runs it with autograd off: nothing it keeps holds a graph
        yield Hit(acc.node, message, (acc.value_node, detached(acc.value_node)))


def _descended(flow: FunctionFlow, acc: Accumulate) -> bool:
    """`g = torch.autograd.grad(loss, x); x = x - lr * g[0]`: gradient descent on `x` itself,
    the variable the gradients are taken with respect to, not a sum kept alongside."""
    return any(e.inputs is not None and acc.name in names_in(e.inputs, attributes=True) for e in flow.of(Backward))


def _sums_the_items(loop: Loop, acc: Accumulate) -> bool:
    """The loop walks a container it was handed (`for aux_loss in aux_list:`) and adds up its
    items themselves: the sum keeps no graph the container does not keep already, and the
    loop ends with the container, so nothing grows step after step (unless an outer loop
    runs it again into the same sum: the caller checks that it is the only loop)."""
    node = loop.node
    if not isinstance(node, cst.For) or not isinstance(node.target, cst.Name) or not isinstance(node.iter, (cst.Name, cst.Attribute)):
        return False
    value = acc.value_node
    return isinstance(value, cst.Name) and value.value == node.target.value
