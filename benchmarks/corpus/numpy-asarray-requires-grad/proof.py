"""np.asarray on the confidences raises; argmax (no grad) converts fine."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "ece.py"))
torch.manual_seed(0)
model = nn.Linear(3, 4)
x, y = torch.randn(20, 3), torch.randint(0, 4, (20,))
try:
    ns["calibration_report"](model, x, y)
except RuntimeError as exc:
    assert "requires grad" in str(exc), exc
else:
    raise SystemExit("np.asarray did not fail")
print("OK: np.asarray(tensor that requires grad) raised")
