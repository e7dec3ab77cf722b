"""Building the layer raises the leaf in-place error; under no_grad the same init works."""
import math
import runpy
from pathlib import Path

import torch
from torch import nn

ns = runpy.run_path(str(Path(__file__).parent / "after" / "layers.py"))
try:
    ns["ScaledLinear"](4, 3)
except RuntimeError as exc:
    assert "leaf Variable that requires grad" in str(exc), exc
else:
    raise SystemExit("constructing the layer did not fail")
w = nn.Parameter(torch.empty(3, 4))
with torch.no_grad():
    w.uniform_(-1 / math.sqrt(4), 1 / math.sqrt(4))
assert w.is_leaf and w.requires_grad
print("OK: uniform_ on a Parameter outside no_grad raised the leaf error")
