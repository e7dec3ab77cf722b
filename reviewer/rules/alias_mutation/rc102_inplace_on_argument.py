"""RC102 inplace-on-argument."""

from __future__ import annotations

import re
from collections.abc import Iterator

from review_copies.analysis import roots
from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.parse import is_test_path
from review_copies.analysis.queries.aliasing import last_bind, name_of
from review_copies.analysis.queries.callers import caller_keeps_argument, callers_expect_the_write, callers_pass_sequences, callers_rebind, fresh_at_every_call_site, handed_over, returns_argument
from review_copies.analysis.queries.intent import (
    declares_mutation,
    deliberate_write,
    indexed_by_its_own_copy,
    is_mutating_function,
    loaded_back,
    optimizer_method,
    registered_op,
    restored,
    returns_a_number,
    returns_its_original,
    returns_something,
)
from review_copies.analysis.rewrite import out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of, short_code
from review_copies.analysis.values import Device, Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import copy_at_binding
from review_copies.rules.alias_mutation.helpers import (
    callers_fill_it_too,
    callers_in_repository_drop,
    callers_rely_on_the_write,
    converted_from_another_dtype,
    fills_the_argument,
    into_module,
    meant_for_the_caller,
    read_after_through_alias,
)
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_VALID = (
    Valid(
        """
        import torch
        def step(model, tokens):
            return model(tokens)[0]
        def process_text(text: str, model, tokens: torch.Tensor):
            for c in text:
                tokens.data.fill_(ord(c))
                out = step(model, tokens)
            tokens.data.fill_(torch.argmax(out))
            return list(text)
        """,
        "a token buffer refilled whole at each step: its old values are thrown away, not edited (sentiment-discovery's `process_text`)",
    ),
    Valid(
        """
        import torch
        def beam_search(step_logprobs, table, lam: float, beams: int):
            def add_diversity(table, logprobs, t, lam, beams):
                unaug = logprobs.clone()
                for prev in range(t):
                    chosen = table[prev]
                    for b in range(beams):
                        logprobs[b][chosen[b]] = logprobs[b][chosen[b]] - lam
                return unaug
            for t, logprobs in enumerate(step_logprobs):
                unaug = add_diversity(table, logprobs, t, lam, beams)
                print(logprobs.topk(beams), unaug.sum())
        """,
        "the helper copies the argument before writing and returns the copy: lowering the caller's scores in place is its other output (self-critical.pytorch's `add_diversity`)",
    ),
    Valid(
        """
        import torch
        def rand_init_delta(delta, x, eps: float, clip_min: float, clip_max: float):
            delta.data.uniform_(-1, 1)
            delta.data = eps * delta.data
            delta.data = torch.clamp(x + delta.data, min=clip_min, max=clip_max) - x
            return delta.data
        """,
        "the function sets `delta.data`: changing the caller's tensor is its job (advertorch's random start of an attack)",
    ),
    Valid(
        """
        import torch
        def make_pixels(generator: torch.Generator) -> torch.Tensor:
            return torch.randint(0, 256, (1, 3, 22, 32, 32), generator=generator, dtype=torch.uint8)
        def normalize_pixels(pixels: torch.Tensor, device: torch.device) -> torch.Tensor:
            video = pixels.to(device=device, dtype=torch.float32).div_(255.0)
            mean = torch.tensor((0.485, 0.456, 0.406), device=device).view(1, -1, 1, 1)
            return (video - mean) / 2
        def compare(model, pixels: torch.Tensor, device: torch.device):
            expected = model(normalize_pixels(pixels, device))
            actual = model.encode(pixels)
            return expected, actual
        """,
        "scaled by 1/255 in a file that makes uint8 pixels: the float conversion copies them (FastVideo's parity test); fed float images, the same code is the bug",
    ),
    Valid(
        """
        import torch
        def rope_table(positions, freqs):
            angles = positions.to(torch.float64)
            angles.mul_(freqs)
            return torch.polar(torch.ones_like(angles), angles)
        """,
        "a conversion to float64 (rotary tables are built in it): positions reach it in another dtype, so `.to` copies and the write stays local",
    ),
    Valid(
        """
        import torch
        def rope_precompute(x, grid_sizes, freqs):
            b, s, n = x.size(0), x.size(1), x.size(2)
            output = torch.view_as_complex(x.detach().reshape(b, s, n, -1, 2).to(torch.float64))
            for i in range(b):
                output[i, :s] = freqs[:s]
            return output
        """,
        "`torch.view_as_complex` of what `.to` gave shares `x` only if `.to` returned it (DiffSynth-Studio): nothing says it did",
    ),
    Valid(
        """
        import torch
        def adam_step(p: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, lr: float):
            exp_avg.mul_(0.9).add_(grad, alpha=0.1)
            p.add_(exp_avg, alpha=-lr)
            return exp_avg
        def step(params, grads, states, lr: float):
            for p, g, s in zip(params, grads, states):
                adam_step(p, g, s, lr)
        """,
        "every caller throws the result away: the function is called for what it writes",
    ),
    Valid(
        """
        import torch
        class Adam(torch.optim.Optimizer):
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        update = adam_update(p.grad, self.state[p].get("exp_avg", p))
                        p.add_(update, alpha=-group["lr"])
        def adam_update(grad: torch.Tensor, avg: torch.Tensor) -> torch.Tensor:
            stored = avg
            avg = avg.float().lerp(grad, 0.1)
            stored.copy_(avg)
            return avg
        """,
        "`avg` read after the write is the new tensor it was bound to, not the argument; the step hands in its moment to update (AQLM)",
    ),
    Valid(
        """
        import torch
        def cutmix(x: torch.Tensor, lam: float) -> float:
            if lam == 1.0:
                return 1.0
            x[:, :, :8, :8] = x.flip(0)[:, :, :8, :8]
            return lam
        """,
        "the result is a number about the batch it mixed in place",
    ),
    Valid(
        """
        import torch
        def refine(z_low: torch.Tensor, z_mid: torch.Tensor) -> torch.Tensor:
            z_low[z_mid > 0] = z_mid[z_mid > 0]
            return z_low.mean()
        def search(z: torch.Tensor, idx: torch.Tensor):
            z_low = z[idx]
            z_mid = z_low * 0.5
            best = refine(z_low, z_mid)
            return best
        """,
        "the caller passes a temporary of its own and never reads it again",
    ),
    Valid(
        """
        import torch
        def normalize_(x: torch.Tensor) -> torch.Tensor:
            x -= x.mean()
            return x
        """,
        "the trailing underscore says it mutates",
    ),
    Valid(
        """
        import torch
        def scatter(src: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
            out.copy_(src)
            return out
        """,
        "an out= parameter",
    ),
    Valid(
        """
        import torch
        def load_into(companion: torch.Tensor, saved: dict) -> bool:
            companion.copy_(saved["weight"])
            return True
        """,
        "copy_ into the argument itself: the caller hands over a destination to fill",
    ),
    Valid(
        """
        import torch
        def refine(coords: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
            coords -= heat.mean()
            return coords
        def predict(heat: torch.Tensor):
            coords = heat.argmax(-1).float()
            preds = refine(coords, heat)
            return preds * 2
        """,
        "mutate-and-return, and the caller never reads what it passed again",
    ),
    Valid(
        """
        import torch
        from torch import nn
        def export(model: nn.Module):
            w = model.weight.data
            w.mul_(127).round_()
            return w.to(torch.int8)
        def save(model: nn.Module, path: str):
            q = export(model)
            torch.save(q, path)
        """,
        "the model is not used after the export that consumed its weights",
    ),
    Valid(
        """
        import torch
        def apply_boxes(boxes, transform: torch.Tensor):
            before = boxes.clone()
            out = boxes.transform_boxes_(transform)
            return out, before
        """,
        "`transform_boxes_` is no torch.Tensor method: a trailing underscore is only a naming habit",
    ),
    Valid(
        """
        import torch
        class Bleu:
            def _count(self, references, candidates, numerators: torch.Tensor) -> tuple[int, int]:
                for refs, cand in zip(references, candidates):
                    for i in range(1, 5):
                        numerators[i] += overlap(refs, cand, i)
                return len(candidates), len(references)
        """,
        "the method never reads `numerators`, it only adds into it: an output the caller handed over to be filled",
    ),
    Valid(
        """
        import torch
        from mmengine.model import BaseModule
        class CrossCorrelationLoss(BaseModule):
            def forward(self, c: torch.Tensor) -> torch.Tensor:
                return torch.diagonal(c).add_(-1).pow_(2).sum()
        """,
        "a module's forward (its base comes from another package): its input is RC204's to judge",
    ),
    Valid(
        """
        import torch
        def cost_and_grad(log_probs: torch.Tensor, grads: torch.Tensor | None, labels: torch.Tensor) -> torch.Tensor:
            if grads is not None:
                grads *= 0.0
                grads[:, labels] -= log_probs.softmax(-1)[:, labels]
            return -log_probs.gather(1, labels[:, None]).sum()
        """,
        "the first thing done with `grads` is to clear it: a buffer the caller hands over to be filled",
    ),
    Valid(
        """
        import torch
        def compressed_allreduce(buffer: torch.Tensor, worker_error: torch.Tensor) -> torch.Tensor:
            buffer = buffer + worker_error
            worker_error.set_(buffer - buffer.sign())
            return buffer.sign()
        """,
        "`set_` swaps the storage of the caller's tensor object: the error-feedback state is updated on purpose",
    ),
    Valid(
        """
        import torch
        from torch.utils._pytree import tree_map
        def scale(updates, mu, nu, eps: float, inplace: bool = True):
            if inplace:
                def f(m: torch.Tensor, v: torch.Tensor, g: torch.Tensor | None) -> torch.Tensor | None:
                    return m.div_(v.add_(eps).sqrt_()) if g is not None else g
            else:
                def f(m: torch.Tensor, v: torch.Tensor, g: torch.Tensor | None) -> torch.Tensor | None:
                    return m.div(v.add(eps).sqrt_()) if g is not None else g
            return tree_map(f, mu, nu, updates)
        """,
        "a closure defined in the arm an `inplace` flag chose: writing is the mode the caller asked for",
    ),
    Valid(
        """
        import torch
        from torch_geometric.nn import MessagePassing
        class GATConv(MessagePassing):
            def __init__(self, emb_dim: int, heads: int = 2):
                super().__init__(aggr="add")
                self.emb_dim, self.heads = emb_dim, heads
                self.att = torch.nn.Parameter(torch.randn(1, heads, 2 * emb_dim))

            def message(self, edge_index, x_i, x_j, edge_attr):
                x_i = x_i.view(-1, self.heads, self.emb_dim)
                x_j = x_j.view(-1, self.heads, self.emb_dim)
                x_j += edge_attr.view(-1, self.heads, self.emb_dim)
                alpha = (torch.cat([x_i, x_j], dim=-1) * self.att).sum(dim=-1)
                return x_j * alpha.view(-1, self.heads, 1)
        """,
        "`propagate` gathers `x_j` afresh for every call of `message` (`x.index_select(0, ...)`): the layer's own tensor (GraphMVP)",
    ),
    Valid(
        """
        import torch
        def improve_coverage(pattern: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
            flat = pattern.view(-1)
            flat[torch.topk(reference.flatten(), 4).indices] = True
            return pattern.view_as(pattern)
        """,
        "it hands back the argument it wrote, reshaped: mutate-and-return, as `return pattern` is (dilated-attention-pytorch)",
    ),
)


class InplaceOnArgument(Rule):
    """
    ## What it does
    Finds an in-place write into a tensor argument (or a view, `detach()` or `.data` of
    it) in a function that returns a result, so the caller's tensor is changed as a side
    effect.

    ## Why is this bad?
    The caller still owns the tensor it passed and usually reads it again: a normalised
    batch, a model's input reused for a residual, a target used for a metric. Writing into
    it changes the caller's data behind its back, and if autograd saved that tensor the
    caller's `backward()` fails. Not reported: functions meant to mutate (a trailing `_`,
    `init_*`/`reset_*`/`update_*`, `out=`-style parameters, `torch.no_grad()`) or that
    return the argument or only a number about it; writes through a dtype conversion that
    copies for the data the code is written for (`.float()` of pixels then scaled by 1/255
    where the file makes uint8 data, `.to(torch.float64)`); outputs to fill (only written, or
    cleared first: `grads *= 0.0`); arguments every caller, in the file or (by the index)
    anywhere outside the tests, passes fresh or never reads again, or that some caller
    calls the function for (its result thrown away, the argument read again). `forward`'s
    input is RC204's.

    ## Example
    ```python
    def normalize(x: torch.Tensor) -> torch.Tensor:
        x -= x.mean()
        return x / x.std()
    ```

    ## Use instead
    ```python
    def normalize(x: torch.Tensor) -> torch.Tensor:
        x = x - x.mean()
        return x / x.std()
    ```

    ## Fix safety
    The fix rebinds the local name to a new tensor (or copies where the alias is made),
    so the function returns the same values and the caller's tensor is left alone.
    """

    code = "RC102"
    name = "inplace-on-argument"
    category = Category.ALIAS_MUTATION
    severity = Severity.WARNING
    prefilter = ("def ",)
    recipes = ("input-mutation",)

    VALID = _VALID

    INVALID = (
        Invalid(
            """
            import numpy as np
            import torch
            class BasePredictor:
                def preprocess(self, im):
                    if not isinstance(im, torch.Tensor):
                        im = torch.from_numpy(np.ascontiguousarray(np.stack(im)))
                    img = im.to(self.device)
                    img = img.half() if self.model.fp16 else img.float()  # uint8 to fp16/32
                    img /= 255  # 0 - 255 to 0.0 - 1.0
                    return img

                def stream_inference(self, batch):
                    path, im0s = batch
                    im = self.preprocess(im0s)
                    return self.postprocess(self.model(im), im, im0s)
            """,
            line=9,
            fix="""
            import numpy as np
            import torch
            class BasePredictor:
                def preprocess(self, im):
                    if not isinstance(im, torch.Tensor):
                        im = torch.from_numpy(np.ascontiguousarray(np.stack(im)))
                    img = im.to(self.device)
                    img = (img.half() if self.model.fp16 else img.float()).clone()  # uint8 to fp16/32
                    img /= 255  # 0 - 255 to 0.0 - 1.0
                    return img

                def stream_inference(self, batch):
                    path, im0s = batch
                    im = self.preprocess(im0s)
                    return self.postprocess(self.model(im), im, im0s)
            """,
            note="only a comment says uint8: a float tensor on the device comes back from `.to` and `.float()` as itself, and the caller's batch is divided (ultralytics in FastSAM)",
        ),
        Invalid(
            """
            import torch
            from transformers import PreTrainedModel
            class QA(PreTrainedModel):
                def forward(self, input_ids: torch.Tensor, start: torch.Tensor):
                    start.clamp_(0, 512)
                    return self.loss(self.encoder(input_ids), start)
            """,
            line=5,
            fix="""
            import torch
            from transformers import PreTrainedModel
            class QA(PreTrainedModel):
                def forward(self, input_ids: torch.Tensor, start: torch.Tensor):
                    start = start.clamp(0, 512)
                    return self.loss(self.encoder(input_ids), start)
            """,
            note="labels a caller passes to forward are changed behind its back, whatever the base class",
        ),
        Invalid(
            """
            import torch
            def normalize(x: torch.Tensor) -> torch.Tensor:
                x -= x.mean()
                return x / x.std()
            """,
            line=3,
            fix="""
            import torch
            def normalize(x: torch.Tensor) -> torch.Tensor:
                x = x - x.mean()
                return x / x.std()
            """,
        ),
        Invalid(
            """
            import torch
            def centered(x: torch.Tensor) -> torch.Tensor:
                flat = x.view(-1)
                flat -= flat.mean()
                return flat
            """,
            line=4,
            fix="""
            import torch
            def centered(x: torch.Tensor) -> torch.Tensor:
                flat = x.view(-1).clone()
                flat -= flat.mean()
                return flat
            """,
        ),
        Invalid(
            """
            import torch
            def refine(coords: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
                coords -= heat.mean()
                return coords
            def predict(heat: torch.Tensor):
                coords = heat.argmax(-1).float()
                preds = refine(coords, heat)
                return preds - coords
            """,
            line=3,
            fix="""
            import torch
            def refine(coords: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
                coords = coords - heat.mean()
                return coords
            def predict(heat: torch.Tensor):
                coords = heat.argmax(-1).float()
                preds = refine(coords, heat)
                return preds - coords
            """,
            note="the caller reads `coords` again after `refine` changed it",
        ),
        Invalid(
            """
            import torch
            from torch import nn
            def export(model: nn.Module):
                w = model.weight.data
                w.mul_(127).round_()
                return w.to(torch.int8)
            def check(model: nn.Module, x: torch.Tensor):
                q = export(model)
                return q, model(x)
            """,
            line=5,
            fix="""
            import torch
            from torch import nn
            def export(model: nn.Module):
                w = model.weight.data.clone()
                w.mul_(127).round_()
                return w.to(torch.int8)
            def check(model: nn.Module, x: torch.Tensor):
                q = export(model)
                return q, model(x)
            """,
            note="`.data` is the live weight: `check` runs the model after `export` scaled it",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        return _writes_into_arguments(flow)


def _writes_into_arguments(flow: FunctionFlow) -> Iterator[Hit]:
    """Each argument the function writes into while the caller still owns it, once."""
    if is_test_path(flow.file.path) and handed_over(flow):
        return  # a test's closure handed to its harness (`self.runAtenTest((r, x), fn)`): the write is what the test checks
    if is_mutating_function(flow) or optimizer_method(flow) or flow.is_forward or not returns_something(flow) or returns_a_number(flow) or registered_op(flow) or declares_mutation(flow):
        return
    reported: set[str] = set()
    for write in flow.of(Write):
        if deliberate_write(write) or indexed_by_its_own_copy(write) or write.no_grad_here or write.opted_in or write.target.kind not in (Kind.TENSOR, Kind.NDARRAY):
            continue
        if not write.target.certain and write.target.via not in ("to", "reshape", "as_tensor"):
            continue  # indexing that may copy (x[idx] with a tensor index)
        owned = sorted(p for p in flow.params if any(roots.is_argument(r, p) for r in write.target.roots) and meant_for_the_caller(flow, p))
        if not owned:
            yield from into_module(flow, write, reported)
            continue
        if owned[0] in reported:
            continue
        if not write.target.certain and converted_from_another_dtype(flow, write):
            continue
        if returns_argument(flow, owned[0]) and not caller_keeps_argument(flow, owned[0]):
            continue  # mutate-and-return: callers rebind what they get back
        arg = owned[0]
        writer = name_of(write.target_node)
        # Read again by the function itself after writing it under another name: the hazard
        # is inside it (`noisy = clean; noisy.add_(n); mse(pred, clean)`), whatever callers do.
        inside = read_after_through_alias(flow, write, arg, writer)
        if returns_its_original(flow, arg, write):
            continue  # it copied the argument before writing and hands the copy back
        if restored(flow, write) or loaded_back(flow, write) or (not inside and (fresh_at_every_call_site(flow, arg) or callers_rebind(flow, arg) or callers_expect_the_write(flow, arg))):
            continue
        if write.target.via in ("index", "view") and callers_pass_sequences(flow, arg):
            continue
        if write.op.strip(".()") in api.SHAPE_ONLY_INPLACE and (writer != arg or last_bind(flow, arg, write.index) is not None):
            continue  # reshapes another object than the caller's: its tensor or array keeps its shape
        if not inside and (callers_in_repository_drop(flow, arg) or callers_rely_on_the_write(flow, arg) or callers_fill_it_too(flow, arg)):
            continue  # every call in the repository passes a name it never reads again, or one reads it for the write
        if flow.change is not None and arg in flow.change.base_writes:
            continue  # the base version wrote it in place already: that is the function's contract
        if fills_the_argument(write, writer, arg):
            continue  # `dst.copy_(src)`, `holder.data.copy_(src)`, `buf.data.fill_(token)`: filling the caller's tensor is the point
        reported.add(arg)
        bind = None if writer == arg else last_bind(flow, writer, write.index)
        if writer == arg:
            how = ""
        elif not writer:  # written through an expression (`torch.diagonal(x).add_(1)`), not a name
            how = f" (through `{short_code(write.target_node)}`, which shares its memory)"
        else:
            how = f" (`{writer}` shares its memory: {short_code(bind.expr) if bind and bind.expr else writer})"
        maybe = "" if write.target.certain else " when the conversion returns the same tensor (matching dtype, device and layout)"
        if not maybe and bind is not None and bind.expr is not None and _MOVED_TO_CPU.search(code_of(bind.expr)) and flow.params[arg].device is not Device.CPU:
            maybe = f" when `{arg}` is on the CPU already (`.cpu()` returns that same tensor; of a GPU tensor it makes a copy)"
        where = f"`{flow.scope.name}`" if flow.scope else "this function"
        noun = "array" if write.target.kind is Kind.NDARRAY else "tensor"
        message = (
            f"`{short_code(write.stmt or write.node)}` writes in place into the argument `{arg}`{how}{maybe}: the caller's {noun} "
            f"is changed behind its back while {where} also returns a result. Work on a copy or use the out-of-place op."
        )
        fix = out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor") if writer == arg else copy_at_binding(bind, write.target.kind is Kind.NDARRAY)
        yield Hit(write.node, message, fix, anchors=(bind.node,) if bind is not None else ())


# `pred[i].cpu().detach().numpy()`: a copy only of a tensor that is not on the CPU yet.
_MOVED_TO_CPU = re.compile(r"\.cpu\(\)")
