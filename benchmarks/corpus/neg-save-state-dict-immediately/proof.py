"""The file on disk keeps the weights of the best epoch after further training."""
import runpy
import tempfile
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "callbacks.py"))
torch.manual_seed(0)
model = nn.Linear(3, 2)
with tempfile.TemporaryDirectory() as d:
    cb = ns["BestCheckpoint"](f"{d}/best.pt")
    w0 = model.weight.detach().clone()
    cb.on_validation_end(model, 0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    saved = torch.load(f"{d}/best.pt")
assert torch.equal(saved["weight"], w0) and not torch.equal(saved["weight"], model.weight.detach())
print("OK: saving right away snapshots the values")
