"""Backward through the energy term fails: pow's saved input was changed."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "block.py"))
torch.manual_seed(0)
blk = ns["EnergyBlock"](4)
h, energy = blk(torch.randn(3, 4))
try:
    (h.sum() + 0.1 * energy.sum()).backward()
except RuntimeError as exc:
    assert "modified by an inplace operation" in str(exc), exc
else:
    raise SystemExit("backward did not fail")
print("OK: the in-place bias broke PowBackward's saved input")
