"""Training one normalizer moves the other one's running mean."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "norm.py"))
a, b = ns["build_pair"](4)
a(torch.ones(8, 4) * 3.0)
assert torch.allclose(b.running_mean, torch.full((4,), 0.3)), b.running_mean
assert a.running_mean is b.running_mean
print("OK: the two modules share the caller's init tensor as their buffer")
