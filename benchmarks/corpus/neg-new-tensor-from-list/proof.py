"""No warning and the right values."""
import runpy
import warnings
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "coords.py"))
xy = torch.tensor([[10.0, 20.0]], dtype=torch.float64)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = ns["to_unit"](xy, 100, 40)
assert not caught and out.dtype == torch.float64 and torch.allclose(out, torch.tensor([[0.1, 0.5]], dtype=torch.float64))
print("OK: new_tensor(list) does not warn")
