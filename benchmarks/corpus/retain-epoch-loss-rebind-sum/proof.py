"""epoch_loss requires grad and links one graph per step."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "loop.py"))


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
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(steps)]
    return ns["run_epoch"](model, loader, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.01))


a, b = run(3), run(12)
assert a.requires_grad and nodes(b) > nodes(a) + 30, (nodes(a), nodes(b))
print(f"OK: {nodes(a)} nodes after 3 steps, {nodes(b)} after 12")
