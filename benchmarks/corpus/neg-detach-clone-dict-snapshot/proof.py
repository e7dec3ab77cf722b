"""After a step, restore_best brings back the remembered weights."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "trainer.py"))
torch.manual_seed(0)
model = nn.Linear(3, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
tr = ns["Trainer"](model, opt)
w0 = model.weight.detach().clone()
tr.remember_best()
model(torch.randn(4, 3)).sum().backward()
opt.step()
assert not torch.equal(model.weight.detach(), w0)
tr.restore_best()
assert torch.equal(model.weight.detach(), w0)
print("OK: the detach().clone() snapshot is independent")
