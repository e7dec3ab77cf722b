"""After the rollback the Adam moments contain NaN."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "robust.py"))
torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.1)
good = lambda m, b: m(b).pow(2).mean()  # noqa: E731
bad = lambda m, b: m(b).pow(2).mean() * float("nan")  # noqa: E731
assert ns["guarded_step"](model, opt, good, torch.randn(4, 3))
assert not ns["guarded_step"](model, opt, bad, torch.randn(4, 3))
assert torch.isfinite(model.weight).all(), "the model was rolled back"
exp_avg = opt.state[model.weight]["exp_avg"]
assert torch.isnan(exp_avg).any(), "the optimizer state was rolled back"
print("OK: the optimizer snapshot was a reference; NaN moments survived the rollback")
