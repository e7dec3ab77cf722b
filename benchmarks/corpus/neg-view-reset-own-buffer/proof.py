"""push writes the row into the buffer, reset clears it; the caller's row is untouched."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "ring.py"))
r = ns["Ring"](3, 2)
row = torch.tensor([1.0, 2.0])
r.push(row)
assert torch.equal(r.data[0], row)
r.reset()
assert (r.data == 0).all() and torch.equal(row, torch.tensor([1.0, 2.0]))
print("OK: the writes through views of the own buffer are intended")
