"""g_loss.backward() raises because opt_d.step() changed D's weights in place."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "gan.py"))
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))
D = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.SGD(G.parameters(), lr=0.1)
opt_d = torch.optim.SGD(D.parameters(), lr=0.1)
try:
    ns["train_step"](G, D, opt_g, opt_d, torch.randn(5, 4), torch.randn(5, 2))
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc), exc
else:
    raise SystemExit("the generator backward did not fail")
print("OK: opt_d.step() modified weights saved for g_loss.backward()")
