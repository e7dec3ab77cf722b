import torch
import torch.distributed as dist


def world_size():
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


@torch.no_grad()
def gather_embeddings(local):
    parts = [torch.empty_like(local) for _ in range(world_size())]
    dist.all_gather(parts, local)
    return torch.cat(parts, dim=0)
