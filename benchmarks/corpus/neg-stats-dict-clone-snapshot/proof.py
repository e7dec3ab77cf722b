"""The increments equal the counts added during the epoch."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "confusion.py"))
c = ns["Confusion"](3)
batches = [(torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 1, 2]))]
c.run_epoch(batches)
inc = c.run_epoch(batches)
assert inc["tp"].sum() == 3 and inc["fp"].sum() == 1 and c.stats["tp"].sum() == 6
print("OK: the cloned snapshot is independent")
