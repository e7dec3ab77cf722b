"""On CPU `.cpu()` returns self; the reconstruction is scaled by 255 before PSNR reads it."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "eval_recon.py"))
x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
assert x.cpu() is x


def model(inp):
    return inp * 0.9


png, score = ns["evaluate"](model, x)
mse = torch.mean((x * 0.9 - x) ** 2)
expected = (10 * torch.log10(1.0 / mse)).item()
assert score < 0 < expected, (score, expected)
print(f"OK: PSNR read the scaled tensor ({score:.1f} dB instead of {expected:.1f} dB)")
