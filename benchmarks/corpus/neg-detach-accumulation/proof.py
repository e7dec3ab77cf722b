"""The accumulator has no grad_fn and does not require grad."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "loop.py"))
torch.manual_seed(0)
model = nn.Linear(3, 1)
loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(6)]
out = ns["run_epoch"](model, loader, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.01))
assert out.grad_fn is None and not out.requires_grad
print("OK: .detach() accumulation keeps no graph")
