"""All deltas are zero because prev aliases the state that is updated in place."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "smoothing.py"))
xs = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
state, deltas = ns["smooth"](xs)
assert deltas == [0.0] * 5, deltas
# the out-of-place loop gives non-zero deltas and the same final state
s = torch.zeros(3)
ref = []
for x in xs:
    n = 0.9 * s + 0.1 * x
    ref.append((n - s).norm().item())
    s = n
assert all(d > 0 for d in ref) and torch.allclose(s, state)
print("OK: prev aliased state; every delta was 0")
