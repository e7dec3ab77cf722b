"""Construction works; the weight is a leaf that trains."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "layers.py"))
layer = ns["ScaledLinear"](4, 3)
assert layer.weight.is_leaf and layer.weight.requires_grad and layer.weight.abs().max() <= 0.5
layer(torch.randn(2, 4)).sum().backward()
assert layer.weight.grad is not None
print("OK: in-place init under no_grad is correct")
