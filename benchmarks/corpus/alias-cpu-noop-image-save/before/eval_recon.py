import torch

DEVICE = torch.device("cpu")


def to_uint8(t):
    img = t.detach().cpu()
    return (img.clamp(0, 1) * 255).round().to(torch.uint8)


def psnr(a, b):
    mse = torch.mean((a - b) ** 2)
    return 10 * torch.log10(1.0 / mse)


@torch.no_grad()
def evaluate(model, x):
    recon = model(x.to(DEVICE))
    png = to_uint8(recon)
    return png, psnr(recon, x).item()
