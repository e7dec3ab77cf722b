"""inplace-autograd: an in-place op breaks or silently corrupts autograd."""
