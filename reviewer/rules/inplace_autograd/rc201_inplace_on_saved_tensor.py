"""RC201 inplace-on-saved-tensor."""

from __future__ import annotations

from collections.abc import Iterator

from review_copies.analysis.events import FunctionFlow, Write
from review_copies.analysis.queries.autograd import reaches_a_backward, saved_before
from review_copies.analysis.queries.callers import called_grad_off_in_repository
from review_copies.analysis.queries.intent import deliberate_write, in_evaluation_arm
from review_copies.analysis.rewrite import out_of_place
from review_copies.analysis.semantics import api
from review_copies.analysis.syntax import short_code
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid

# The examples are the rule's tests, its docs and the LLM's few-shot block (as in every rule's
# file); kept at module level here only because this class would otherwise pass 300 lines.
_VALID = (
    Valid(
        """
        import torch
        def predict(model, loader):
            results = []
            for x in loader:
                outputs = model(x)
                probs = torch.sigmoid(outputs).cpu().detach().numpy()
                labels = (outputs > 0).long().cpu().numpy()
                for i in range(len(labels)):
                    probs[i, 0] = float(labels[i])
                results.append(probs)
            return results
        """,
        "the array shares memory with sigmoid's saved output, but nothing that requires grad is kept: no backward reaches that sigmoid",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class TD3Policy(nn.Module):
            def __init__(self, critic1: nn.Module, critic2: nn.Module, critic1_optim: torch.optim.Optimizer, critic2_optim: torch.optim.Optimizer) -> None:
                super().__init__()
                self.critic1 = critic1
                self.critic1_optim = critic1_optim
                self.critic2 = critic2
                self.critic2_optim = critic2_optim

            def learn(self, obss, actions, target_q):
                q1, q2 = self.critic1(obss, actions), self.critic2(obss, actions)
                critic1_loss = (q1 - target_q).pow(2).mean()
                critic2_loss = (q2 - target_q).pow(2).mean()
                self.critic1_optim.zero_grad()
                critic1_loss.backward()
                self.critic1_optim.step()
                self.critic2_optim.zero_grad()
                critic2_loss.backward()
                self.critic2_optim.step()
                return critic1_loss.item(), critic2_loss.item()
        """,
        "`critic1_optim` steps what `critic1_loss.backward()` reached, which shares nothing with `critic2`'s saved weights (OfflineRL-Kit)",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        from torch import nn
        class Mixer(nn.Module):
            def __init__(self, d: int):
                super().__init__()
                self.final_proj = nn.Linear(d, d)
                self.label_embs = nn.Parameter(torch.zeros(5, d))
                self.mask_emb = nn.Parameter(torch.zeros(d))

            def compute_pred(self, proj_x, label_embs):
                logits = torch.matmul(F.normalize(proj_x, dim=-1), F.normalize(label_embs, dim=-1).T)
                return logits / 0.1

            def mix(self, x, idx, use_pred: bool):
                soft = self.final_proj(x) if x.size(-1) == 4 else x
                tokens = self.compute_pred(self.final_proj(x), self.label_embs).argmax(dim=-1) if use_pred else None
                soft[idx] = self.mask_emb
                return tokens, soft
        """,
        "`x` is saved for a graph that ends in `argmax` (the method keeps nothing), and `soft` is `x` only in the arm that saved nothing (SpeechUT)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class Mixer(nn.Module):
            def __init__(self, d: int):
                super().__init__()
                self.final_proj = nn.Linear(d, d)
                self.final_proj_list = [self.final_proj]
                self.mask_emb = nn.Parameter(torch.zeros(d))

            def mix(self, x, idx):
                soft = self.final_proj_list[0](x) if x.size(-1) == 4 else x
                soft[idx] = self.mask_emb
                return soft
        """,
        "the write reaches `x` only in the arm that never called the layer that saves `x` (SpeechUT)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class AutoencoderKL(nn.Module):
            def __init__(self, encoder: nn.Module):
                super().__init__()
                self.encoder = encoder
                self.quant_conv = nn.Conv2d(8, 8, 1)

            def encode_ms(self, x):
                hs = self.encoder(x, True)
                h = hs[-1]
                moments = self.quant_conv(h)
                hs[-1] = h
                return hs, moments
        """,
        "`h = hs[-1]` put back as `hs[-1] = h`: a no-op on a tensor, so `hs` is the encoder's list of features (VGen)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class Tracer(nn.Module):
            def __init__(self, n: int, d: int):
                super().__init__()
                self.state = nn.Parameter(torch.zeros(n, d))
                self.forget = nn.Linear(d, d)
            def forward(self, items: torch.Tensor):
                state = self.state.unsqueeze(0).repeat(items.shape[0], 1, 1)
                rows = torch.arange(items.shape[0]).to(items.device)
                out = []
                for t in range(items.shape[1]):
                    last = state[rows, items[:, t]]
                    kept = last * torch.sigmoid(self.forget(last))
                    out.append(kept)
                    state[:, t] = kept
                return torch.stack(out, 1)
        """,
        "`state[rows, ...]` with `rows = torch.arange(...)` is advanced indexing: `last` is a copy, and the write into `state` leaves what `*` saved alone",
    ),
    Valid(
        """
        import torch
        from torch import nn
        def test_mask_matches():
            module = nn.Conv2d(3, 4, 3)
            dummy_input = torch.rand(4, 3, 32, 32)
            masked_output = module(dummy_input)
            dummy_input[:, 1] = 0
            assert torch.equal(masked_output, module(dummy_input))
        """,
        "the conv saved its input, but its output only feeds a comparison: no backward ever runs through it",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class CurricularFace(nn.Module):
            def __init__(self, in_features: int, out_features: int):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(in_features, out_features))
            def forward(self, input: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
                cos_theta = torch.mm(input, self.weight).clamp(-1, 1)
                target_logit = cos_theta[torch.arange(0, input.size(0)), label].view(-1, 1)
                sin_theta = torch.sqrt(1.0 - torch.pow(target_logit, 2))
                mask = cos_theta > target_logit * 0.8 - sin_theta * 0.6
                hard_example = cos_theta[mask]
                cos_theta[mask] = hard_example * (0.1 + hard_example)
                return cos_theta * 64.0
        """,
        "indexing with `torch.arange(...)` copies: `pow` saved the copy, and the write goes into `cos_theta`, which nothing saved",
    ),
    Valid(
        """
        import torch
        from . import AtomicDataDict
        class BesselEncoding(torch.nn.Module):
            def __init__(self, field: str):
                super().__init__()
                self.weights = torch.nn.Parameter(torch.linspace(1.0, 8.0, 8))
                self.field = field
            def forward(self, data: AtomicDataDict.Type) -> AtomicDataDict.Type:
                x = data[self.field]
                bessel = torch.sinc(x * self.weights) * self.weights
                data[AtomicDataDict.EDGE_EMBEDDING_KEY] = bessel
                return data
        """,
        "the input is annotated with a type that is not a tensor's (a dict alias): `data[key] = ...` sets an entry, it writes into no tensor",
    ),
    Valid(
        """
        import torch
        def f():
            a = torch.randn(3, requires_grad=True)
            y = a + 1
            y.mul_(2)
            y.sum().backward()
            return a.grad
        """,
        "add saves nothing: the in-place op is fine",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class Scale(nn.Module):
            def __init__(self, dim: int, channels_first: bool = False):
                super().__init__()
                self.channels_first = channels_first
                self.weight = nn.Parameter(torch.ones(dim))
            def forward(self, x):
                y = x + 1
                if self.channels_first:
                    if self.weight.dim() == 1:
                        return y * self.weight.view(-1, 1, 1)
                    else:
                        return y * self.weight
                return y.mul_(self.weight)
        """,
        "the multiplications that save `y` are in arms that all return: the in-place one never follows them",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class ConvAddReLU(nn.Module):
            def __init__(self, inplace_add: bool = False):
                super().__init__()
                self.conv = nn.Conv2d(3, 3, 3, padding=1)
                self.relu = nn.ReLU()
                self.inplace_add = inplace_add
            def forward(self, x):
                if self.inplace_add:
                    tmp = self.relu(x)
                    tmp += self.conv(x)
                    return tmp
                return self.relu(x) + self.conv(x)
        """,
        "the in-place add is a mode the module was built with (`inplace_add=True`), not a slip",
    ),
    Valid(
        """
        import torch
        def f():
            w = torch.randn(3, requires_grad=True)
            y = torch.sigmoid(w)
            y = y + 1
            y.sum().backward()
        """
    ),
    Valid(
        """
        import torch
        def f():
            w = torch.randn(3, requires_grad=True)
            y = torch.sigmoid(w)
            y.sum().backward()
            y += 1
            return y
        """,
        "after backward the saved tensor is no longer needed",
    ),
    Valid(
        """
        import torch
        def f(x: torch.Tensor):
            with torch.no_grad():
                y = torch.exp(x)
                y += 1
            return y
        """,
        "nothing is saved under no_grad",
    ),
    Valid(
        """
        import torch
        def beam_search(model: torch.nn.Module, encoder_out, ys_log_probs):
            log_probs = model.joiner(encoder_out).log_softmax(dim=-1)
            log_probs.add_(ys_log_probs)
            return log_probs.topk(4)
        def decode_one_batch(model, batch):
            return beam_search(model, batch["x"], batch["scores"])
        @torch.no_grad()
        def main(model, loader):
            for batch in loader:
                decode_one_batch(model, batch)
        """,
        "every call of the search runs under a caller's no_grad (followed up the calls): nothing is saved",
    ),
)
_INVALID = (
    Invalid(
        """
        import torch
        def two_losses(x: torch.Tensor):
            w = torch.randn(3, 2, requires_grad=True)
            h = torch.sigmoid(x @ w)
            h.sum().backward(retain_graph=True)
            h.mul_(2)
            (h * h).sum().backward()
        """,
        line=6,
        fix="""
        import torch
        def two_losses(x: torch.Tensor):
            w = torch.randn(3, 2, requires_grad=True)
            h = torch.sigmoid(x @ w)
            h.sum().backward(retain_graph=True)
            h = h.mul(2)
            (h * h).sum().backward()
        """,
        note="`retain_graph=True` keeps what the first backward saved, for the second",
    ),
    Invalid(
        """
        import torch
        def f():
            w = torch.randn(3, requires_grad=True)
            y = torch.sigmoid(w)
            y += 1
            y.sum().backward()
        """,
        line=5,
        fix="""
        import torch
        def f():
            w = torch.randn(3, requires_grad=True)
            y = torch.sigmoid(w)
            y = y + 1
            y.sum().backward()
        """,
    ),
    Invalid(
        """
        import torch
        from torch import nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
            def forward(self, x):
                h = self.body(x).exp()
                h.clamp_(max=10.0)
                return h
        """,
        line=9,
        fix="""
        import torch
        from torch import nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)
            def forward(self, x):
                h = self.body(x).exp()
                h = h.clamp(max=10.0)
                return h
        """,
    ),
    Invalid(
        """
        import torch
        def f():
            w = torch.randn(3, requires_grad=True)
            x = torch.ones(3)
            y = x * w
            x.add_(1)
            y.sum().backward()
        """,
        line=6,
        fix="""
        import torch
        def f():
            w = torch.randn(3, requires_grad=True)
            x = torch.ones(3)
            y = x * w
            x = x.add(1)
            y.sum().backward()
        """,
        note="x * w saves x to compute w's gradient",
    ),
)


class InplaceOnSavedTensor(Rule):
    """
    ## What it does
    Finds an in-place op (`+=`, `.mul_()`, `x[i] = v`, `inplace=True`) on a tensor that
    autograd saved for the backward pass: the output of `sigmoid`, `tanh`, `exp`,
    `relu`, `softmax`...; an input of `mul`, `matmul`, `pow`, `log`, a `Linear` or a
    norm layer. A write in the arm an `inplace` flag selects (`if self.inplace_add:`) is a
    mode the caller chose (for inference, or to save memory) and is not reported.

    ## Why is this bad?
    Backward needs the saved values. After the in-place write their version counter has
    moved, so `loss.backward()` raises "one of the variables needed for gradient
    computation has been modified by an inplace operation" — often far from the line
    that caused it, and only in training, not in inference.

    ## Example
    ```python
    def forward(self, x):
        h = torch.sigmoid(self.body(x))
        h += 0.1
        return self.head(h)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        h = torch.sigmoid(self.body(x))
        h = h + 0.1
        return self.head(h)
    ```

    ## Fix safety
    Safe: the out-of-place op computes the same values into a new tensor and leaves the
    saved one intact; gradients come out as autograd intends.
    """

    code = "RC201"
    name = "inplace-on-saved-tensor"
    category = Category.INPLACE_AUTOGRAD
    severity = Severity.ERROR
    prefilter = ("_(", "=", "inplace")
    recipes = ("backward",)

    VALID = _VALID
    INVALID = _INVALID

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        yield from _writes(flow)


def _writes(flow: FunctionFlow) -> Iterator[Hit]:
    for write in flow.of(Write):
        if (deliberate_write(write) and write.op != "optimizer.step()") or write.target.via == "data" or write.opted_in:
            continue  # (an `inplace` flag's arm: a mode the caller chose, for inference or memory)
        saved = saved_before(flow, write)
        if saved is None or not reaches_a_backward(flow, saved) or in_evaluation_arm(flow, write.node):
            continue  # (what was saved only feeds a comparison, an argmax, or runs in evaluation: no backward runs through it)
        if called_grad_off_in_repository(flow):
            return  # every caller runs it with autograd off (a decoder's search): nothing was saved for a backward
        what = short_code(write.stmt or write.node)
        if saved.unversioned:
            consequence = (
                "autograd saved it through `.data`, whose version counter is its own, so nothing raises: the backward "
                "pass silently computes the gradient with the new values, not the ones the forward pass used"
            )
        else:
            consequence = (
                "the backward pass will raise \"one of the variables needed for gradient computation has been modified by "
                "an inplace operation\""
            )
        message = (
            f"`{what}` modifies in place a tensor that autograd saved at line {saved.line} to compute the gradient of "
            f"{saved.op}; {consequence}. Use the out-of-place op."
        )
        anchors = (saved.node,) if saved.node is not None else ()
        yield Hit(write.node, message, out_of_place(write.stmt, lambda m: api.method_returns(m) == "tensor"), anchors=anchors)
