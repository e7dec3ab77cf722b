"""The cosines match those computed from explicit copies of the gradients."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "grad_noise.py"))


def run(fn):
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [torch.randn(8, 4) for _ in range(4)]
    return fn(model, opt, lambda m, b: m(b).pow(2).mean(), batches)


def with_copies(model, optimizer, loss_fn, batches):
    params = list(model.parameters())
    cosines, last = [], None
    for b in batches:
        optimizer.zero_grad()
        loss_fn(model, b).backward()
        if last is not None:
            cur = torch.cat([p.grad.flatten() for p in params])
            cosines.append(torch.nn.functional.cosine_similarity(cur, torch.cat([g.flatten() for g in last]), dim=0).item())
        last = [p.grad.detach().clone() for p in params]
        optimizer.step()
    return cosines


got, ref = run(ns["grad_cosines"]), run(with_copies)
assert got == ref and any(abs(c - 1.0) > 1e-4 for c in got), (got, ref)
print("OK: with set_to_none the kept gradients are not overwritten")
