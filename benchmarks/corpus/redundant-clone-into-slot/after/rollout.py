import torch


class Rollout:
    def __init__(self, steps, obs_dim):
        self.obs = torch.zeros(steps, obs_dim)
        self.rewards = torch.zeros(steps)

    def insert(self, t, obs, reward):
        self.obs[t] = obs.clone()
        self.rewards[t] = reward
