"""The second batch's backward reaches into the first batch's freed graph."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "lm.py"))
torch.manual_seed(0)
model = ns["RNNModel"](20, 8)
batches = [(torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 5))) for _ in range(3)]
try:
    ns["train"](model, batches, torch.optim.SGD(model.parameters(), lr=0.1))
except RuntimeError as exc:
    assert "backward through the graph a second time" in str(exc), exc
else:
    raise SystemExit("training did not fail")
# detaching the carried state fixes it
hidden = None
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for inputs, targets in batches:
    logits, hidden = model(inputs, hidden)
    hidden = hidden.detach()
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
print("OK: the carried hidden state kept the previous graph")
