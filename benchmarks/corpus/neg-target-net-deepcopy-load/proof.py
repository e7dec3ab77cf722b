"""The target lags the policy until sync_target, then matches it without aliasing."""
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
assert torch.equal(agent.td_target(torch.ones(5), obs, torch.zeros(5)), t0)
agent.sync_target()
assert all(torch.equal(a, b) and a.data_ptr() != b.data_ptr() for a, b in zip(agent.target.parameters(), agent.policy.parameters()))
print("OK: deepcopy + load_state_dict keep the target independent")
