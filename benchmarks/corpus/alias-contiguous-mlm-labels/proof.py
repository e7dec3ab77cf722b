"""The labels at masked positions are the mask token instead of the original tokens."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "mlm.py"))
ids = torch.randint(5, 100, (4, 32), generator=torch.Generator().manual_seed(0))
orig = ids.clone()
assert ids.contiguous() is ids
inputs, labels = ns["mask_tokens"](ids, mask_id=3, prob=0.3, generator=torch.Generator().manual_seed(1))
masked = torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.3
assert masked.any()
assert (labels[masked] == 3).all(), "labels kept the original tokens"
assert not torch.equal(labels[masked], orig[masked])
print("OK: the mask token leaked into the labels through contiguous()")
