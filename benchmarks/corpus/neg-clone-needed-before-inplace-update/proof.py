"""Without the clone the delta would be 0; with it the delta is the real correction."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "kalman.py"))
state = torch.zeros(3)
gain = torch.eye(3)
innov = torch.tensor([3.0, 4.0, 0.0])
_, delta = ns["correct"](state, gain, innov)
assert abs(delta - 5.0) < 1e-6
s2 = torch.zeros(3)
prev = s2
s2.add_(gain @ innov)
assert (s2 - prev).norm().item() == 0.0  # what happens without the copy
print("OK: the clone is required")
