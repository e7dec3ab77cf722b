"""The copy_ into the live state dict loads the weights into the model (the intent)."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "model.py"))
torch.manual_seed(0)
src = ns["TinyGPT"]()
sd_hf = {k: (v.t().contiguous() if k == "c_attn.weight" else v.clone()) for k, v in src.state_dict().items()}
model = ns["TinyGPT"].from_pretrained(sd_hf)
idx = torch.randint(0, 16, (2, 5))
assert torch.equal(model(idx), src(idx))
assert all(p.is_leaf and p.requires_grad for p in model.parameters())
print("OK: from_pretrained loaded the weights through the live state_dict")
