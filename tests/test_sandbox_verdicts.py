"""Every labeled case gets the expected verdict, with evidence a reader can check."""

from __future__ import annotations

import pytest

from review_copies.model.findings import Status
from tests.sandbox_cases import CASES, Case
from tests.sandbox_helpers import finding, verify, worker


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_verdict(case: Case) -> None:
    f, code = finding(case.code, case.line, case.category, case.fix, case.fix_lines, case.rule)
    v = verify(f, code)
    assert v.status.value == case.expected, v.evidence
    assert v.device == "cpu"
    assert case.evidence in v.evidence
    assert v.evidence and len(v.evidence) < 400


def test_every_category_has_a_true_positive_and_a_look_alike() -> None:
    by_category: dict[str, set[str]] = {}
    for c in CASES:
        by_category.setdefault(c.category, set()).add(c.label)
    assert len(by_category) == 7
    assert all(labels == {"tp", "fp"} for labels in by_category.values()), by_category


def test_without_a_fix_the_original_alone_decides() -> None:
    code = """
    import torch
    def scale(x, s):
        x.mul_(s)
        return x
    """
    f, text = finding(code, 3, "alias-mutation")
    v = verify(f, text)
    assert v.status is Status.CONFIRMED
    assert "no fix is offered" in v.evidence


def test_module_level_code_is_not_run() -> None:
    code = """
    import torch
    x = torch.ones(3)
    y = x.float()
    y.add_(1)
    """
    f, text = finding(code, 4, "alias-mutation", "y.add_(1)")
    v = verify(f, text)
    assert v.status is Status.NOT_RUN
    assert "module-level code" in v.evidence


def test_an_llm_probe_builds_inputs_the_synthesiser_cannot() -> None:
    code = """
    import torch
    def brighten(batch):
        pixels = batch["pixels"]
        pixels.mul_(2)
        return pixels
    """
    probe = 'brighten({"pixels": torch.ones(2, 3)})'
    f, text = finding(code, 4, "alias-mutation", "pixels = batch['pixels'] * 2", (4, 5), probe=probe)
    v = verify(f, text)
    assert v.status is Status.CONFIRMED, v.evidence
    assert "input `batch['pixels']` was modified" in v.evidence


def test_a_subject_that_cannot_be_built_is_inconclusive() -> None:
    code = """
    import torch
    from mypackage.models import Net
    def run(cfg):
        net = Net(cfg)
        out = net.features.float()
        out.add_(1)
        return out
    """
    f, text = finding(code, 6, "alias-mutation", "out = net.features.float().clone()")
    v = verify(f, text)
    assert v.status is Status.INCONCLUSIVE
    assert "Net" in v.evidence


def test_the_worker_is_warm_and_isolated() -> None:
    info = worker().info
    assert info.torch.startswith("2.")
    assert all((info.isolation.network, info.isolation.filesystem, info.isolation.processes, info.isolation.proc))
