"""The kept gradients are zeroed (then refilled) in place: the cosine compares g with itself."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "grad_noise.py"))
torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [torch.randn(8, 4) for _ in range(4)]
loss_fn = lambda m, b: m(b).pow(2).mean()  # noqa: E731
cos = ns["grad_cosines"](model, opt, loss_fn, batches)
assert all(abs(c - 1.0) < 1e-5 for c in cos), cos
print(f"OK: every cosine is 1.0 ({cos}): the snapshot was the live .grad tensors")
