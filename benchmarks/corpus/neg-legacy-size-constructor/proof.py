"""Both calls allocate fresh tensors of the requested size and warn nothing."""
import runpy
import warnings
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "noise.py"))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = ns["gaussian_noise"](4, 3)
    b = ns["uniform_bias"](5)
assert not caught, [str(w.message) for w in caught]
assert a.shape == (4, 3) and a.dtype == torch.float32 and b.shape == (5,) and b.abs().max() <= 0.1
print("OK: size constructors are not copy-constructs")
