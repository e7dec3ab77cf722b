"""torch.tensor(ndarray) already owns its memory; the extra .copy() buys nothing."""
import runpy
from pathlib import Path

import numpy as np
import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "np_loader.py"))
arr = np.random.default_rng(0).random((10, 3)).astype(np.float32)
got = list(ns["batches"](arr, 4))
direct = torch.tensor(arr[0:4])
arr_before = arr.copy()
direct[0, 0] = 123.0  # writing the tensor does not touch the array: torch.tensor copied
assert np.array_equal(arr, arr_before)
arr[1, 1] = -7.0  # and writing the array does not touch the tensor
assert direct[1, 1] != -7.0
assert torch.equal(got[0], torch.tensor(arr_before[0:4]))
print("OK: torch.tensor(ndarray) copies; .copy() was a second copy")
