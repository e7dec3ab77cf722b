"""The model is untouched by update(); the EMA moves toward it; training still works."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "ema.py"))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
ema = ns["ModelEma"](model, decay=0.5)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
model(torch.randn(8, 3)).pow(2).mean().backward()
opt.step()
w_model = model[0].weight.detach().clone()
e0 = ema.module[0].weight.detach().clone()
ema.update(model)
assert torch.equal(model[0].weight.detach(), w_model)
assert torch.allclose(ema.module[0].weight, 0.5 * e0 + 0.5 * w_model)
model(torch.randn(8, 3)).pow(2).mean().backward()
print("OK: the EMA update writes only into the EMA copy")
