"""The restored model scores the best validation loss."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "early_stop.py"))
torch.manual_seed(0)
model = nn.Linear(3, 1)
x = torch.randn(16, 3)
val = (x, x.sum(1, keepdim=True))
train = [(x, -5 * x.sum(1, keepdim=True))]
best = ns["fit"](model, train, val, torch.optim.SGD(model.parameters(), lr=0.05), epochs=6)
with torch.no_grad():
    restored = F.mse_loss(model(val[0]), val[1]).item()
assert abs(restored - best) < 1e-6, (restored, best)
print("OK: the deepcopied state restored the best model")
