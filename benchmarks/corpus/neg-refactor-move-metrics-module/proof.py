"""The running mean is a float and the snapshot is independent of later updates."""
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).parent / "after"))
from metrics import Running, snapshot  # noqa: E402

torch.manual_seed(0)
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
r = Running()
snap = snapshot(model)
for _ in range(3):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    r.add(loss)
assert isinstance(r.mean, float)
assert not torch.equal(snap["weight"], model.weight.detach())
print("OK: .item() accumulation and detach().clone() snapshots")
