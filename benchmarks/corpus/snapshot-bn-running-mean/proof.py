"""The running mean moved, but the reported shift is 0."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "calibrate.py"))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
before = model[1].running_mean.clone()
shift = ns["recalibrate_bn"](model, [torch.randn(8, 3) + 5 for _ in range(3)])
assert not torch.allclose(model[1].running_mean, before)
assert shift == 0.0, shift
print("OK: start_mean was the live buffer")
