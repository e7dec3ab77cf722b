"""Training the built model fails at backward: tanh's saved output was scaled in place."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "net.py"))
torch.manual_seed(0)
model = ns["build"]()
out = model(torch.randn(4, 8))
try:
    out.sum().backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc) and "Tanh" in str(exc), exc
else:
    raise SystemExit("backward did not fail")
print("OK: x.mul_ in forward broke TanhBackward's saved output")
