"""RC101 write-through-plain-alias."""

from __future__ import annotations

from review_copies.analysis.queries.aliasing import AliasPair
from review_copies.rules.alias_mutation.helpers import WriteThroughAlias, read_lines, write_text
from review_copies.rules.base import Invalid, Valid

_VALID = (
    Valid(
        """
        from copy import deepcopy
        import torch
        def noisy(edge_attr: torch.Tensor, flip_prob: float):
            edge_attr_noisy = deepcopy(edge_attr)
            if flip_prob > 0:
                binary = edge_attr_noisy
                flip = torch.rand_like(binary) < flip_prob
                binary[flip] = 1.0 - binary[flip]
                edge_attr_noisy = deepcopy(binary)
            return edge_attr_noisy
        """,
        "the name is bound to a new copy right after the write, on the way to every later read: no read sees the old object",
    ),
    Valid(
        """
        import numpy as np
        import torch
        from numpy.fft import irfft, rfftfreq
        def powerlaw_noise(exponent: float, samples: int, fmin: float = 0.0):
            f = rfftfreq(samples)
            s_scale = f
            ix = np.sum(s_scale < fmin)
            if ix and ix < len(s_scale):
                s_scale[:ix] = s_scale[ix]
            s_scale = s_scale ** (-exponent / 2.0)
            size = len(f)
            sr = np.random.normal(scale=s_scale, size=size)
            return torch.from_numpy(irfft(sr, n=samples))
        """,
        "`f` is read again only for its length, which writing its values does not change (spikingjelly's colored noise)",
    ),
    Valid(
        """
        import torch
        def softmax_w_top(similarity: torch.Tensor, top_k: int) -> torch.Tensor:
            values, indices = torch.topk(similarity, k=top_k, dim=1)
            x_exp = values.exp_()
            x_exp /= torch.sum(x_exp, dim=1, keepdim=True)
            return torch.zeros_like(similarity).scatter_(1, indices, x_exp)
        """,
        "`topk` returns two new tensors: the values written are not the indices read (XMem's memory readout in ProPainter)",
    ),
    Valid(
        """
        import numpy as np
        import torch
        class FlowAugmentor:
            def spatial_transform(self, img1, img2):
                ht, wd = img1.shape[:2]
                min_scale = np.maximum(8 / float(ht), 8 / float(wd))
                scale = 2 ** np.random.uniform(self.min_scale, self.max_scale)
                scale_x = scale
                scale_y = scale
                if np.random.rand() < self.stretch_prob:
                    scale_x *= 2 ** np.random.uniform(-self.max_stretch, self.max_stretch)
                    scale_y *= 2 ** np.random.uniform(-self.max_stretch, self.max_stretch)
                scale_x = np.clip(scale_x, min_scale, None)
                scale_y = np.clip(scale_y, min_scale, None)
                return scale_x, scale_y
        """,
        "one draw of `np.random.uniform` is a float: `*=` rebinds it (RAFT's augmentor in ProPainter)",
    ),
    Valid(
        """
        import torch
        def gather(shards, shape, dims: int):
            out = torch.empty(shape)
            for offsets, sizes, t in shards:
                view = out
                for d in range(dims):
                    view = view.narrow(d, offsets[d], sizes[d])
                view.copy_(t)
            return out
        """,
        "each shard is written through a view narrowed from the buffer: filling `out` is the point",
    ),
    Valid(
        """
        import torch
        def padded(src: torch.Tensor, size: int) -> torch.Tensor:
            if src.numel() >= size:
                return src
            out = torch.zeros(size, dtype=src.dtype, device=src.device)
            head = torch.narrow(out, 0, 0, src.numel())
            head.data.copy_(src.data)
            return out
        """,
        "a new buffer filled through a view of it: `out` was never meant to be a copy of anything",
    ),
    Valid(
        """
        import torch
        def f():
            a = torch.zeros(3)
            b = a.clone()
            b += 1
            return a, b
        """,
        "b is a copy",
    ),
    Valid(
        """
        import torch
        def f():
            a = torch.zeros(3)
            b = a
            b += 1
            return b
        """,
        "a is never read again",
    ),
    Valid(
        """
        import torch
        def f():
            a = torch.zeros(3)
            a = a + 1
            b = a
            return a, b
        """,
        "no in-place write",
    ),
    Valid(
        """
        import torch
        def f(x: torch.Tensor, t: torch.Tensor, skip: bool):
            out = torch.zeros(3)
            if skip:
                out = x
            else:
                out = x.add_(t)
            return out
        """,
        "the alias and the write sit in different arms of one `if`: no run sees both",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class MultiCondEmbedder(nn.Module):
            def forward(self, batch, key="cls"):
                out = batch
                islist = isinstance(batch[key], list)
                if islist:
                    batch[key] = batch[key][0]
                c_out = self.embed(batch[key])
                out[key] = [c_out] if islist else c_out
                return out
        """,
        "`batch` is a dict of conditions (its item may be a list): `out = batch` aliases a mapping, not a tensor",
    ),
    Valid(
        """
        import torch
        def sync_k(module, k_low_new: float, k_high_new: float) -> None:
            k_low_buf = getattr(module, "k_low_buf", None)
            k_high_buf = getattr(module, "k_high_buf", None)
            k_legacy_buf = getattr(module, "k_buf", None)
            if not (isinstance(k_low_buf, torch.Tensor) and isinstance(k_high_buf, torch.Tensor)):
                if not isinstance(k_legacy_buf, torch.Tensor):
                    return
                k_low_buf = k_legacy_buf
                k_high_buf = k_legacy_buf
            if abs(k_low_new - float(k_low_buf.item())) > 1e-12:
                k_low_buf.fill_(k_low_new)
                if isinstance(k_high_buf, torch.Tensor):
                    k_high_buf.fill_(k_high_new)
        """,
        "after the write `k_high_buf` is only type-checked and then filled whole: no read sees the value `k_low_buf` wrote (ENN-PyTorch)",
    ),
    Valid(
        """
        import torch
        from torch.utils.data import default_collate
        def nearest(hits, reduction: str):
            merged = {k: v.clone() for k, v in default_collate(hits).items()}
            t = merged["t"]
            valid = merged["valid"]
            t[~valid] = torch.inf
            reduced, selector = getattr(t, reduction)(dim=0)
            return reduced, valid.gather(0, selector[None])[0]
        """,
        "the comprehension clones every entry: `t` and `valid` are two tensors, and writing one leaves the other (pixelSplat's epipolar lines)",
    ),
)


class WriteThroughPlainAlias(WriteThroughAlias):
    """
    ## What it does
    Finds `b = a` followed by an in-place write through `b` (`b += 1`, `b.add_(...)`,
    `b[i] = v`) while `a` is read again afterwards.

    ## Why is this bad?
    Assignment never copies a tensor: `b` and `a` are two names for one tensor, so the
    write through `b` also changes what `a` holds. Code that reads `a` later silently sees
    the modified values.

    ## Example
    ```python
    def step(x):
        y = x * 2
        z = y
        z += 1
        return y, z        # y was changed too
    ```

    ## Use instead
    ```python
    def step(x):
        y = x * 2
        z = y.clone()
        z += 1
        return y, z
    ```

    ## Fix safety
    The fix copies at the assignment (`.clone()`), so `a` keeps its values; the sandbox
    checks that the written name computes the same values as before.

    ## Known problems
    Not reported when the name written through is never read again: the write can then only
    be meant for the tensor it shares memory with (normalising a tensor in groups through a
    reshaped view of it).
    """

    code = "RC101"
    name = "write-through-plain-alias"
    prefilter = ("=",)
    VIAS = frozenset(("",))

    VALID = _VALID

    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            class Block(nn.Module):
                def forward(self, x: torch.Tensor, cond: torch.Tensor, compressed: bool):
                    identity = x
                    if compressed:
                        x = self.conv1(x) + self.cond(x, cond)
                    else:
                        x += self.cond(x, cond)
                        x = self.conv1(x)
                    out = self.conv2(x)
                    out += identity
                    return out
            """,
            line=9,
            fix="""
            import torch
            from torch import nn
            class Block(nn.Module):
                def forward(self, x: torch.Tensor, cond: torch.Tensor, compressed: bool):
                    identity = x.clone()
                    if compressed:
                        x = self.conv1(x) + self.cond(x, cond)
                    else:
                        x += self.cond(x, cond)
                        x = self.conv1(x)
                    out = self.conv2(x)
                    out += identity
                    return out
            """,
            note="mmf's bottleneck: the binding in the other arm never runs before the write",
        ),
        Invalid(
            """
            import torch
            def f():
                a = torch.zeros(3)
                b = a
                b += 1
                return a, b
            """,
            line=5,
            fix="""
            import torch
            def f():
                a = torch.zeros(3)
                b = a.clone()
                b += 1
                return a, b
            """,
        ),
        Invalid(
            """
            import torch
            def f(n: int):
                total = torch.ones(n)
                running = total
                for i in range(n):
                    running.mul_(0.5)
                return total.sum(), running
            """,
            line=6,
            fix="""
            import torch
            def f(n: int):
                total = torch.ones(n)
                running = total.clone()
                for i in range(n):
                    running.mul_(0.5)
                return total.sum(), running
            """,
        ),
        Invalid(
            """
            import torch
            def f(xs: list[torch.Tensor]):
                x = torch.zeros(3)
                ref = None
                for i, b in enumerate(xs):
                    if i == 0:
                        ref = x
                    else:
                        x.add_(b)
                return ref
            """,
            line=9,
            fix="""
            import torch
            def f(xs: list[torch.Tensor]):
                x = torch.zeros(3)
                ref = None
                for i, b in enumerate(xs):
                    if i == 0:
                        ref = x.clone()
                    else:
                        x.add_(b)
                return ref
            """,
            note="inside a loop the arms are not exclusive: a later iteration writes what an earlier one aliased",
        ),
    )

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{write_text(pair.write)}` writes in place through `{pair.writer}`, which is the same tensor as `{pair.holder}` "
            f"({self.bind_text(pair)} copies nothing), so `{pair.holder}` changes too and is read again at {read_lines(pair.reads)}. "
            f"Copy with `.clone()` if `{pair.holder}` must keep its values."
        )
