"""Every rule's VALID and INVALID examples, run through the real engine (Fixit's way)."""

from __future__ import annotations

import pytest

from review_copies.review import fixes
from review_copies.review.engine import example_job, review_file
from review_copies.rules import Invalid, Rule, all_rules, rule_by_code

CASES = [
    pytest.param(rule, kind, i, case, id=f"{rule.code}-{kind}-{i}")
    for rule in all_rules()
    for kind, cases in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, case in enumerate(cases)
]


def _findings(rule: type[Rule], source: str, base: str | None = None):
    result = review_file(example_job("example.py", source, base, (rule.code,)))
    assert not result.notes, result.notes
    return result.findings


def _lines(code: str, source: str) -> list[int]:
    """The lines the rule `code` reports in `source`, in order."""
    rule = rule_by_code(code)
    assert rule is not None, code
    return [f.line for f in _findings(rule, source)]


@pytest.mark.parametrize(("rule", "kind", "index", "case"), CASES)
def test_example(rule: type[Rule], kind: str, index: int, case) -> None:
    found = _findings(rule, case.source, case.base)
    if kind == "valid":
        assert found == [], f"{rule.code} flagged valid code: {[f.message for f in found]}"
        return
    assert isinstance(case, Invalid)
    at_line = [f for f in found if f.line <= case.line <= f.end_line]
    assert at_line, f"{rule.code} did not flag line {case.line}; found lines {[f.line for f in found]}"
    finding = at_line[0]
    assert finding.category is rule.category and finding.rule == rule.code
    assert len(finding.message) > 40
    if case.fixed is None:
        assert finding.suggestion is None
        return
    assert finding.suggestion is not None, "a fix was expected"
    fixed = fixes.apply(case.source, finding.suggestion)
    assert fixed == case.fixed
    # The fix makes this finding go away.
    after = [f for f in _findings(rule, fixed, case.base) if f.line == finding.line]
    assert after == [], f"the fix did not silence the rule: {[f.message for f in after]}"


def test_rule_codes_are_distinct_and_well_formed() -> None:
    codes = [r.code for r in all_rules()]
    assert len(codes) == len(set(codes))
    for rule in all_rules():
        assert rule.code.startswith("RC") and rule.code[2:].isdigit()
        sections = rule.sections()
        for heading in ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety"):
            assert sections.get(heading), f"{rule.code} docstring lacks '{heading}'"
        assert rule.VALID and rule.INVALID, f"{rule.code} needs valid and invalid examples"


def test_a_write_through_an_expression_names_the_expression() -> None:
    """`torch.diagonal(m).add_(-1)` writes into `m` through a call, not a name: the message
    quotes the call (it once said "(`` shares its memory: )")."""
    source = (
        "import torch\n"
        "def loss(m: torch.Tensor) -> torch.Tensor:\n"
        "    on_diag = torch.diagonal(m).add_(-1).pow_(2).sum()\n"
        "    return on_diag\n"
    )
    rule = next(r for r in all_rules() if r.code == "RC102")
    found = _findings(rule, source)
    assert found and all("``" not in f.message for f in found), [f.message for f in found]
    assert "through `torch.diagonal(m)`" in found[0].message


def test_the_gather_message_names_a_function_that_exists_however_all_gather_was_imported() -> None:
    from review_copies.rules import rule_by_code

    source = (
        "import torch\n"
        "from torch.distributed import all_gather\n"
        "def gather(x: torch.Tensor, world: int) -> torch.Tensor:\n"
        "    parts = [torch.zeros_like(x) for _ in range(world)]\n"
        "    all_gather(parts, x)\n"
        "    return torch.cat(parts, dim=0)\n"
    )
    [finding] = _findings(rule_by_code("RC345"), source)
    assert "`torch.distributed.all_gather_into_tensor(out, ...)`" in finding.message
    aliased = source.replace("from torch.distributed import all_gather\n", "import torch.distributed as dist\n").replace("    all_gather(", "    dist.all_gather(")
    [finding] = _findings(rule_by_code("RC345"), aliased)
    assert "`dist.all_gather_into_tensor(out, ...)`" in finding.message


def test_a_per_iteration_clone_is_left_alone_in_a_tests_file() -> None:
    from review_copies.rules import rule_by_code

    source = (
        "import torch\n"
        "def check(model, batches):\n"
        "    base = torch.zeros(4)\n"
        "    for x in batches:\n"
        "        work = base.clone()\n"
        "        work.add_(x)\n"
        "        assert model(work).isfinite().all()\n"
    )
    rule = rule_by_code("RC344")
    assert [f.rule for f in review_file(example_job("train.py", source, None, ("RC344",))).findings] == ["RC344"]
    for path in ("tests/test_model.py", "test_model.py", "pkg/model_test.py"):
        assert review_file(example_job(path, source, None, (rule.code,))).findings == []


MUON = """
import torch
def muon_update(grad, momentum, beta=0.95, nesterov=True):
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    return update / (update.norm() + 1e-7)
"""


def test_a_helper_of_an_optimizer_step_updates_what_the_step_hands_it() -> None:
    """Muon's `muon_update(p.grad, state["momentum_buffer"])`: its one caller is an
    optimizer's `step`, and updating the momentum buffer (and the gradient, read no more)
    is the helper's job, not a change behind the caller's back. The same helper called from
    a plain function that reads the buffer afterwards is still reported."""
    from review_copies.rules.alias_mutation.rc102_inplace_on_argument import InplaceOnArgument

    step = MUON + """
class Muon(torch.optim.Optimizer):
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["momentum_buffer"] = torch.zeros_like(p)
                update = muon_update(p.grad, state["momentum_buffer"], beta=group["momentum"])
                p.add_(update.reshape(p.shape), alpha=-group["lr"])
"""
    assert _findings(InplaceOnArgument, step) == []
    plain = MUON + """
def direction(grad, momentum):
    update = muon_update(grad, momentum)
    return update, momentum.norm()
"""
    assert [f.line for f in _findings(InplaceOnArgument, plain)] == [4, 5]


def test_a_helper_method_of_an_optimizer_hands_the_update_its_own_state() -> None:
    """modded-nanogpt's NorMuon: `_direction`, a method the optimizer's `step` and its coupled
    step share, passes `state["momentum_buffer"]` to `muon_update`. The state is the
    optimizer's to update from any of its methods, not only from one named `step`."""
    from review_copies.rules.alias_mutation.rc102_inplace_on_argument import InplaceOnArgument

    helper = MUON + """
class Muon(torch.optim.Optimizer):
    def _direction(self, p, group):
        state = self.state[p]
        if len(state) == 0:
            state["momentum_buffer"] = torch.zeros_like(p)
        return muon_update(p.grad, state["momentum_buffer"], beta=group["momentum"])

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(self._direction(p, group).reshape(p.shape), alpha=-group["lr"])
"""
    assert _findings(InplaceOnArgument, helper) == []


def test_a_state_dict_written_through_its_own_entries_is_a_handle_not_a_snapshot() -> None:
    """pfrl's `soft_copy_param`: `for k, v in target_dict.items(): v.mul_(1 - tau)` updates
    the target network's live tensors through its state_dict on purpose; the dict is never
    meant to keep the old values. A state_dict taken before training and read after it is
    still reported."""
    from review_copies.rules.stale_snapshot.rc151_state_dict_snapshot import StateDictSnapshot

    soft = """
import torch
def soft_copy_param(target_link, source_link, tau):
    target_dict = target_link.state_dict()
    source_dict = source_link.state_dict()
    for k, target_value in target_dict.items():
        source_value = source_dict[k]
        if source_value.dtype in [torch.float32, torch.float64, torch.float16]:
            target_value.mul_(1 - tau)
            target_value.add_(tau * source_value)
        else:
            target_dict[k] = source_value
"""
    assert _findings(StateDictSnapshot, soft) == []
    stale = """
import torch
def train(model, batches, opt):
    before = model.state_dict()
    for x, y in batches:
        (model(x) - y).pow(2).mean().backward()
        opt.step()
    return {k: (model.state_dict()[k] - before[k]).norm() for k in before}
"""
    assert [f.line for f in _findings(StateDictSnapshot, stale)] == [4]


def test_a_transpose_of_dims_that_may_be_one_dim_is_not_a_certain_copy() -> None:
    """apex's SyncBN: `input.transpose(1, -1).contiguous().clone()`. For a 2-D input dims 1
    and -1 are the same dim, the transpose is the input and `.contiguous()` returns it, so
    the clone is the one copy. Two distinct dims of the same sign always swap strides: there
    `.contiguous()` copies and the clone after it is a second copy."""
    from review_copies.rules.redundant_copy.rc341_clone_of_temporary import CloneOfTemporary

    either = """
import torch
def channels_last(input: torch.Tensor):
    return input.transpose(1, -1).contiguous().clone()
"""
    assert _findings(CloneOfTemporary, either) == []
    assert _findings(CloneOfTemporary, either.replace("transpose(1, -1)", "permute(0, 1)")) == []
    swapped = either.replace("transpose(1, -1)", "transpose(1, 2)")
    assert [f.line for f in _findings(CloneOfTemporary, swapped)] == [4]
    assert [f.line for f in _findings(CloneOfTemporary, either.replace("transpose(1, -1)", "permute(0, 2, 1)"))] == [4]


def test_a_handler_that_raises_leaves_the_try_body_state_alone() -> None:
    """deep-person-reid's activation maps: the model output is on a GPU exactly when
    `use_gpu` holds, and moved back under the same flag before `.numpy()`. The `try:` around
    the model call has a handler that only re-raises, so nothing of it reaches the code
    after; a handler that goes on does."""
    from review_copies.rules.numpy_bridge.rc321_numpy_on_grad_or_gpu_tensor import NumpyOnGradOrGpuTensor

    source = """
import torch

@torch.no_grad()
def maps(model, loader, use_gpu):
    for imgs in loader:
        if use_gpu:
            imgs = imgs.cuda()
        try:
            outputs = model(imgs, return_featuremaps=True)
        except TypeError:
            raise TypeError("forward() needs return_featuremaps")
        if use_gpu:
            outputs = outputs.cpu()
        for j in range(outputs.size(0)):
            yield outputs[j, ...].numpy()
"""
    assert _findings(NumpyOnGradOrGpuTensor, source) == []
    goes_on = source.replace('raise TypeError("forward() needs return_featuremaps")', 'outputs = torch.zeros(1, 8, 8, device="cuda")')
    assert [f.line for f in _findings(NumpyOnGradOrGpuTensor, goes_on)] == [16]


def test_a_fill_of_part_of_an_argument_edits_the_callers_values() -> None:
    """A whole fill (`buf.data.fill_(token)`) fills a buffer; a constant written into part of
    the caller's ids (`ids[:, :n].fill_(pad)`) edits its values and stays reported."""
    source = (
        "import torch\n"
        "def mask_prefix(ids: torch.Tensor, n: int, pad: int):\n"
        "    ids[:, :n].fill_(pad)\n"
        "    return ids.ne(pad).sum()\n"
    )
    assert _lines("RC102", source) == [3]


def test_an_ema_generator_its_caller_thaws_by_name_stays_reported() -> None:
    """StyleGAN's `G_ema = copy.deepcopy(G).eval()` of a frozen `G` makes no graph; once the
    caller turns grad back on for `G_ema` itself, its output does, and `.numpy()` raises."""
    source = (
        "import copy\n"
        "import torch\n"
        "def save_samples(G_ema: torch.nn.Module, z: torch.Tensor):\n"
        "    return G_ema(z).cpu().numpy()\n"
        "def training_loop(build, z: torch.Tensor):\n"
        "    G = build().train().requires_grad_(False)\n"
        "    G_ema = copy.deepcopy(G).eval()\n"
        "    G_ema.requires_grad_()\n"
        "    save_samples(G_ema, z)\n"
    )
    assert _lines("RC321", source) == [4]


def test_the_state_dicts_of_two_unwrapped_models_are_two_modules() -> None:
    """RepVGG's EMA: `unwrap_model(model).state_dict()` is read while the entries of
    `unwrap_model(model_ema).state_dict()` are written. Two call expressions name two
    modules, not one unnamed module; a snapshot a training loop keeps stays reported."""
    ema = (
        "import torch\n"
        "def unwrap_model(model):\n"
        "    return model.module if hasattr(model, 'module') else model\n"
        "def update_model_ema(model, model_ema, alpha: float):\n"
        "    params = unwrap_model(model).state_dict()\n"
        "    for name, param in unwrap_model(model_ema).state_dict().items():\n"
        "        param.copy_(param * (1.0 - alpha) + params[name] * alpha)\n"
    )
    best = (
        "import torch\n"
        "def unwrap_model(model):\n"
        "    return model.module if hasattr(model, 'module') else model\n"
        "def fit(model, loader, optimizer, epochs: int):\n"
        "    best, best_state = float('inf'), None\n"
        "    for _ in range(epochs):\n"
        "        for x, y in loader:\n"
        "            loss = (model(x) - y).pow(2).mean()\n"
        "            optimizer.zero_grad()\n"
        "            loss.backward()\n"
        "            optimizer.step()\n"
        "        if loss.item() < best:\n"
        "            best = loss.item()\n"
        "            best_state = unwrap_model(model).state_dict()\n"
        "    return best_state\n"
    )
    assert _lines("RC151", ema) == []
    assert _lines("RC151", best) == [14]


def test_a_numpy_round_trip_of_the_written_argument_handed_back_is_mutate_and_return() -> None:
    """PointNet++'s dropout transform writes into `points.numpy()` and returns
    `torch.from_numpy(pc).float()`, the same memory, as its in-place siblings return
    `points`; a copy made before the return (`np.array(...)`) leaves the write reported."""
    source = (
        "import numpy as np\n"
        "import torch\n"
        "def dropout(points: torch.Tensor, ratio: float):\n"
        "    pc = points.numpy()\n"
        "    drop = np.where(np.random.random(pc.shape[0]) <= ratio)[0]\n"
        "    pc[drop] = pc[0]\n"
        "    return torch.from_numpy(pc).float()\n"
        "def normalize(points: torch.Tensor):\n"
        "    arr = points.numpy()\n"
        "    arr /= 255.0\n"
        "    arr = np.array(arr[:, ::-1])\n"
        "    return torch.from_numpy(arr)\n"
    )
    assert _lines("RC102", source) == [10]
