"""The HWC image is unchanged."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "transforms.py"))
img = torch.rand(4, 5, 3, generator=torch.Generator().manual_seed(0))
orig = img.clone()
chw, kept = ns["sample_for_grid"](img, ns["ToCHW"]([0.5, 0.4, 0.3]))
assert torch.equal(kept, orig)
assert torch.allclose(chw, orig.permute(2, 0, 1) - torch.tensor([0.5, 0.4, 0.3])[:, None, None])
print("OK: contiguous() of a permuted view copies")
