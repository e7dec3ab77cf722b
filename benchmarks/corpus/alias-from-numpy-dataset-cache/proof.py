"""Two reads of the same item differ: the cache is modified through from_numpy's shared memory."""
import runpy
from pathlib import Path

import numpy as np
import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "dataset.py"))
images = np.random.default_rng(0).random((3, 2, 4, 4))
ds = ns["CachedImages"](images, mean=0.5)
first = ds[0].clone()
second = ds[0].clone()
assert not torch.equal(first, second), "repeated reads are equal"
assert torch.allclose(first - second, torch.full_like(first, 0.5))
assert np.allclose(ds.images[0], images[0] - 1.0)
print("OK: each __getitem__ subtracted the mean from the cached array again")
