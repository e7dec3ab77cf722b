"""The manual step works and matches torch.optim.SGD; parameters stay leaves."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "fit.py"))
torch.manual_seed(0)
a = nn.Linear(3, 1)
b = nn.Linear(3, 1)
b.load_state_dict(a.state_dict())
data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
ns["fit"](a, data)
opt = torch.optim.SGD(b.parameters(), lr=0.1)
for x, y in data:
    opt.zero_grad()
    F.mse_loss(b(x), y).backward()
    opt.step()
assert all(torch.allclose(p, q) for p, q in zip(a.parameters(), b.parameters()))
assert all(p.is_leaf and p.requires_grad for p in a.parameters())
print("OK: in-place update under no_grad is the same as SGD")
