"""Each weight is cloned before quantization; quantizing the weight itself gives the same result and leaves it intact."""
import runpy
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

ns = runpy.run_path(str(Path(__file__).parent / "after" / "quant.py"))


class CopyCounter(TorchDispatchMode):
    """Counts the aten ops that run, to show which copies happen."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._schema.name)
        return func(*args, **(kwargs or {}))

    def count(self, name):
        return self.ops.count(name)


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
w0 = {n: p.detach().clone() for n, p in model.named_parameters()}
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    with CopyCounter() as c:
        q = ns["quantize_weights"](model)
    assert c.count("aten::clone") == 2
    for name, scale in ns["weight_scales"](model).items():
        direct = torch.quantize_per_tensor(model.get_parameter(name).detach(), scale, 0, torch.qint8)
        assert torch.equal(direct.int_repr(), q[name].int_repr())
assert all(torch.equal(p, w0[n]) for n, p in model.named_parameters())
print("OK: the clones before quantize_per_tensor were redundant")
