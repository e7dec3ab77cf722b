"""Two aten::clone for one needed copy; without the second the result is equal and the weight intact."""
import runpy
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ns = runpy.run_path(str(Path(__file__).parent / "after" / "kernels.py"))


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


w = torch.randn(3, 5)
w0 = w.clone()
with CopyCounter() as c:
    k = ns["export_kernel"](w, 2.0)
assert c.count("aten::clone") == 2, c.ops
k2 = w.t().contiguous()
assert k2.untyped_storage().data_ptr() != w.untyped_storage().data_ptr()
k2.mul_(2.0)
assert torch.equal(k, k2) and torch.equal(w, w0)
print("OK: contiguous() already copied the transposed weight")
