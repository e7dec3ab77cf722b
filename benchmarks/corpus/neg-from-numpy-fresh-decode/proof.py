"""The result is right and the input bytes are untouched."""
import runpy
from pathlib import Path

import numpy as np
import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "decode.py"))
raw = bytes(range(24))
img = ns["decode"](raw, (2, 3, 4))
assert raw == bytes(range(24))
assert torch.allclose(img, torch.arange(24, dtype=torch.float32).view(2, 3, 4) / 255.0)
print("OK: from_numpy on a fresh local array is fine")
