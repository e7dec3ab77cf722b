"""Regenerate torch_api.json from the installed torch's own operator schemas.

    python tools/generate_torch_api.py

The reviewer itself never imports torch (its process holds the API keys and must stay
light); it reads this table instead. The table says, for every `torch.Tensor` method and
`torch.*` function, whether it returns a tensor, a tuple of tensors, or something else, as
torch's aten schemas declare it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "reviewer" / "analysis" / "semantics" / "torch_api.json"
# Not aten ops, or aten schemas that say less than the Python API does.
_EXTRA = {
    "tensor": (
        "T H mT mH bfloat16 bool byte char double float half int long short cdouble cfloat new new_tensor "
        "to_sparse_coo as_subclass xpu ipu mtia"
    ).split(),
    "tuple": ["unique", "lu"],
    "other": (
        "data_ptr const_data_ptr dim_order dtype grad_fn itemsize layout name nbytes ndim ndimension nelement numpy "
        "register_hook register_post_accumulate_grad_hook shape share_memory_ storage storage_type tolist type "
        "untyped_storage is_shared apply_ map_ map2_"
    ).split(),
}


def _schema_kinds() -> dict[str, set[str]]:
    import torch

    kinds: dict[str, set[str]] = defaultdict(set)
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        returns = [str(r.type) for r in schema.returns]
        if returns == ["Tensor"]:
            kind = "tensor"
        elif returns and (all(r == "Tensor" for r in returns) or returns == ["Tensor[]"]):
            kind = "tuple"
        else:
            kind = "other"
        kinds[schema.name[len("aten::") :]].add(kind)
    return kinds


def _view_ops() -> set[str]:
    """Ops whose result aliases an input (`Tensor(a) self -> Tensor(a)`): views, not copies."""
    import torch

    views: set[str] = set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::") or not schema.returns:
            continue
        info = schema.returns[0].alias_info
        if info is not None and not info.is_write:
            views.add(schema.name[len("aten::") :])
    return views


def _classify(names: list[str], kinds: dict[str, set[str]]) -> dict[str, list[str]]:
    table: dict[str, list[str]] = {"tensor": [], "tuple": [], "other": []}
    for name in names:
        found = kinds.get(name, set())
        if not found:
            continue
        # Tensor overloads return tensors; the scalar ones are TorchScript's number ops.
        kind = "tensor" if "tensor" in found else "tuple" if "tuple" in found else "other"
        table[kind].append(name)
    return table


def main() -> None:
    import torch

    kinds = _schema_kinds()
    methods = _classify([m for m in dir(torch.Tensor) if not m.startswith("__")], kinds)
    for kind, names in _EXTRA.items():
        methods[kind].extend(n for n in names if n not in methods[kind])
    functions = _classify([f for f in dir(torch) if not f.startswith("_") and callable(getattr(torch, f))], kinds)
    data = {
        "torch_version": torch.__version__,
        "views": sorted(_view_ops()),
        "tensor_methods": {k: sorted(set(v)) for k, v in methods.items()},
        "torch_functions": {k: sorted(set(v)) for k, v in functions.items()},
    }
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT}: {sum(len(v) for v in data['tensor_methods'].values())} methods, {sum(len(v) for v in data['torch_functions'].values())} functions")


if __name__ == "__main__":
    main()
