"""Each frame of the clip is distinct."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "video.py"))
src = iter(torch.arange(4.0).view(4, 1, 1).expand(4, 2, 2).clone())
clip = ns["read_clip"](lambda: next(src), 4, (2, 2), gain=2.0)
assert torch.equal(clip[:, 0, 0], torch.tensor([0.0, 2.0, 4.0, 6.0]))
print("OK: appending a clone keeps every frame")
