"""The target `clean` is changed by the write through its alias `noisy`."""
import runpy
from pathlib import Path

import torch
import torch.nn.functional as F

ns = runpy.run_path(str(Path(__file__).parent / "after" / "train.py"))
clean = torch.rand(4, 8)
original = clean.clone()
seen = {}


def model(x):
    seen["input"] = x
    return torch.zeros_like(x)


loss = ns["denoise_loss"](model, clean, 0.5, generator=torch.Generator().manual_seed(0))
assert not torch.equal(clean, original), "clean was not modified"
assert seen["input"] is clean
# The loss was computed against the noisy tensor, not the clean target.
noise = 0.5 * torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
expected = F.mse_loss(torch.zeros(4, 8), original)
assert not torch.allclose(loss, expected)
assert torch.allclose(loss, F.mse_loss(torch.zeros(4, 8), original + noise))
print("OK: denoise_loss changed the caller's clean batch; the loss used the noisy target")
