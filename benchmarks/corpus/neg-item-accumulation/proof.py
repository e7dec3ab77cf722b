"""The result is a float; no graph is kept."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "train.py"))
torch.manual_seed(0)
model = nn.Linear(4, 3)
loader = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(5)]
avg = ns["train_one_epoch"](model, loader, torch.optim.SGD(model.parameters(), lr=0.1))
assert isinstance(avg, float)
print("OK: .item() accumulation keeps no graph")
