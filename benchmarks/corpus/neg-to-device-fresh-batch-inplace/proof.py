"""The dataset tensors are unchanged after an epoch on CPU, and training matches the out-of-place version."""
import runpy
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

ns = runpy.run_path(str(Path(__file__).parent / "after" / "train.py"))
torch.manual_seed(0)
images = torch.randint(0, 256, (8, 3), generator=torch.Generator().manual_seed(0)).float()
ds = TensorDataset(images, torch.randint(0, 2, (8,)))
orig = images.clone()
m1 = nn.Linear(3, 2)
m2 = nn.Linear(3, 2)
m2.load_state_dict(m1.state_dict())
ns["train_epoch"](m1, ds, torch.optim.SGD(m1.parameters(), lr=0.1), "cpu")
assert torch.equal(images, orig), "the dataset was modified"
opt = torch.optim.SGD(m2.parameters(), lr=0.1)
for i in range(0, 8, 4):
    loss = nn.functional.cross_entropy(m2(orig[i:i + 4] / 255.0), ds.tensors[1][i:i + 4])
    opt.zero_grad()
    loss.backward()
    opt.step()
assert all(torch.allclose(a, b) for a, b in zip(m1.parameters(), m2.parameters()))
print("OK: the in-place rescale only touched the fresh collated batch")
