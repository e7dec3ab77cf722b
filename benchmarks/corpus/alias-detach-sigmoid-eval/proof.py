"""sigmoid_ through the detached alias makes every logit positive, so every label is predicted."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "evaluate.py"))
torch.manual_seed(0)
model = nn.Linear(5, 3)
x = torch.randn(16, 5)
loader = [(x, None)]
with torch.no_grad():
    true_preds = model(x) > 0
scores, preds = ns["evaluate"](model, loader)
assert preds.all(), "expected every label to be predicted"
assert not torch.equal(preds, true_preds)
assert torch.allclose(scores, torch.sigmoid(model(x)).detach())
print("OK: the threshold read probabilities instead of logits")
