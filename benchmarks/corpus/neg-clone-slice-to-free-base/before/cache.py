import torch


class LogitCache:
    def __init__(self):
        self.items = []
