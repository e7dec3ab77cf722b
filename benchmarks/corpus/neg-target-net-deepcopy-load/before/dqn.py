import torch
from torch import nn


class Agent:
    def __init__(self, obs_dim, n_actions, gamma=0.99):
        self.policy = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, n_actions))
        self.gamma = gamma
