"""RC106 write-through-conversion-self."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis.events import FunctionFlow, Use, Write
from review_copies.analysis.queries.aliasing import AliasPair, name_of
from review_copies.analysis.roots import allocated_here
from review_copies.analysis.semantics import api
from review_copies.analysis.values import Value
from review_copies.rules.alias_mutation.helpers import WriteThroughAlias, read_lines, write_text
from review_copies.rules.base import Invalid, Valid


class WriteThroughConversionSelf(WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through the result of `.to(...)`, `.cpu()`, `.cuda()`,
    `.float()`, `.contiguous()`, `.reshape()`... while the original is read again.

    ## Why is this bad?
    These calls return the tensor itself when nothing needs to change (`x.float()` of a
    float32 tensor, `x.cpu()` of a CPU tensor, `x.contiguous()` of a contiguous one,
    `x.reshape(-1)` when the strides allow a view). The write then changes the original,
    on some inputs and devices but not others, which makes the bug hard to see.

    ## Example
    ```python
    def scaled(x: torch.Tensor):
        y = x.float()
        y.mul_(2)                # changes x when x is already float32
        return x, y
    ```

    ## Use instead
    ```python
    def scaled(x: torch.Tensor):
        y = x.to(torch.float32, copy=True)
        y.mul_(2)
        return x, y
    ```

    ## Fix safety
    The fix always copies (`copy=True`, or `.clone()`), so the original keeps its values
    whatever its dtype, device or layout.

    ## Known problems
    Not reported when the name written through is never read again: the write can then only
    be meant for the tensor it shares memory with (normalising a tensor in groups through a
    reshaped view of it).
    """

    code = "RC106"
    name = "write-through-conversion-self"
    prefilter = (".to(", "cpu(", "cuda(", "float(", "double(", "half(", "contiguous(", "reshape(", "flatten(", "type(")
    VIAS = frozenset(("to", "reshape"))
    recipes = ("alias", "input-mutation")

    VALID = (
        Valid(
            """
            import torch
            def top_k_mask(inputs: torch.Tensor, threshold: float) -> torch.Tensor:
                mask = inputs.clone()
                _, idx = inputs.flatten().sort(descending=True)
                j = int(threshold * inputs.numel())
                flat_out = mask.flatten()
                flat_out[idx[j:]] = 0
                flat_out[idx[:j]] = 1
                return mask
            """,
            "a mask this function made, filled through its flattened view and never read under that name: the write is meant for `mask` (movement pruning)",
        ),
        Valid(
            """
            import torch
            def cotan_laplacian(n_points: int, edges: torch.Tensor, w: torch.Tensor, data: torch.Tensor):
                laplacian = torch.zeros_like(data)
                v0 = edges[:, 0]
                contrib = (w.view(-1, 1) * data[v0]).reshape(len(edges), -1)
                laplacian_flat = laplacian.reshape(n_points, -1)
                laplacian_flat.scatter_add_(0, v0.unsqueeze(-1).expand(-1, contrib.shape[1]), contrib)
                return laplacian_flat.reshape(laplacian.shape)
            """,
            "a new zeroed buffer accumulated through a reshaped view of it on purpose (only its shape is read again)",
        ),
        Valid(
            """
            import torch
            def to_dense(values: torch.Tensor, rows: list[int], shape: tuple[int, int, int]):
                out = torch.zeros(shape, dtype=values.dtype)
                out_r = out.reshape(shape[0], -1)
                for k, r in enumerate(rows):
                    out_r[r] = values[k]
                return out
            """,
            "`out` is a new zeroed buffer, filled through a reshaped view of it on purpose",
        ),
        Valid(
            """
            import torch
            def f():
                x = torch.zeros(3, dtype=torch.int64)
                y = x.float()
                y.mul_(2)
                return x, y
            """,
            "an int64 tensor: .float() copies",
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def route(indices: torch.Tensor, keep: torch.Tensor, n: int):
                one_hot = F.one_hot(indices, n)
                mask = one_hot.float()
                mask *= keep.float().unsqueeze(-1)
                return mask, one_hot.sum(dim=-2)
            """,
            "one_hot returns int64: .float() copies",
        ),
        Valid(
            """
            import torch
            def fill_table(freqs: torch.Tensor, dim: int, steps: torch.Tensor) -> None:
                freqs = freqs.flatten(0, -2)
                l_half = freqs[:, : dim // 2]
                r_half = freqs[:, dim // 2 :]
                torch.outer(steps, torch.arange(dim // 2, dtype=steps.dtype), out=l_half)
                r_half.copy_(l_half[:, : r_half.size(1)])
                l_half.sin_()
                r_half.cos_()
            """,
            "`[:, :k]` and `[:, k:]` are disjoint halves of one buffer: a write into one never reaches the other",
        ),
        Valid(
            """
            import torch
            def f(x: torch.Tensor):
                y = x.to(torch.float32, copy=True)
                y.mul_(2)
                return x, y
            """
        ),
        Valid(
            """
            import torch
            def durations(logits: torch.Tensor, device):
                table = torch.tensor([0, 1, 2, 4]).to(device)
                picked = table[logits.argmax(dim=-1)]
                picked.masked_fill_(picked == 0, 1)
                return table, picked
            """,
            "indexing with a tensor copies: the write never reaches `table`, whatever `.to` returned",
        ),
        Valid(
            """
            import torch
            def refine(codes, model, device, steps: int):
                arr = torch.tensor(codes.T).to(device)
                for n in range(steps):
                    window = arr[n * 8 : n * 8 + 16][None]
                    window[0, 8:] = model(window).argmax(-1)[0, 8:]
                return arr
            """,
            "`window` is a slice of `arr`, not what `.to` returned: the write into `arr` is a view's, and the point",
        ),
        Valid(
            """
            import torch
            import torch_xla
            def test_stepped_assign():
                device = torch_xla.device()
                a = torch.ones((3, 10))
                on_xla = a.to(device)
                a[:, 1::2] = 2
                on_xla[:, 1::2] = 2
                assert torch.equal(a, on_xla.cpu())
            """,
            "an XLA device is never the CPU: moving a CPU tensor there always copies",
        ),
        Valid(
            """
            import torch
            from torch import nn
            class Scaler(nn.Module):
                def __init__(self, n: int):
                    super().__init__()
                    self.register_buffer("y_std", torch.ones(1, n))
                def flatten_stats(self) -> torch.Tensor:
                    std_flat = self.y_std.reshape(-1)
                    with torch.no_grad():
                        if self.y_std.shape != std_flat.shape:
                            self.y_std.resize_(std_flat.shape)
                        self.y_std.copy_(std_flat)
                    return self.y_std
            """,
            "`resize_` changes only the buffer's shape: the view `std_flat` keeps its values (ENN-PyTorch)",
        ),
        Valid(
            """
            import torch
            def keep_some(mask: torch.Tensor, keep_prob: float, rows: torch.Tensor) -> torch.Tensor:
                kept = mask * (torch.rand_like(mask) < keep_prob).to(mask.dtype)
                flat = kept.reshape(kept.shape[0], -1)
                flat[rows, 0] = 1.0
                return flat.view_as(kept)
            """,
            "`view_as(kept)` takes only the shape of `kept`, which the write does not change (DepthDif's ambient mask)",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                x = torch.zeros(3)
                y = x.float()
                y.mul_(2)
                return x, y
            """,
            line=5,
            fix="""
            import torch
            def f():
                x = torch.zeros(3)
                y = x.float().clone()
                y.mul_(2)
                return x, y
            """,
        ),
        Invalid(
            """
            import torch
            def f(device):
                x = torch.ones(3)
                y = x.to(device)
                y += 1
                return x.sum(), y
            """,
            line=5,
            fix="""
            import torch
            def f(device):
                x = torch.ones(3)
                y = x.to(device, copy=True)
                y += 1
                return x.sum(), y
            """,
        ),
    )

    def accepts(self, flow: FunctionFlow, pair: AliasPair, alias: Value) -> bool:
        # Aliasing is possible, not certain (the message says when); but the name must be the
        # conversion's result itself: a slice of a `.to(...)` result is a view of it (RC104's).
        bind = pair.holder_bind if alias is pair.holder_value else pair.writer_bind
        if allocated_here(pair.holder_value.roots) and not _read_as_a_value(flow, pair):
            return False  # `flat_out = mask.flatten()` filling a mask this function made: the write is meant for `mask`
        return bind is None or bind.expr is None or _converts(bind.expr)

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{write_text(pair.write)}` writes in place into {self.bind_text(pair)}, which returns `{pair.holder}` itself "
            "whenever dtype, device and layout already match (no copy is made), so the write can change "
            f"`{pair.holder}`, which is read again at {read_lines(pair.reads)}. Copy explicitly (`copy=True` or `.clone()`)."
        )


def _converts(expr: cst.BaseExpression) -> bool:
    """A call of a method that may return its receiver itself (`.to(...)`, `.float()`, `.reshape(...)`)."""
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in api.MAYBE_SELF_METHODS | api.MAYBE_VIEW_METHODS


def _read_as_a_value(flow: FunctionFlow, pair: AliasPair) -> bool:
    """Is the name written through read after the write other than to be written again
    (`flat_out[idx[:j]] = 1` only writes)?"""
    writes = {id(w.stmt) for w in flow.of(Write) if name_of(w.target_node) == pair.writer}
    return any(isinstance(u, Use) and u.name == pair.writer and id(u.stmt) not in writes for u in flow.later(pair.write))
