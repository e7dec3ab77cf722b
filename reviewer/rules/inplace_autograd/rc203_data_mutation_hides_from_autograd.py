"""RC203 data-mutation-hides-from-autograd."""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.queries.autograd import reaches_a_backward, saved_before
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.intent import deliberate_write
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import code_of, short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid


class DataMutationHidesFromAutograd(Rule):
    """
    ## What it does
    Finds an in-place write through `.data` into a tensor that autograd saved for the
    backward pass.

    ## Why is this bad?
    `.data` has its own version counter, so autograd does not notice the write: backward
    runs without error and uses the modified values, and the gradients are silently
    wrong (torch 2.13: `h = x.exp(); h.data.clamp_(max=1)` gives `x.grad` of
    `[1.0, 0.37, 1.0]` where `[0.0, 0.37, 0.0]` is right).

    ## Example
    ```python
    h = x.exp()
    h.data.clamp_(max=1.0)
    h.sum().backward()
    ```

    ## Use instead
    ```python
    h = x.exp().clamp(max=1.0)       # the clamp is part of the graph
    h.sum().backward()
    ```
    or, if the values must change without autograd knowing, do it on a tensor nothing
    saved (`torch.no_grad()` on a copy).

    ## Fix safety
    No automatic fix: whether the change should be differentiated depends on intent.
    """

    code = "RC203"
    name = "data-mutation-hides-from-autograd"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = (".data",)
    recipes = ("silent-grad",)

    VALID = (
        Valid(
            """
            import torch
            from torch import nn
            class Aligner(nn.Module):
                def __init__(self, dim: int):
                    super().__init__()
                    self.query_proj, self.key_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
                def forward(self, queries, keys, mask):
                    logp = torch.cdist(self.query_proj(queries), self.key_proj(keys)).unsqueeze(1)
                    logp.data.masked_fill_(~mask.bool().unsqueeze(2), -float("inf"))
                    return logp.softmax(dim=3)
            """,
            "cdist's backward divides by its output: where it holds -inf the gradient is 0, as after an out-of-place fill (NaturalSpeech 2's aligner)",
        ),
        Valid(
            """
            import torch
            from torch import nn

            def gumbel_sample(t, temperature=1.0, dim=-1):
                if temperature == 0:
                    return t.argmax(dim=dim)
                return (t / temperature + torch.rand_like(t)).argmax(dim=dim)

            class Codebook(nn.Module):
                def __init__(self, dim, size):
                    super().__init__()
                    self.embed = nn.Parameter(torch.randn(size, dim))

                def forward(self, x):
                    embed = self.embed.t()
                    dist = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ embed + embed.pow(2).sum(0, keepdim=True))
                    ind = gumbel_sample(dist)
                    quantize = nn.functional.embedding(ind, self.embed)
                    if self.training:
                        self.embed.data.copy_(self.embed.data * 0.99 + 0.01 * quantize.detach().mean(0))
                    return quantize, ind
            """,
            "the distance that saved the codebook feeds only the repository's `gumbel_sample`, an argmax: no backward runs through it",
        ),
        Valid(
            """
            import torch
            from torch import nn
            from torch.distributions import Categorical

            def softmax_sample(t, temperature, dim=-1):
                if temperature is None:
                    return t.argmax(dim=dim)
                m = Categorical(logits=t / temperature)
                return m.sample()

            class Codebook(nn.Module):
                def __init__(self, dim, size):
                    super().__init__()
                    self.embed = nn.Parameter(torch.randn(size, dim))

                def forward(self, x, temp=None):
                    embed = self.embed.t()
                    dist = -(x.pow(2).sum(1, keepdim=True) - 2 * x @ embed + embed.pow(2).sum(0, keepdim=True))
                    ind = softmax_sample(dist, temp)
                    quantize = nn.functional.embedding(ind, self.embed)
                    if self.training:
                        self.embed.data.copy_(self.embed.data * 0.99 + 0.01 * quantize.detach().mean(0))
                    return quantize, ind
            """,
            "a distribution's `sample()` runs under no_grad: the distance feeds only indices (TimeVQVAE's codebook)",
        ),
        Valid(
            """
            import torch
            from torch import nn
            def materialize(module: nn.Module, source: nn.Module):
                def meta_to_empty(p):
                    return p.new_empty(p.shape, device="cpu") if p.device == torch.device("meta") else p
                module._apply(meta_to_empty)
                name2p = dict(source.named_parameters())
                for n, p in module.named_parameters():
                    p.data.copy_(name2p[n])
            """,
            "`module._apply(fn)` converts the module's tensors; it is not a forward pass and saves nothing for backward",
        ),
        Valid(
            """
            import torch
            from torch import nn
            def f(model: nn.Module):
                for p in model.parameters():
                    p.data.mul_(0.5)
            """,
            "nothing was saved: a (dated but harmless) weight update",
        ),
        Valid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F
            class Quantize(nn.Module):
                def __init__(self, dim: int, n_embed: int):
                    super().__init__()
                    self.dim = dim
                    self.register_buffer("embed", torch.randn(dim, n_embed))
                    self.register_buffer("embed_avg", torch.randn(dim, n_embed))
                def forward(self, input):
                    flatten = input.reshape(-1, self.dim)
                    dist = flatten.pow(2).sum(1, keepdim=True) - 2 * flatten @ self.embed + self.embed.pow(2).sum(0, keepdim=True)
                    _, embed_ind = (-dist).max(1)
                    quantize = F.embedding(embed_ind, self.embed.transpose(0, 1))
                    if self.training:
                        self.embed.data.copy_(self.embed_avg * 0.5)
                    return input + (quantize - input).detach(), embed_ind
            """,
            "the distances that saved the codebook only pick indices (`_, ind = ....max(1)`): no backward ever runs through them",
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def f():
                x = torch.randn(3, requires_grad=True)
                h = x.exp()
                h.data.clamp_(max=1.0)
                h.sum().backward()
                return x.grad
            """,
            line=5,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for write in flow.of(Write):
            if write.target.via != "data" or deliberate_write(write):
                continue
            saved = saved_before(flow, write)
            if saved is None or not reaches_a_backward(flow, saved):
                continue  # (a graph dropped unused is never backpropagated)
            if saved.op.strip("`.()") in api.DIVIDES_BY_OUTPUT and _infinite_fill(write):
                continue  # `d.data.masked_fill_(m, -inf)` of cdist's output: backward divides by it, 0 where masked, as an out-of-place fill
            message = (
                f"`{short_code(write.stmt or write.node)}` changes through `.data` a tensor autograd saved at line {saved.line} for the "
                f"gradient of {saved.op}. `.data` bypasses the version check, so backward runs on the modified values and the "
                "gradients are silently wrong. Make the change part of the graph (an out-of-place op), or apply it where nothing saved the tensor."
            )
            if called_grad_off_in_repository(flow):
                return  # every caller runs it with autograd off: nothing was saved for a backward
            yield Hit(write.node, message)


_INFINITY = re.compile(r"^-?(float\(\s*['\"]-?inf['\"]\s*\)|(math|np|numpy|torch)\.inf)$")


def _infinite_fill(write: Write) -> bool:
    """`x.data.masked_fill_(mask, -float("inf"))`, `x.data.fill_(math.inf)`: every value
    written is infinite."""
    call = write.node
    if write.op not in (".masked_fill_()", ".fill_()") or not isinstance(call, cst.Call) or not call.args:
        return False
    value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "value"), call.args[-1].value)
    return bool(_INFINITY.match("".join(code_of(value).split())))

