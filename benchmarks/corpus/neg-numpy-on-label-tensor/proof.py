"""The conversions work on a model that requires grad, without no_grad."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "confmat.py"))
torch.manual_seed(0)
model = nn.Linear(3, 4)
loader = [(torch.randn(10, 3), torch.randint(0, 4, (10,))) for _ in range(2)]
cm = ns["evaluate"](model, loader, 4)
assert cm.sum() == 20 and not model(torch.randn(1, 3)).argmax(1).requires_grad
print("OK: argmax results and loader labels convert fine")
