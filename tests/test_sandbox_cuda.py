"""The CUDA path. Skipped without a GPU; run on a machine that has one."""

from __future__ import annotations

import io

import pytest

from review_copies.model.findings import Status
from review_copies.sandbox.verify.verifier import Verifier
from tests.sandbox_helpers import finding, worker

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def gpu_worker():
    sb = worker()
    if not sb.info.cuda:
        pytest.skip("no CUDA device")
    return sb


def _verify_auto(sb, f, text):
    verifier = Verifier(sb, "auto", io.StringIO())
    return verifier.verification(f, text, verifier.devices())


def test_numpy_of_a_gpu_tensor_is_confirmed_on_cuda(gpu_worker) -> None:
    code = """
    import torch
    def f(x):
        with torch.no_grad():
            y = x * 2
        return y.numpy()
    """
    f, text = finding(code, 5, "numpy-bridge", "return y.detach().cpu().numpy()", rule="RC321")
    v = _verify_auto(gpu_worker, f, text)
    assert v.status is Status.CONFIRMED and v.device == "cuda", v.evidence
    # On CPU the tensor neither lives on a GPU nor requires grad: the bug's precondition is
    # absent there, which decides nothing (contract §3), so the CPU run is no refutation.
    assert "cuda" in v.evidence and "on cpu inconclusive" in v.evidence


def test_cpu_copies_on_cuda_but_returns_self_on_cpu(gpu_worker) -> None:
    code = """
    import torch
    def to_host(x):
        return x.cpu().clone()
    """
    f, text = finding(code, 3, "redundant-copy", "return x.cpu()")
    v = _verify_auto(gpu_worker, f, text)
    # On CUDA .cpu() already copies, so the clone is redundant; on a CPU tensor .cpu()
    # returns the tensor itself and the "fix" would hand out an alias.
    assert v.status is Status.REFUTED and v.device == "cpu", v.evidence
    assert "shares memory with input `x`" in v.evidence
    assert "on cuda confirmed" in v.evidence


def test_the_worker_never_initialises_cuda(gpu_worker) -> None:
    code = """
    import torch
    def f(x):
        y = x.float()
        y.add_(1)
        return y
    """
    f, text = finding(code, 3, "alias-mutation", "y = x.float().clone()")
    for _ in range(2):
        v = _verify_auto(gpu_worker, f, text)
        assert v.status is Status.CONFIRMED and v.device == "cpu+cuda", v.evidence
