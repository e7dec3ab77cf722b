"""Autograd's gradient of a weighted sum of the outputs against central finite
differences, element by element (a few per input): what `silent-grad` needs to see
gradients that are wrong without any error. Imported only in probe processes."""

from __future__ import annotations

import gc

import torch

from review_copies.sandbox.protocol import GradCheck
from review_copies.sandbox.worker import inputs as synth
from review_copies.sandbox.worker.capture import capture
from review_copies.sandbox.worker.load import SubjectError, error_text, load, reset_torch_state, seed
from review_copies.sandbox.worker.runner import Runner, grad_targets, weighted_loss


def gradcheck(runner: Runner, variant: synth.Variant, max_elements: int = 12) -> GradCheck:
    try:
        loaded = load(runner.side)
    except SubjectError as exc:
        return GradCheck(tried=False, why=str(exc))

    def evaluate(perturb: tuple[int, int, float] | None, want_grad: bool) -> tuple[float, list[torch.Tensor] | None, int]:
        reset_torch_state()
        seed(0)
        fn, args, named, _ = runner.build(loaded, variant)
        pre = [e for name, value in named.items() for e in capture(value, name)]
        targets = [t for _, t in grad_targets(pre) if t.is_floating_point()]
        if perturb is not None:
            j, i, delta = perturb
            with torch.no_grad():
                targets[j].view(-1)[i] += delta
        seed(100)
        out = capture(fn(**args), "result")
        loss = weighted_loss(out)
        if loss is None:
            raise SubjectError("no output requires grad")
        grads = list(torch.autograd.grad(loss, targets, allow_unused=True)) if want_grad else None
        return float(loss.detach()), grads, len(targets)

    try:
        _, grads, n = evaluate(None, True)
    except Exception as exc:
        return GradCheck(tried=False, why=error_text(exc))
    assert grads is not None
    eps, worst, worst_at = 1e-3, 0.0, ""
    agree = True
    try:
        for j in range(n):
            g = grads[j]
            flat = torch.zeros(0) if g is None else g.reshape(-1).cpu()
            count = flat.numel() if g is not None else 0
            for i in range(min(count, max_elements)):
                up = evaluate((j, i, eps), False)[0]
                down = evaluate((j, i, -eps), False)[0]
                numeric = (up - down) / (2 * eps)
                analytic = float(flat[i])
                diff = abs(numeric - analytic)
                if diff > 2e-2 + 2e-2 * abs(numeric):
                    agree = False
                if diff > worst:
                    worst, worst_at = diff, f"input {j} element {i}: autograd {analytic:.4g}, finite differences {numeric:.4g}"
    except Exception as exc:
        return GradCheck(tried=False, why=error_text(exc))
    gc.collect()
    return GradCheck(tried=True, agree=agree, max_diff=worst, worst=worst_at)
