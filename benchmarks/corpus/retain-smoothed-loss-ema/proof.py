"""The smoothed loss is a tensor whose graph grows with the number of steps."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "trainer.py"))


def nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(n for n, _ in fn.next_functions)
    return len(seen)


torch.manual_seed(0)
model = nn.Linear(4, 3)
tr = ns["Trainer"](model, torch.optim.SGD(model.parameters(), lr=0.1))
counts = []
for i in range(12):
    tr.step(torch.randn(8, 4), torch.randint(0, 3, (8,)))
    counts.append(nodes(tr.smooth))
assert tr.smooth.requires_grad and counts[-1] > counts[1] + 30, counts
print(f"OK: smooth's graph grew from {counts[1]} to {counts[-1]} nodes")
