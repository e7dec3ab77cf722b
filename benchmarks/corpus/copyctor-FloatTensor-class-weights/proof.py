"""torch.FloatTensor(int64 tensor) raises a TypeError."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "weights.py"))
labels = torch.tensor([0, 0, 1, 2, 2, 2])
try:
    ns["make_criterion"](labels, 3)
except TypeError as exc:
    assert "expected" in str(exc), exc
else:
    raise SystemExit("FloatTensor(int64 tensor) did not fail")
counts = torch.bincount(labels, minlength=3).float()
assert torch.equal(counts, torch.tensor([2.0, 1.0, 3.0]))
print("OK: FloatTensor(tensor) raised")
