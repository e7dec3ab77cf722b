"""What rules ask of a function's flow, by topic (as ruff groups its semantic helpers):

- `aliasing`: who else holds this memory, is it read after the write
- `autograd`: saved tensors, backward calls between two events
- `loops`: which loop an event runs in, what survives it
- `callers`: this file's call sites of a function, and what callers do with the result
- `intent`: what a function's name and signature say it is for (mutating helpers, ops)
"""
