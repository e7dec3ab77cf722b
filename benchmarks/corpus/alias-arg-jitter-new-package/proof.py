"""The reconstruction target is the jittered cloud: the loss of the identity model is 0."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent / "after"))
from pointaug.train import reconstruction_loss  # noqa: E402

clean = torch.rand(16, 3)
orig = clean.clone()
loss = reconstruction_loss(lambda x: x, clean, generator=torch.Generator().manual_seed(0))
assert not torch.equal(clean, orig), "the caller's cloud was not modified"
assert loss.item() == 0.0, loss
print("OK: add_jitter wrote into the caller's clean cloud")
