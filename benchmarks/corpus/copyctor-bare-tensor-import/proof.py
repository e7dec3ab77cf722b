"""Feeding a tensor metric warns 'To copy construct from a tensor'."""
import runpy
import warnings
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "ema.py"))
m = ns["EMAMetric"]()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    m.ema_update(torch.tensor(0.5))
    m.ema_update(torch.tensor(0.7))
assert sum("To copy construct from a tensor" in str(w.message) for w in caught) == 2
print("OK: tensor(tensor) warned on every update")
