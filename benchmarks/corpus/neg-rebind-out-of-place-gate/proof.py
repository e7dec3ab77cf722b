"""backward works and the gradients match finite differences."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "model.py"))
torch.manual_seed(0)
block = ns["GatedBlock"](3).double()
x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
assert torch.autograd.gradcheck(lambda inp: block(inp), (x,))
print("OK: x = x + b after sigmoid backpropagates correctly")
