"""On CPU the .cpu() snapshot shares storage with the parameters and follows the updates."""
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
tr.restore_best()
assert not torch.equal(model.weight.detach(), w0), "restore brought the best weights back"
assert tr.best_weights["weight"].untyped_storage().data_ptr() == model.weight.untyped_storage().data_ptr()
print("OK: the .cpu() snapshot aliased the live CPU weights")
