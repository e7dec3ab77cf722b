"""The HWC image kept for the grid has the mean subtracted."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "transforms.py"))
img = torch.rand(4, 5, 3, generator=torch.Generator().manual_seed(0))
orig = img.clone()
t = ns["ToCHW"]([0.5, 0.4, 0.3])
chw, kept = ns["sample_for_grid"](img, t)
assert kept is img and not torch.equal(img, orig)
assert torch.allclose(img, orig - torch.tensor([0.5, 0.4, 0.3]))
print("OK: the permuted view wrote the mean subtraction into the HWC image")
