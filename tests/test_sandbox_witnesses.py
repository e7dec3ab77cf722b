"""A refutation needs a witness (contract §3): a run that never set up a finding's
precondition keeps the finding, `inconclusive`, saying what it could not establish; a GPU
claim is never refuted without a GPU; and inputs the repository's own callers pass come
before invented ones, named in the evidence."""

from __future__ import annotations

import dataclasses

import pytest

from review_copies.model.findings import Status
from tests.conftest import Repo, run_cli
from tests.sandbox_helpers import finding, verify

# (name, code, finding line, category, fix, recipe's words for what never held)
NEVER_HELD = [
    (
        "retention: the accumulated loss is computed under no_grad",
        """
        import torch
        def epoch_loss(batches):
            total = 0
            for b in batches:
                with torch.no_grad():
                    loss = (b * 2).sum()
                total += loss
            return total
        """,
        7, "graph-retention", "total += loss.item()", "never attached to the graph",
    ),
    (
        "snapshot: what the value was taken from is a local that never changes",
        """
        import torch
        def f(x):
            base = torch.ones(3)
            best = base * 2
            return best + x.sum()
        """,
        4, "stale-snapshot", "best = (base * 2).clone()", "never changed after it was taken",
    ),
    (
        "redundant copy: the line sits in a branch the call never takes",
        """
        import torch
        def f(x, flag=False):
            if flag:
                return x.clone().cpu()
            return x
        """,
        4, "redundant-copy", "return x.cpu()", "the finding's line never ran",
    ),
    (
        "input mutation: the write goes to the function's own copy",
        """
        import torch
        def norm(x):
            y = x.clone()
            y -= y.mean()
            return y
        """,
        4, "alias-mutation", "y = y - y.mean()", "never into memory an input shares",
    ),
    (
        "saved for backward: the tensor written in place was never saved",
        """
        import torch
        def f(x):
            y = x + 1
            y.mul_(2)
            return y
        """,
        4, "inplace-autograd", "y = y * 2", "had been saved for backward",
    ),
    (
        "copy-construct: torch.tensor is never given a tensor",
        """
        import torch
        def f(x):
            return torch.tensor(x.tolist())
        """,
        3, "copy-construct", "return torch.as_tensor(x.tolist())", "never given a tensor",
    ),
    (
        "numpy bridge: the converted tensor never requires grad",
        """
        import torch
        def f(x):
            with torch.no_grad():
                out = x * 2
            return out.numpy()
        """,
        5, "numpy-bridge", "return out.detach().cpu().numpy()", "never required grad",
    ),
]


@pytest.mark.parametrize(("name", "code", "line", "category", "fix", "words"), NEVER_HELD, ids=[case[0].split(":")[0] for case in NEVER_HELD])
def test_a_finding_whose_precondition_never_held_is_kept_inconclusive(name: str, code: str, line: int, category: str, fix: str, words: str) -> None:
    rule = {"copy-construct": "RC301", "numpy-bridge": "RC321"}.get(category, "X999")
    f, text = finding(code, line, category, fix, rule=rule)
    v = verify(f, text)
    assert v.status is Status.INCONCLUSIVE, (name, v.status, v.evidence)
    assert words in v.evidence, v.evidence


def test_a_gpu_claim_is_not_refuted_on_a_machine_without_one() -> None:
    code = """
    import torch
    def to_numpy(x):
        y = x.cuda()
        return y.numpy()
    """
    f, text = finding(code, 4, "numpy-bridge", "return y.detach().cpu().numpy()", rule="RC321")
    f = dataclasses.replace(f, claims=frozenset({"gpu"}))
    v = verify(f, text)
    assert v.status is Status.INCONCLUSIVE, v.evidence
    assert v.evidence.startswith("needs a CUDA device: this machine has none"), v.evidence


def test_a_device_independent_error_is_confirmed_by_the_meta_stand_in() -> None:
    """The meta device may confirm what fails on any non-CPU device; it never refutes."""
    code = """
    import torch
    def to_numpy(x, device):
        y = x.to(device)
        return y.numpy()
    """
    f, text = finding(code, 4, "numpy-bridge", "return y.detach().cpu().numpy()", rule="RC321")
    v = verify(dataclasses.replace(f, claims=frozenset({"gpu", "grad"})), text)
    assert v.status is Status.CONFIRMED, v.evidence


# ------------------------------------------------------------------ callers' inputs

LIBRARY_BEFORE = """
import torch


def encode_scaled(encoder, seq, gain):
    out, hidden = encoder(seq)
    return out, hidden
"""

# The new line writes into the caller's `seq`; `encoder` must return a pair, which no
# invented module does.
LIBRARY_AFTER = """
import torch


def encode_scaled(encoder, seq, gain):
    seq.mul_(gain)
    out, hidden = encoder(seq)
    return out, hidden
"""

CALLER = """
import torch
from torch import nn

from lib.track import encode_scaled

if __name__ == "__main__":
    encoder = nn.GRU(4, 8, batch_first=True)
    for step in range(3):
        seq = torch.randn(2, 5, 4)
        out, hidden = encode_scaled(encoder, seq, 0.5)
        print(seq.norm())
"""


def _library_repo(repo: Repo, with_caller: bool) -> None:
    repo.write("lib/__init__.py", "")
    repo.write("lib/track.py", LIBRARY_BEFORE)
    if with_caller:
        repo.write("train.py", CALLER)
    repo.commit("library")
    repo.write("lib/track.py", LIBRARY_AFTER)
    repo.commit("scale in place")


def _verdict(repo: Repo) -> dict:
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--format", "json", "--device", "cpu")
    findings = [f for f in result.json["findings"] if f["path"] == "lib/track.py"]
    assert len(findings) == 1, result.out
    return findings[0]["verification"]


def test_a_caller_elsewhere_in_the_repository_supplies_the_inputs_that_confirm(repo: Repo) -> None:
    _library_repo(repo, with_caller=True)
    verification = _verdict(repo)
    assert verification["status"] == "confirmed", verification
    assert "input `seq` was modified" in verification["evidence"]
    assert "as `train.py:10` calls it" in verification["evidence"]


def test_without_the_caller_the_invented_inputs_cannot_decide(repo: Repo) -> None:
    _library_repo(repo, with_caller=False)
    verification = _verdict(repo)
    assert verification["status"] == "inconclusive", verification
    assert "too many values to unpack" in verification["evidence"]


def test_a_loop_inside_one_call_that_keeps_finished_graphs_is_confirmed() -> None:
    """The loop is the function's own (no loader comes in), so one call and three calls
    leave the same graph behind; what shows the retention is the accumulator holding more
    and more nodes whose backward already ran. This was refuted before."""
    code = """
    import torch
    from torch import nn
    def train(steps: int = 4):
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        for _ in range(steps):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss
        return total
    """
    f, text = finding(code, 12, "graph-retention", "total += loss.item()", rule="RC251")
    v = verify(f, text)
    assert v.status is Status.CONFIRMED, (v.status, v.evidence)
    assert "backward had already run" in v.evidence


def test_a_loop_that_keeps_no_finished_graph_is_not_confirmed() -> None:
    code = """
    import torch
    from torch import nn
    def train(steps: int = 4):
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        last = None
        for _ in range(steps):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            last = loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        return last.item()
    """
    f, text = finding(code, 9, "graph-retention", "last = loss.detach()", rule="RC251")
    v = verify(f, text)
    assert v.status is not Status.CONFIRMED, (v.status, v.evidence)
