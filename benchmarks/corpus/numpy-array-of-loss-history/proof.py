"""np.array(loss) raises 'Can't call numpy() on Tensor that requires grad'."""
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "curve.py"))
torch.manual_seed(0)
model = nn.Linear(3, 1)
try:
    ns["train"](model, [(torch.randn(4, 3), torch.randn(4, 1))], torch.optim.SGD(model.parameters(), lr=0.1))
except RuntimeError as exc:
    assert "requires grad" in str(exc), exc
else:
    raise SystemExit("np.array(loss) did not fail")
print("OK: np.array(loss) raised")
