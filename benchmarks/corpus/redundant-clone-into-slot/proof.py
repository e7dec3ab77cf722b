"""insert() runs clone + copy_; the plain slot assignment copies once and is just as independent."""
import runpy
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ns = runpy.run_path(str(Path(__file__).parent / "after" / "rollout.py"))


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


r = ns["Rollout"](4, 5)
obs = torch.randn(5)
with CopyCounter() as c:
    r.insert(0, obs, 1.0)
assert c.count("aten::clone") == 1 and c.count("aten::copy_") >= 1
buf = torch.zeros(4, 5)
buf[0] = obs
obs.add_(1.0)  # the source changes later: the slot keeps the old values
assert torch.equal(buf[0], r.obs[0]) and not torch.equal(buf[0], obs)
print("OK: the slot assignment already copied; the clone was a second copy")
