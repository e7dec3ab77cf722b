"""review-copies: a code reviewer for how PyTorch code copies, shares and mutates tensors."""

__version__ = "0.1.0"
