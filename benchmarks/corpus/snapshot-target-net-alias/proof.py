"""An optimizer step on the policy also moves the target."""
import runpy
from pathlib import Path

import torch

ns = runpy.run_path(str(Path(__file__).parent / "after" / "dqn.py"))
torch.manual_seed(0)
agent = ns["Agent"](4, 2)
obs = torch.randn(5, 4)
t0 = agent.td_target(torch.ones(5), obs, torch.zeros(5))
opt = torch.optim.SGD(agent.policy.parameters(), lr=0.5)
agent.policy(obs).sum().backward()
opt.step()
t1 = agent.td_target(torch.ones(5), obs, torch.zeros(5))
assert not torch.allclose(t0, t1), "the target did not move"
print("OK: the target network is the policy network")
