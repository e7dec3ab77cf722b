"""A small labeled corpus for the sandbox: for each category, true positives (the
original shows the problem, the fix does not) and look-alikes. A look-alike is refuted
only with a witness (a run reached its line with the bug's precondition present, or the
fix changes what the code computes); one whose runs never set up the precondition stays
inconclusive, saying what could not be established (contract §3).

Each case: (name, expected verdict, category, code, finding line, fix, fix lines, rule,
a phrase the evidence must contain). `fix` replaces the fix lines (default: the line).
"""

from __future__ import annotations

from typing import NamedTuple


class Case(NamedTuple):
    name: str
    expected: str
    category: str
    code: str
    line: int
    fix: str | None
    fix_lines: tuple[int, int] | None = None
    rule: str = "X999"
    evidence: str = ""

    @property
    def label(self) -> str:
        return "tp" if self.expected == "confirmed" else "fp"


CASES: list[Case] = [
    # ------------------------------------------------------------ alias-mutation
    Case("alias-float-returns-self", "confirmed", "alias-mutation", """
import torch
def norm(x):
    y = x.float()
    y -= y.mean()
    return y
""", 3, "y = x.float().clone()", evidence="input `x` was modified: version 0→1"),
    Case("alias-argument-mutated", "confirmed", "alias-mutation", """
import torch
def scale(x, s):
    x.mul_(s)
    return x
""", 3, "x = x * s", evidence="input `x` was modified"),
    Case("alias-slice-view", "confirmed", "alias-mutation", """
import torch
def head(x):
    top = x[:2]
    top.zero_()
    return top
""", 3, "top = x[:2].clone()", evidence="input `x` was modified"),
    Case("alias-from-numpy", "confirmed", "alias-mutation", """
import numpy as np
import torch
def double(arr):
    t = torch.from_numpy(arr)
    t.mul_(2)
    return t
""", 4, "t = torch.from_numpy(arr.copy())", evidence="input `arr` was modified"),
    Case("alias-contiguous-depends-on-layout", "confirmed", "alias-mutation", """
import torch
def shifted(x):
    y = x.t().contiguous()
    y.add_(1)
    return y
""", 3, "y = x.t().clone(memory_format=torch.contiguous_format)", evidence="with non-contiguous inputs"),
    Case("alias-module-level-tensor", "confirmed", "alias-mutation", """
import torch
RUNNING = torch.zeros(4)
def update(x):
    running = RUNNING
    running += x.mean(0)
    return running
""", 4, "running = RUNNING.clone()", evidence="`running` shares memory with `RUNNING`"),
    Case("alias-clone-first", "inconclusive", "alias-mutation", """
import torch
def norm(x):
    y = x.clone()
    y -= y.mean()
    return y
""", 4, "y = y - y.mean()", evidence="never into memory an input shares"),
    Case("alias-detach-clone", "refuted", "alias-mutation", """
import torch
def reset(x):
    y = x.detach().clone()
    y.zero_()
    return y
""", 3, "y = torch.zeros_like(x)"),
    # ---------------------------------------------------------- inplace-autograd
    Case("autograd-saved-output", "confirmed", "inplace-autograd", """
import torch
def f(x):
    y = torch.sigmoid(x)
    y += 1
    return y
""", 4, "y = y + 1", evidence="backward raised: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation"),
    Case("autograd-exp-relu", "confirmed", "inplace-autograd", """
import torch
def f(x):
    y = x.exp()
    y.relu_()
    return y
""", 4, "y = y.relu()", evidence="backward raised"),
    Case("autograd-data-silent", "confirmed", "inplace-autograd", """
import torch
def f(x):
    h = x.exp()
    h.data.clamp_(max=1)
    return h
""", 4, "h = x.exp().clamp(max=1)", (3, 4), evidence="gradients are silently wrong"),
    Case("autograd-leaf", "confirmed", "inplace-autograd", """
import torch
def step(w, lr):
    w.sub_(lr * w.grad)
    return w
""", 3, "with torch.no_grad():\n    w.sub_(lr * w.grad)", evidence="a leaf Variable that requires grad is being used in an in-place operation"),
    Case("autograd-no-grad-update", "inconclusive", "inplace-autograd", """
import torch
def sgd(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    return w
""", 4, "w.sub_(lr * w.grad)"),
    Case("autograd-unsaved-intermediate", "inconclusive", "inplace-autograd", """
import torch
def f(x):
    y = x + 1
    y.mul_(2)
    return y
""", 4, "y = y * 2", evidence="no tensor the finding's line wrote had been saved for backward"),
    # ----------------------------------------------------------- graph-retention
    Case("retention-total-loss", "confirmed", "graph-retention", """
import torch
import torch.nn.functional as F
def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    return total
""", 10, "total += loss.item()", evidence="after 1 step"),
    Case("retention-history-attribute", "confirmed", "graph-retention", """
import torch
class Tracker:
    def __init__(self):
        self.history = []

    def log(self, loss):
        self.history.append(loss)
""", 7, "self.history.append(loss.detach())", evidence="autograd nodes"),
    Case("retention-item", "inconclusive", "graph-retention", """
import torch
import torch.nn.functional as F
def train(model, loader, optimizer):
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total
""", 10, "total += float(loss.item())", evidence="never attached to the graph"),
    Case("retention-detached-list", "inconclusive", "graph-retention", """
import torch
def collect(model, loader):
    outs = []
    for x, y in loader:
        outs.append(model(x).detach())
    return outs
""", 5, "outs.append(model(x).detach().clone())"),
    # ------------------------------------------------------------ stale-snapshot
    Case("snapshot-state-dict", "confirmed", "stale-snapshot", """
import copy
import torch
import torch.nn.functional as F
def train(model, loader, optimizer):
    best, best_loss = None, float("inf")
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if loss.item() < best_loss:
            best_loss = loss.item()
            best = model.state_dict()
    return best
""", 13, "best = copy.deepcopy(model.state_dict())", evidence="`best['weight']` changed"),
    Case("snapshot-reused-buffer", "confirmed", "stale-snapshot", """
import torch
def collect(loader):
    buf = torch.zeros(8, 4)
    out = []
    for x, y in loader:
        buf.copy_(x)
        out.append(buf)
    return out
""", 7, "out.append(buf.clone())", evidence="`out[0]` changed"),
    Case("snapshot-shallow-dict-copy", "confirmed", "stale-snapshot", """
import torch
def remember(model):
    saved = model.state_dict().copy()
    return saved
""", 3, "saved = {k: v.clone() for k, v in model.state_dict().items()}", evidence="after a later in-place update of the inputs"),
    Case("snapshot-deepcopy", "refuted", "stale-snapshot", """
import copy
import torch
def snap(model):
    best = copy.deepcopy(model.state_dict())
    return best
""", 4, "best = {k: v.detach().clone() for k, v in model.state_dict().items()}", evidence="kept its values"),
    Case("snapshot-cloned", "refuted", "stale-snapshot", """
import torch
def snap(model):
    best = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return best
""", 3, "best = {k: v.clone() for k, v in model.state_dict().items()}"),
    # ------------------------------------------------------------ copy-construct
    Case("construct-warns", "confirmed", "copy-construct", """
import torch
def f(x: torch.Tensor):
    y = torch.tensor(x)
    return y * 2
""", 3, "y = x.detach().clone()", rule="RC301", evidence="To copy construct from a tensor"),
    Case("construct-legacy-alias", "confirmed", "copy-construct", """
import torch
def keep(x: torch.Tensor):
    saved = torch.Tensor(x)
    x.add_(1)
    return saved
""", 3, "saved = x.detach().clone()", rule="RC302", evidence="`saved` shares memory with input `x`"),
    Case("construct-from-list", "inconclusive", "copy-construct", """
import torch
def f(x):
    return torch.tensor(x.tolist())
""", 3, "return torch.as_tensor(x.tolist())", rule="RC301", evidence="never given a tensor"),
    Case("construct-as-tensor-is-alias", "refuted", "copy-construct", """
import torch
def f(x: torch.Tensor):
    return torch.tensor(x)
""", 3, "return torch.as_tensor(x)", rule="RC301", evidence="shares memory with input `x`"),
    # -------------------------------------------------------------- numpy-bridge
    Case("numpy-grad", "confirmed", "numpy-bridge", """
import torch
def f(x):
    out = x * 2
    return out.numpy()
""", 4, "return out.detach().cpu().numpy()", rule="RC321", evidence="Can't call numpy() on Tensor that requires grad"),
    Case("numpy-internal-grad", "confirmed", "numpy-bridge", """
import torch
def f():
    w = torch.randn(3, requires_grad=True)
    return (w * 2).numpy()
""", 4, "return (w * 2).detach().cpu().numpy()", rule="RC321"),
    Case("numpy-under-no-grad", "inconclusive", "numpy-bridge", """
import torch
def f(x):
    with torch.no_grad():
        out = x * 2
    return out.numpy()
""", 5, "return out.detach().cpu().numpy()", rule="RC321", evidence="never required grad"),
    Case("numpy-detached", "inconclusive", "numpy-bridge", """
import torch
def f(x):
    return x.detach().numpy()
""", 3, "return x.detach().cpu().numpy()", rule="RC321"),
    # ------------------------------------------------------------ redundant-copy
    Case("redundant-clone-of-temporary", "confirmed", "redundant-copy", """
import torch
def f(x):
    y = (x * 2).clone()
    return y
""", 3, "y = x * 2", evidence="the fix copies 0 B instead of 128 B per call"),
    Case("redundant-clone-before-to", "confirmed", "redundant-copy", """
import torch
def f(x):
    return x.clone().to(torch.float64)
""", 3, "return x.to(torch.float64)", evidence="instead of"),
    Case("redundant-clone-detach-order", "confirmed", "redundant-copy", """
import torch
def f(x):
    return x.clone().detach()
""", 3, "return x.detach().clone()", evidence="autograd graph"),
    Case("redundant-needed-clone", "refuted", "redundant-copy", """
import torch
def f(x):
    y = x.clone()
    y.add_(1)
    return y
""", 3, "y = x", evidence="the fix modifies input `x`"),
    Case("redundant-clone-after-noop-float", "refuted", "redundant-copy", """
import torch
def f(x):
    return x.float().clone()
""", 3, "return x.float()", evidence="shares memory with input `x`"),
]
