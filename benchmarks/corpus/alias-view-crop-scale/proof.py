"""The in-place scale of the view changes the frames the global branch reads."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "augment.py"))
frames = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
raw = frames.clone()
local, global_view = ns["two_views"](frames)
assert not torch.equal(frames, raw), "frames unchanged"
assert torch.allclose(frames[:, :, 4:12, 4:12], raw[:, :, 4:12, 4:12] * 1.5)
assert not torch.allclose(global_view, raw.mean(dim=(2, 3))), "global view unaffected"
assert torch.allclose(local, raw[:, :, 4:12, 4:12] * 1.5)
print("OK: the centre crop was scaled inside the caller's frames")
