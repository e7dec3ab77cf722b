"""What library calls do to values, one file per family (as pytype keeps library behaviour
in overlays, outside its VM):

- `functions`: calls known by qualified name (factories, views, `nn.functional`, NumPy)
- `methods`: a method call, dispatched by what the receiver is
- `tensors`: tensor methods, conversions that may return `self`
- `modules`: nn.Module and optimizer methods
- `callables`: calling a module or a builtin
- `containers`: lists and dicts of tensors
- `api`: the torch vocabulary these read (with `torch_api.json`, generated from torch's schemas)

Each function takes the interpreter's `Context` and returns the call's `Value`, recording
events (writes, stores, saved tensors) on the way.
"""
