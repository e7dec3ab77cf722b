"""`.float()` on a float32 tensor is a no-op returning self; the raw image is rescaled too."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "pipeline.py"))
batch = ns["make_batch"](4, generator=torch.Generator().manual_seed(0))
assert batch["image"].float() is batch["image"]
raw = batch["image"].clone()
x, logged = ns["prepare"](batch)
assert logged.max() <= 1.0 < raw.max(), "the raw image was not rescaled"
assert torch.allclose(x, raw / 255.0)
print("OK: .float() returned self and div_ rescaled the logged raw image")
