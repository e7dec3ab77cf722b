"""The returned average carries a graph whose size grows with the number of steps."""
import contextlib
import io
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "train.py"))


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
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with contextlib.redirect_stdout(io.StringIO()):
        return ns["train_one_epoch"](model, loader, opt)


a, b = run(5), run(20)
assert isinstance(a, torch.Tensor) and a.grad_fn is not None, "no graph kept"
assert nodes(b) > nodes(a) + 30, (nodes(a), nodes(b))
print(f"OK: graph nodes kept by running_loss: {nodes(a)} after 5 steps, {nodes(b)} after 20")
