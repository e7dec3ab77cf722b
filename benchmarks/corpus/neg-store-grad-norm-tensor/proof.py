"""The stored norms carry no graph."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "clip.py"))
torch.manual_seed(0)
model = nn.Linear(3, 1)
norms = ns["train"](model, [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(5)], torch.optim.SGD(model.parameters(), lr=0.1))
assert norms.grad_fn is None and not norms.requires_grad and norms.shape == (5,)
print("OK: the gradient norms are plain tensors without a graph")
