"""The cat output is a second buffer of the same size; the into-tensor gather gives the same result in one."""
import os
import runpy
import tempfile
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

ns = runpy.run_path(str(Path(__file__).parent / "after" / "dist_utils.py"))


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


fd, store = tempfile.mkstemp()
os.close(fd)
os.unlink(store)
dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{store}")
try:
    local = torch.randn(8, 4)
    with CopyCounter() as c:
        out = ns["gather_embeddings"](local)
    assert c.count("aten::cat") == 1
    fixed = torch.empty(dist.get_world_size() * 8, 4)
    gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        gather(fixed, local)
    assert torch.equal(out, fixed)
finally:
    dist.destroy_process_group()
    if os.path.exists(store):
        os.unlink(store)
print("OK: all_gather + cat copied the gathered data twice; the into-tensor gather once")
