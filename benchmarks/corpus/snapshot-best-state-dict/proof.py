"""The restored model is the last one, not the best one."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "early_stop.py"))
torch.manual_seed(0)
model = nn.Linear(3, 1)
x = torch.randn(16, 3)
val = (x, x.sum(1, keepdim=True))
train = [(x, -5 * x.sum(1, keepdim=True))]  # training drives the model away from the validation target
first = nn.Linear(3, 1)
first.load_state_dict(model.state_dict())
opt = torch.optim.SGD(model.parameters(), lr=0.05)
best = ns["fit"](model, train, val, opt, epochs=6)
with torch.no_grad():
    restored = F.mse_loss(model(val[0]), val[1]).item()
assert restored > best + 1e-3, (restored, best)
print(f"OK: best val loss {best:.3f}, restored model scores {restored:.3f}")
