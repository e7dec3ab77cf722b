"""The uint8 source is unchanged."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "pipeline.py"))
batch = ns["make_batch"](2, generator=torch.Generator().manual_seed(0))
raw = batch["image"].clone()
x, logged = ns["prepare"](batch)
assert torch.equal(logged, raw) and x.max() <= 1.0
print("OK: .float() on uint8 copies")
