"""RC302 legacy-constructor-alias."""

from __future__ import annotations

from collections.abc import Iterator
from collections.abc import Set as AbstractSet

import libcst as cst

from review_copies.analysis.events import Bind, Call, FunctionFlow, Return, Write
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.rewrite import chain
from review_copies.analysis.roots import allocated_here, overlaps
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid

# The dtype each typed legacy constructor accepts without raising (measured, torch 2.13).
# `torch.Tensor(t)` accepts every dtype and keeps it: an int64 or float64 `t` comes back as
# itself, not converted to float32.
_DTYPES = {
    "FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16", "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8", "CharTensor": "int8", "ShortTensor": "int16", "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool",
}


class LegacyConstructorAlias(Rule):
    """
    ## What it does
    Finds the legacy constructors `torch.Tensor(t)`, `torch.FloatTensor(t)`,
    `torch.LongTensor(t)`... applied to something that already is a tensor.

    ## Why is this bad?
    They read like a copy but are not one: for a tensor argument of the right type they
    return an alias of `t` (torch 2.13: `AliasBackward0`) that shares its memory, its
    version counter and its graph, so an in-place write through either name changes
    both; a typed constructor given any other dtype raises a `TypeError`, and
    `torch.Tensor(t)` keeps whatever dtype `t` has (it converts nothing to float32). Code that meant a snapshot keeps
    a reference. A temporary no other name holds (`torch.Tensor(torch.zeros(n))`) shares
    nothing and is not reported.

    ## Example
    ```python
    def keep(x: torch.Tensor):
        saved = torch.Tensor(x)
        x.add_(1)          # saved changes too
        return saved
    ```

    ## Use instead
    ```python
    def keep(x: torch.Tensor):
        saved = x.detach().clone()
        x.add_(1)
        return saved
    ```
    or use `x` itself when sharing is intended.

    ## Fix safety
    The fix turns an alias into a copy: values are equal when it runs, later writes no
    longer show through, and the copy is no longer attached to the graph. That is what
    the code reads as, but the sandbox confirms it before the fix is offered.
    """

    code = "RC302"
    name = "legacy-constructor-alias"
    category = Category.COPY_CONSTRUCT
    severity = Severity.WARNING
    prefilter = ("Tensor",)
    recipes = ("alias", "raises")

    VALID = (
        Valid(
            """
            import torch
            def apply_logic(tags: torch.LongTensor) -> torch.Tensor:
                new_tags: torch.Tensor = torch.Tensor(tags).clone()
                for i in range(1, len(new_tags)):
                    if int(new_tags[i]) > 5:
                        new_tags[i] = int(tags[i - 1])
                return new_tags
            """,
            "the alias goes straight into `.clone()`: no name ever holds it, so no write reaches `tags` (an NER tagger's tag repair)",
        ),
        Valid(
            """
            import torch
            def encode(entities_position):
                entities_position = torch.LongTensor(entities_position)
                ent_mask = torch.LongTensor((entities_position != 0) * 1)
                return {"ent_mask": ent_mask}
            """,
            "a comparison times an integer is a new int64 tensor: `torch.LongTensor` aliases a temporary nobody else holds",
        ),
        Valid(
            """
            import torch
            def get_box_center(bbox_xywh: torch.Tensor) -> torch.Tensor:
                return torch.FloatTensor(bbox_xywh[:2]) + torch.FloatTensor(bbox_xywh[2:]) / 2.0
            """,
            "a typed constructor's alias that is only read: a float32 box changes nothing, any other dtype raises at once",
        ),
        Valid(
            """
            import torch
            def f():
                return torch.Tensor(2, 3)
            """,
            "sizes, not a tensor",
        ),
        Valid(
            """
            import torch
            def f(values: list[float]):
                return torch.FloatTensor(values)
            """
        ),
        Valid(
            """
            from typing import TYPE_CHECKING
            import torch
            def f(x: torch.Tensor):
                uvs = 1.0 - x[:, [1, 0]]
                if TYPE_CHECKING:
                    uvs = torch.Tensor(uvs)
                return uvs
            """,
            "a cast for the type checker: the branch never runs",
        ),
        Valid(
            """
            import torch
            def reference_filter():
                filt = torch.FloatTensor([1, 2, 1])
                filt = torch.outer(filt, filt)
                filt = torch.Tensor(filt)
                return filt.view(1, 1, *filt.shape)
            """,
            "a float32 tensor that nothing writes afterwards: the alias and a copy cannot be told apart",
        ),
        Valid(
            """
            import torch
            def pad(x: torch.Tensor, gap: int) -> torch.Tensor:
                b, n, _ = x.shape
                zeros = torch.Tensor(torch.zeros(b, n, gap)).type(x.dtype).to(x.device)
                return torch.cat([x, zeros], dim=2)
            """,
            "the alias is of a temporary no other name holds: nothing is shared",
        ),
        Valid(
            """
            import torch
            def padding_mask(max_len: int, batch: int) -> torch.Tensor:
                lengths = torch.randint(1, max_len, [batch], dtype=torch.int32)
                rows = [torch.Tensor([False] * lengths[i] + [True] * (max_len - lengths[i])) for i in range(batch)]
                return torch.stack(rows).bool()
            """,
            "`[False] * lengths[i]` repeats a list (an integer tensor is an index): the constructor builds from a list",
        ),
        Valid(
            """
            import torch
            def grow(net, context_length: int, steps: int):
                ts = torch.normal(0, 0.1, size=(1, context_length))
                for _ in range(steps):
                    window = torch.Tensor(ts[0][-context_length:]).view(1, context_length)
                    samples = net.get_distr(window).sample((100,))
                    prediction = sum(samples) / len(samples)
                    ts = torch.cat([ts, prediction], dim=1)
                return ts
            """,
            "only read, never written through either name, nor handed back: the alias changes nothing",
        ),
        Valid(
            """
            import torch
            def embed(model, vocab, src, position: int, batch_size: int):
                batch, out = [], []
                for i, word in enumerate(vocab):
                    batch.append(word)
                    if len(batch) == batch_size or i == len(vocab) - 1:
                        src_batch = torch.LongTensor([src] * len(batch))
                        src_batch[:, position] = torch.LongTensor(batch)
                        out.append(model(torch.LongTensor(src_batch)))
                        batch = []
                return out
            """,
            "the write in the loop goes into the tensor the next iteration makes afresh, never into this one's alias (UER-py)",
        ),
        Valid(
            """
            import torch
            def dice(pred: torch.Tensor, gt: torch.Tensor, classes_to_exclude: torch.Tensor):
                keep = torch.ones(pred.shape[1], dtype=torch.int32)
                keep[torch.Tensor(classes_to_exclude).int()] = 0
                return (pred[:, keep.bool()] * gt[:, keep.bool()]).sum()
            """,
            "converted to int32 at once and only read as an index: the dtype `torch.Tensor` kept is never seen, and nothing writes through the alias",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def keep(x: torch.Tensor):
                saved = torch.Tensor(x)
                x.add_(1)
                return saved
            """,
            line=3,
            fix="""
            import torch
            def keep(x: torch.Tensor):
                saved = x.detach().clone()
                x.add_(1)
                return saved
            """,
        ),
        Invalid(
            """
            import torch
            def history(steps: int):
                x = torch.zeros(3)
                seen = []
                for _ in range(steps):
                    seen.append(torch.FloatTensor(x))
                    x.add_(1)
                return seen
            """,
            line=6,
            fix="""
            import torch
            def history(steps: int):
                x = torch.zeros(3)
                seen = []
                for _ in range(steps):
                    seen.append(x.detach().clone())
                    x.add_(1)
                return seen
            """,
        ),
        Invalid(
            """
            import torch
            def apply_logic(tags: torch.LongTensor) -> torch.Tensor:
                new_tags: torch.Tensor = torch.Tensor(tags)
                for i in range(1, len(new_tags)):
                    if int(new_tags[i]) > 5:
                        new_tags[i] = int(tags[i - 1])
                return new_tags
            """,
            line=3,
            fix="""
            import torch
            def apply_logic(tags: torch.LongTensor) -> torch.Tensor:
                new_tags: torch.Tensor = tags.detach().clone()
                for i in range(1, len(new_tags)):
                    if int(new_tags[i]) > 5:
                        new_tags[i] = int(tags[i - 1])
                return new_tags
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if not event.is_any(api.LEGACY_CONSTRUCTORS) or len(event.call.args) != 1:
                continue
            arg = event.call.args[0]
            if arg.keyword is not None or arg.star or not event.args or not event.args[0].is_tensor:
                continue
            ctor = next(q for q in event.qualnames if q in api.LEGACY_CONSTRUCTORS).replace("torch.", "", 1)
            plain = ctor.rpartition(".")[2] == "Tensor"
            dtype = "float32" if plain else _DTYPES.get(ctor.rpartition(".")[2])
            source = event.args[0]
            if source.fresh and source.dtype in (None, dtype):
                continue  # `torch.Tensor(torch.zeros(n))`: an alias of a temporary nobody else holds shares nothing
            if source.dtype in (None, dtype) and _called_at_once(flow, event, {"clone"}):
                continue  # `torch.Tensor(tags).clone()`: copied before any name holds the alias
            written = _written_after(flow, event, source.roots)
            if source.dtype == dtype and not written:
                continue  # the same dtype and no write through either name: the alias changes nothing
            if source.dtype is None and not written and not _handed_back(flow, event) and (not plain or allocated_here(source.roots) or _called_at_once(flow, event, api.DTYPE_METHODS)):
                # An unknown dtype, no write, and the alias only read here: a typed constructor
                # given another dtype raises at once (`torch.FloatTensor(b[:2]) + ...`). Plain
                # `torch.Tensor(t)` keeps t's dtype, which matters for what came from outside
                # (an argument the caller may pass as float64), not for a tensor this function
                # computed itself, nor for one converted at once (`torch.Tensor(ids).int()`).
                continue
            what = code_of(arg.value)
            copied = chain(arg.value, "detach", "clone")
            dtype_note = (
                f"and it keeps `{what}`'s dtype (`torch.Tensor` converts a tensor to nothing, float32 included)"
                if plain else "and a different dtype raises TypeError"
            )
            message = (
                f"`torch.{ctor}({what})` does not copy: it returns an alias of `{what}` that shares "
                f"its memory, version counter and graph, so in-place writes through either name "
                f"change both, {dtype_note}. Use `{code_of(copied)}` "
                f"for a copy, or `{what}` itself if sharing is meant."
            )
            yield Hit(event.node, message, (event.node, copied))


def _written_after(flow: FunctionFlow, event: Call, roots: frozenset) -> bool:
    """An in-place write that may run after the constructor into the memory it aliases. One
    that comes before it in the loop body writes the next iteration's tensor when the loop
    makes that tensor afresh first (`src = torch.LongTensor(rows)`, `src[:, i] = ids`, then
    `model(torch.LongTensor(src))`): this iteration's alias never sees it."""
    return any(
        isinstance(e, Write) and overlaps(e.target.roots, roots) and not (e.index < event.index and _made_afresh_before(flow, e, event))
        for e in flow.after(event)
    )


def _made_afresh_before(flow: FunctionFlow, write: Write, event: Call) -> bool:
    name = name_of(write.target_node)
    shared = set(write.loops) & set(event.loops)
    return bool(name) and any(
        isinstance(b, Bind) and b.name == name and b.index < write.index and set(b.loops) & shared and allocated_here(b.value.roots)
        for b in flow.events
    )


def _called_at_once(flow: FunctionFlow, event: Call, methods: AbstractSet[str]) -> bool:
    """The constructor's result goes straight into one of `methods`: a dtype conversion
    (`torch.Tensor(classes).int()`, so the dtype `torch.Tensor` kept is never seen) or a copy
    (`torch.Tensor(tags).clone()`, so no write through a name can reach the source)."""
    return any(e.receiver_node is event.call and e.method in methods for e in flow.of(Call))


def _handed_back(flow: FunctionFlow, event: Call) -> bool:
    """The alias leaves the function as it is (`return torch.Tensor(t)`, or a name bound to
    it and returned), where the caller may take it for a copy and write into it."""
    bound = {b.name for b in flow.of(Bind) if b.expr is event.call}
    for ret in flow.of(Return):
        value = ret.value_node
        if value is event.call or (isinstance(value, cst.Name) and value.value in bound):
            return True
    return False
