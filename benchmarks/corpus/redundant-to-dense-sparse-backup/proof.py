"""The dense backup holds 40,000 floats for 5 non-zeros; a sparse clone restores the same matrix."""
import runpy
import warnings
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "graph.py"))
warnings.simplefilter("ignore", UserWarning)  # "Sparse invariant checks are implicitly disabled"
idx = torch.tensor([[0, 1, 2, 3, 199], [1, 0, 3, 2, 5]])
adj = torch.sparse_coo_tensor(idx, torch.tensor([0.5, 0.5, 0.1, 0.1, 2.0]), (200, 200))
conv = ns["GraphConv"](adj, 4)
dense_bytes = conv.adj_backup.numel() * conv.adj_backup.element_size()
backup = conv.adj.clone()
sparse_bytes = sum(t.numel() * t.element_size() for t in (backup.indices(), backup.values()))
assert dense_bytes == 200 * 200 * 4 and sparse_bytes < dense_bytes / 100, (dense_bytes, sparse_bytes)
conv.prune(0.3)
assert conv.adj.values().numel() == 3
conv.restore()
assert torch.equal(conv.adj.to_dense(), backup.to_dense())
print(f"OK: dense backup {dense_bytes} bytes vs sparse clone {sparse_bytes} bytes, same restore")
