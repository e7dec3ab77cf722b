"""binarize writes 0/1 into the caller's probabilities through the shared NumPy view."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "metrics.py"))
torch.manual_seed(0)
model = nn.Linear(4, 1)
x, y = torch.randn(32, 4), torch.rand(32, 1)
with torch.no_grad():
    probs = torch.sigmoid(model(x))
expected = (probs - y).abs().mean().item()
mask, calib = ns["report"](model, x, y)
p2 = torch.sigmoid(model(x)).detach()
ns["binarize"](p2)
assert set(p2.unique().tolist()) <= {0.0, 1.0}, "probabilities not overwritten"
assert abs(calib - expected) > 1e-3, "calibration error unaffected"
print("OK: the caller's probabilities were thresholded in place")
