"""RC105 write-through-numpy-share."""

from __future__ import annotations

from collections.abc import Iterator

from review_copies.analysis import roots
from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.queries.aliasing import AliasPair, last_bind, name_of
from review_copies.analysis.queries.intent import deliberate_write
from review_copies.rules._common import copy_at_binding
from review_copies.rules.alias_mutation.helpers import WriteThroughAlias, read_lines, write_text
from review_copies.rules.base import Hit, Invalid, Valid


class WriteThroughNumpyShare(WriteThroughAlias):
    """
    ## What it does
    Finds an in-place write through a tensor or array that shares memory across the NumPy
    boundary (`torch.from_numpy(a)`, `torch.as_tensor(a)`, `t.numpy()`) while the other
    side is read again afterwards.

    ## Why is this bad?
    These conversions do not copy: the tensor and the array are one buffer. A write on
    one side shows on the other, so data the rest of the code still reads (a dataset
    array, a cached feature) is silently changed.

    ## Example
    ```python
    def standardise(features: np.ndarray):
        t = torch.from_numpy(features)
        t -= t.mean()
        return t, features.std()      # features was changed too
    ```

    ## Use instead
    ```python
    def standardise(features: np.ndarray):
        t = torch.from_numpy(features).clone()
        t -= t.mean()
        return t, features.std()
    ```

    ## Fix safety
    The fix copies at the conversion (`.clone()` / `.copy()`); the other side keeps its values.

    ## Known problems
    Not reported when the name written through is never read again: the write can then only
    be meant for the tensor it shares memory with (normalising a tensor in groups through a
    reshaped view of it).
    """

    code = "RC105"
    name = "write-through-numpy-share"
    prefilter = ("numpy", "as_tensor")
    VIAS = frozenset(("from_numpy", "as_tensor", "numpy"))

    VALID = (
        Valid(
            """
            import numpy as np
            import torch
            def f():
                a = np.zeros(3, dtype=np.float32)
                t = torch.tensor(a)
                t += 1
                return a, t
            """,
            "torch.tensor copies the array",
        ),
        Valid(
            """
            import torch
            def shifted(x: torch.Tensor) -> torch.Tensor:
                y = x + 1.0
                host = y.detach().numpy()
                y.add_(2.0)
                host[0] = 99.0
                return y * 2.0
            """,
            "after the write `host` is only stored into, never read: no stale values are seen (TorchLens' test modules)",
        ),
        Valid(
            """
            import copy
            import numpy as np
            import torch
            def approximate(model, find_subset, epsilon: float, n: int):
                approx = copy.deepcopy(model.state_dict())
                for h in list(approx.keys()):
                    for i in range(len(approx[h])):
                        w = approx[h][i].cpu().data.numpy()
                        a = np.random.uniform(size=n).tolist()
                        if len(approx[h][i].size()) == 0:
                            approx[h][i] = find_subset(w, a, epsilon)
                        else:
                            for j in range(len(w)):
                                approx[h][i][j] = find_subset(w[j], a, epsilon)
                return approx
            """,
            "the write and the later read sit in opposite arms of one `if`: the read runs on a later pass, which binds `w` anew first",
        ),
    )
    INVALID = (
        Invalid(
            """
            import numpy as np
            import torch
            def f():
                a = np.zeros(3, dtype=np.float32)
                t = torch.from_numpy(a)
                t += 1
                return a.sum(), t
            """,
            line=6,
            fix="""
            import numpy as np
            import torch
            def f():
                a = np.zeros(3, dtype=np.float32)
                t = torch.from_numpy(a).clone()
                t += 1
                return a.sum(), t
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                t = torch.arange(4.0)
                arr = t.numpy()
                arr[0] = -1
                return t, arr
            """,
            line=5,
            fix="""
            import torch
            def f():
                t = torch.arange(4.0)
                arr = t.numpy().copy()
                arr[0] = -1
                return t, arr
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        said = []
        for hit in super().check(flow):
            said.append(hit.node)
            yield hit
        # One finding per write: a write into an alias of both a name and the object's state
        # is told once, with the name that is read again.
        yield from (hit for hit in self.into_object_state(flow) if not any(hit.node is node for node in said))

    def into_object_state(self, flow: FunctionFlow) -> Iterator[Hit]:
        """`t = torch.from_numpy(self.cache[i]); t -= m`: the object's stored array changes for every later caller."""
        for write in flow.of(Write):
            writer = name_of(write.target_node)
            state = sorted(r for r in write.target.roots if roots.is_self_state(r))
            if write.target.via not in self.VIAS or not state or writer.startswith("self.") or deliberate_write(write) or write.no_grad_here:
                continue
            bind = last_bind(flow, writer, write.index)
            message = (
                f"`{write_text(write)}` writes in place into `{writer}`, which shares its buffer with `{state[0]}` (the NumPy "
                f"conversion does not copy), so the object's stored data changes and every later use of `{state[0]}` sees it. "
                "Copy at the conversion (`.clone()`, or `torch.tensor(array)`)."
            )
            yield Hit(write.node, message, copy_at_binding(bind), anchors=(bind.node,) if bind is not None else ())

    def message(self, pair: AliasPair) -> str:
        return (
            f"`{write_text(pair.write)}` writes in place into {self.bind_text(pair)}, which shares its buffer with `{pair.holder}` "
            f"(the NumPy conversion does not copy), so `{pair.holder}` changes too and is read again at {read_lines(pair.reads)}. "
            "Copy at the conversion (`.clone()` for a tensor, `.copy()` for an array, or `torch.tensor(array)`)."
        )
