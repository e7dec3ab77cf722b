"""evaluate_auc raises on the model output; with .detach() it works."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "auc.py"))
torch.manual_seed(0)
model = nn.Linear(3, 2)
x, y = torch.randn(10, 3), torch.tensor([0, 1] * 5)
try:
    ns["evaluate_auc"](model, x, y)
except RuntimeError as exc:
    assert "requires grad" in str(exc), exc
else:
    raise SystemExit(".numpy() did not fail")
ns["rank_auc"](torch.softmax(model(x), 1)[:, 1].detach().numpy(), y.numpy())
print("OK: .numpy() on an output that requires grad raised")
