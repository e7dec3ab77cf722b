"""No warning; no graph is kept."""
import runpy
import warnings
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "logger.py"))
lg = ns["Logger"]()
w = torch.ones(3, requires_grad=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lg.log_loss((w * 2).sum())
    lg.log_loss((w * 4).sum())
assert not caught and lg.mean() == 9.0 and all(v.grad_fn is None for v in lg.values)
print("OK: torch.tensor(float) is fine")
