import torch


@torch.no_grad()
def predict_batch(model, x):
    model.eval()
    return model(x).argmax(-1)


def predict(model, loader):
    model.eval()
    outputs = []
    for x in loader:
        outputs.append(model(x))
    return torch.cat(outputs)
