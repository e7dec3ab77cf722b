"""Dumping the table raises; with .detach() it is written."""
import runpy
import tempfile
from pathlib import Path

import numpy as np

ns = runpy.run_path(str(Path(__file__).parent / "after" / "projector.py"))
model = ns["TextModel"](10, 4)
with tempfile.TemporaryDirectory() as d:
    try:
        ns["dump_embeddings"](model, f"{d}/emb.tsv")
    except RuntimeError as exc:
        assert "requires grad" in str(exc), exc
    else:
        raise SystemExit("dump did not fail")
    np.savetxt(f"{d}/ok.tsv", model.embed.weight.detach().cpu().numpy())
print("OK: Parameter.numpy() raised")
