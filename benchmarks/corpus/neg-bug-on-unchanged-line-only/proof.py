"""The changed lines are harmless (a float log); the stale snapshot sits on an unchanged line."""
import runpy
from pathlib import Path

import torch
from torch import nn

here = Path(__file__).parent
ns = runpy.run_path(str(here / "after" / "early_stop.py"))
before = (here / "before" / "early_stop.py").read_text().splitlines()
after = (here / "after" / "early_stop.py").read_text().splitlines()
assert "            best_state = model.state_dict()" in before and "            best_state = model.state_dict()" in after
logs = []
torch.manual_seed(0)
model = nn.Linear(3, 1)
x = torch.randn(8, 3)
ns["fit"](model, [(x, x.sum(1, keepdim=True))], (x, x.sum(1, keepdim=True)), torch.optim.SGD(model.parameters(), lr=0.05), 2, log=logs.append)
assert len(logs) == 2 and all("train loss" in s for s in logs)
print("OK: the change itself is fine; the old bug is on an unchanged line")
