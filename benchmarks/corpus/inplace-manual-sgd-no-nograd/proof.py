"""The first update raises the leaf in-place error; under no_grad it trains."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "fit.py"))
torch.manual_seed(0)
model = nn.Linear(3, 1)
data = [(torch.randn(8, 3), torch.randn(8, 1))]
try:
    ns["fit"](model, data)
except RuntimeError as exc:
    assert "leaf Variable that requires grad" in str(exc), exc
else:
    raise SystemExit("the manual step did not fail")
loss = F.mse_loss(model(data[0][0]), data[0][1])
loss.backward()
with torch.no_grad():
    for p in model.parameters():
        p -= 0.1 * p.grad
print("OK: p -= lr * p.grad outside no_grad raised")
