"""The in-place step on the leaf raises; fgsm (unchanged) works."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "attack.py"))
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3))
x, y = torch.rand(2, 3, 2, 2), torch.tensor([0, 2])
ns["fgsm"](model, x, y, 0.1)
try:
    ns["pgd"](model, x, y, 0.1, 0.01, 3)
except RuntimeError as exc:
    assert "leaf Variable that requires grad" in str(exc), exc
else:
    raise SystemExit("pgd did not fail")
print("OK: x_adv.add_ on a leaf requiring grad raised")
