"""Collating tensors from the dataset warns once per sample."""
import runpy
import warnings
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "collate.py"))
ds = ns["Windows"](torch.arange(20.0), 4)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x, y = ns["collate"]([ds[i] for i in range(3)])
assert sum("To copy construct from a tensor" in str(w.message) for w in caught) == 3
assert torch.equal(x, torch.stack([ds[i]["x"] for i in range(3)]))
print("OK: each sample was copy-constructed from a tensor")
