"""new_tensor(parameter) warns and cuts the parameter out of the graph."""
import runpy
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "calib.py"))
m = ns["TemperatureScaling"]()
logits = torch.randn(8, 3, requires_grad=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = m(logits)
assert any("To copy construct from a tensor" in str(w.message) for w in caught)
F.cross_entropy(out, torch.randint(0, 3, (8,))).backward()
assert m.log_temp.grad is None, "the temperature got a gradient"
print("OK: new_tensor(parameter) warned and the parameter gets no gradient")
