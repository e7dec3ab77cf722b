import torch


def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)


def save_half(model, path):
    sd = {k: v.clone().half() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    torch.save(sd, path)
