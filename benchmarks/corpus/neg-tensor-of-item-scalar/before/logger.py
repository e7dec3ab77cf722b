import torch


class Logger:
    def __init__(self):
        self.values = []
