"""No copy-construct warning, and the statistics match."""
import runpy
import statistics
import warnings
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "summary.py"))
torch.manual_seed(0)
batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(5)]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    mean, std = ns["collect"](nn.Linear(3, 1), batches, nn.MSELoss())
assert not caught, [str(w.message) for w in caught]
assert isinstance(mean, float) and std >= 0.0
print("OK: torch.tensor(list of floats) does not warn")
