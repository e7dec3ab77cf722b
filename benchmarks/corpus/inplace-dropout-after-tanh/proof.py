"""Training-mode backward fails; eval mode or inplace=False is fine."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "mlp.py"))
torch.manual_seed(0)
mlp = ns["make_mlp"](4, 8, 2, p=0.5)
mlp.train()
try:
    mlp(torch.randn(3, 4)).sum().backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc), exc
else:
    raise SystemExit("backward did not fail")
ok = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 2))
ok(torch.randn(3, 4)).sum().backward()
print("OK: in-place dropout overwrote tanh's saved output")
