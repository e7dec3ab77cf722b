import torch


def mask_tokens(input_ids, mask_id, prob=0.15, generator=None):
    masked = torch.rand(input_ids.shape, generator=generator) < prob
    inputs = torch.where(masked, torch.full_like(input_ids, mask_id), input_ids)
    labels = input_ids.masked_fill(~masked, -100)
    return inputs, labels
