"""After one more optimizer step the kept 'best' weights equal the current ones."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "callbacks.py"))
torch.manual_seed(0)
model = nn.Linear(3, 2)
cb = ns["BestCheckpoint"]("unused.pt")
w_at_best = model.weight.detach().clone()
cb.on_validation_end(model, 0.9)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
model(torch.randn(4, 3)).sum().backward()
opt.step()
assert not torch.equal(cb.best["weight"], w_at_best), "snapshot kept its values"
assert torch.equal(cb.best["weight"], model.weight.detach())
print("OK: the shallow copy followed the optimizer step")
