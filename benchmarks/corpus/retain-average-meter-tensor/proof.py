"""The meter's sum is a tensor with a graph spanning all steps; with .item() it is a float."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "engine.py"))


def nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(n for n, _ in fn.next_functions)
    return len(seen)


def run(steps):
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    loader = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(steps)]
    return ns["train_epoch"](model, loader, torch.optim.SGD(model.parameters(), lr=0.1))


a, b = run(4), run(16)
assert a.grad_fn is not None and nodes(b) > nodes(a) + 30, (nodes(a), nodes(b))
m = ns["AverageMeter"]()
m.update(torch.tensor(2.0, requires_grad=True).item(), 3)
assert isinstance(m.avg, float)
print(f"OK: the meter kept {nodes(b)} graph nodes after 16 steps")
