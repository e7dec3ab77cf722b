"""One gather, no extra copy, the right per-rank values."""
import os
import runpy
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import TorchDispatchMode

ns = runpy.run_path(str(Path(__file__).parent / "after" / "dist_stats.py"))


class Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._schema.name)
        return func(*args, **(kwargs or {}))


fd, store = tempfile.mkstemp()
os.close(fd)
os.unlink(store)
dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{store}")
try:
    local = torch.arange(6.0)
    with Ops() as o:
        means = ns["per_rank_means"](local)
    assert means == [2.5] and "aten::cat" not in o.ops and "aten::clone" not in o.ops
finally:
    dist.destroy_process_group()
    if os.path.exists(store):
        os.unlink(store)
print("OK: the per-rank list is used as is")
