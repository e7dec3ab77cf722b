"""A change is reviewed as a change: the base version of every changed file is read (from
git, or from a diff), each changed function is compared with its earlier self, and what
the change dropped or made in place is evidence the rules use and the messages say. The
repository index answers questions about classes defined in other files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from review_copies.analysis.change import compare
from review_copies.analysis.parse import parse
from review_copies.index.facts import file_facts
from review_copies.index.repo import RepoIndex
from tests.conftest import Repo, run_cli

BEFORE = """
import copy
import torch


def snapshot(model, history, loss):
    best = copy.deepcopy(model.state_dict())
    history.append(loss.detach())
    return best


def normalize(img, mean, std):
    img = (img - mean) / std
    return img
"""

AFTER = """
import copy
import torch


def snapshot(model, history, loss):
    best = model.state_dict()
    history.append(loss)
    return best


def normalize(img, mean, std):
    img.sub_(mean).div_(std)
    return img
"""


def _dedent(text: str) -> str:
    return text.lstrip("\n")


def test_the_comparison_names_what_each_function_lost() -> None:
    after, before = parse("m.py", _dedent(AFTER)), parse("m.py", _dedent(BEFORE))
    changes = compare(after, before, frozenset({6, 7, 12}))
    snap = changes["snapshot"]
    assert [(d.line, d.what) for d in snap.dropped] == [(6, "copy.deepcopy(...)"), (7, ".detach()")]
    assert snap.dropped[1].before == "history.append(loss.detach())"
    assert changes["normalize"].base_writes == frozenset() and not changes["normalize"].new


def test_a_new_function_has_no_base_and_an_unchanged_one_is_not_compared() -> None:
    after = parse("m.py", _dedent(AFTER) + "\n\ndef fresh(x):\n    return x.clone()\n")
    changes = compare(after, parse("m.py", _dedent(BEFORE)), frozenset({17}))
    assert set(changes) == {"fresh"} and changes["fresh"].new


def _pr(repo: Repo) -> dict:
    repo.write("pkg/model_utils.py", BEFORE)
    repo.commit("base")
    repo.write("pkg/model_utils.py", AFTER)
    repo.commit("the change")
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json")
    assert result.code == 1, result.err
    return {(f["line"], f["rule"]): f for f in result.json["findings"]}


def test_a_pull_request_that_drops_protections_is_told_what_it_dropped(repo: Repo) -> None:
    found = _pr(repo)
    assert set(found) == {(6, "RC157"), (7, "RC261"), (12, "RC112")}, sorted(found)
    assert found[(6, "RC157")]["message"].startswith("This change drops the `copy.deepcopy(...)` from `best = copy.deepcopy(model.state_dict())`")
    assert found[(7, "RC261")]["message"].startswith("This change drops the `.detach()` from `history.append(loss.detach())`")
    assert found[(7, "RC261")]["suggestion"]["replacement"] == "    history.append(loss.detach())\n"
    assert "write into its argument `img`" in found[(12, "RC112")]["message"]


def test_the_same_change_as_a_diff_file_is_read_against_its_base(repo: Repo, tmp_path: Path) -> None:
    repo.write("pkg/model_utils.py", BEFORE)
    repo.commit("base")
    repo.write("pkg/model_utils.py", AFTER)  # the working tree holds the new version
    diff = subprocess.run(["git", "-C", str(repo.path), "diff"], capture_output=True, text=True, check=True).stdout
    (tmp_path / "change.diff").write_text(diff)
    result = run_cli("--repo", str(repo.path), "--diff", str(tmp_path / "change.diff"), "--offline", "--no-sandbox", "--format", "json")
    assert sorted((f["line"], f["rule"]) for f in result.json["findings"]) == [(6, "RC157"), (7, "RC261"), (12, "RC112")]


def test_whole_files_have_no_base_and_stay_quiet_on_what_only_the_change_shows(repo: Repo) -> None:
    repo.write("pkg/model_utils.py", AFTER)
    repo.commit("only the new version")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json")
    assert not any(f["rule"] in ("RC261", "RC112", "RC157") for f in result.json["findings"])


METER = """
class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
"""

TRAIN = """
import torch
from utils.meters import AverageMeter


def train_epoch(model, loader, optimizer):
    losses = AverageMeter()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.update(loss, x.size(0))
    return losses.sum
"""


def test_the_index_knows_a_class_defined_in_another_file(repo: Repo, tmp_path: Path) -> None:
    repo.write("utils/__init__.py", "")
    repo.write("utils/meters.py", METER)
    repo.commit("meters")
    repo.write("train.py", TRAIN)
    repo.commit("training loop")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    [finding] = result.json["findings"]
    assert finding["rule"] == "RC254" and finding["line"] == 12
    assert "`AverageMeter.update`, which accumulates it into `self.sum` (utils/meters.py:6)" in finding["message"]
    # The facts of each file are cached by content: a second review reads them back.
    cached = list((tmp_path / "cache" / "review-copies" / "index").rglob("*.json"))
    assert cached
    again = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert again.json["findings"] == result.json["findings"]


class Files:
    """A repository held in memory, for the index."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts

    def mentioning(self, word: str) -> list[str]:
        return sorted(p for p, t in self.texts.items() if word in t)

    def read(self, path: str) -> str | None:
        return self.texts.get(path)

    def blob(self, path: str) -> str | None:
        return None


def test_a_class_defined_twice_must_keep_in_both_to_count() -> None:
    texts = {"a.py": _dedent(METER), "b.py": "class AverageMeter:\n    def update(self, val, n=1):\n        print(val)\n"}
    assert RepoIndex(Files(texts)).keeps("AverageMeter", "update", 0, None) is None
    assert file_facts(_dedent(METER))["classes"]["AverageMeter"]["methods"]["update"]["keeps"] == {"val": ["sum", 6, "accumulates"], "n": ["sum", 6, "accumulates"]}


MEAN = """
class AverageMeter:
    def __init__(self):
        self.sum, self.count = 0.0, 0

    def update(self, val, n=1):
        val = float(val)
        self.sum += val * n
        self.count += n
"""


def test_a_meter_that_converts_its_argument_to_a_number_first_keeps_no_graph(repo: Repo, tmp_path: Path) -> None:
    # `val = float(val)` before `self.sum += val * n`: the meter keeps a number, so handing it
    # `loss` keeps no graph alive; `n` is still kept as it is.
    assert file_facts(_dedent(MEAN))["classes"]["AverageMeter"]["methods"]["update"]["keeps"] == {"n": ["sum", 7, "accumulates"]}
    repo.write("utils/__init__.py", "")
    repo.write("utils/meters.py", MEAN)
    repo.commit("meters")
    repo.write("train.py", TRAIN)
    repo.commit("training loop")
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert result.json["findings"] == []


ACTION_SPACE = """
import torch


class GripperSpace:
    gripper = (5, 11)

    def postprocess(self, action: torch.Tensor) -> torch.Tensor:
        action[..., self.gripper] = torch.sigmoid(action[..., self.gripper])
        return action[..., :12]
"""

POLICY_DROPS = """
from spaces import GripperSpace


class Policy:
    def __init__(self, net):
        self.net = net
        self.space = GripperSpace()

    def act(self, obs):
        action = self.net(obs)
        return self.space.postprocess(action)
"""

POLICY_KEEPS = """
from spaces import GripperSpace


class Policy:
    def __init__(self, net):
        self.net = net
        self.space = GripperSpace()

    def act(self, obs):
        action = self.net(obs)
        trimmed = self.space.postprocess(action)
        return trimmed, action.norm()
"""


def _whole_file(repo: Repo, tmp_path: Path, path: str) -> list[tuple[str, int]]:
    """`--all` over one file of the repository, as a user runs it from the checkout: each
    finding's rule and line. The index cache lives under `tmp_path`."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", path, cwd=repo.path, env=env)
    assert all(f["path"] == path for f in result.json["findings"])
    return [(f["rule"], f["line"]) for f in result.json["findings"]]


def test_a_helper_writing_its_argument_is_reported_only_when_a_caller_elsewhere_reads_it_again(repo: Repo, tmp_path: Path) -> None:
    repo.write("spaces.py", ACTION_SPACE)
    repo.write("policy.py", POLICY_DROPS)
    repo.commit("a policy that hands its fresh action over")
    assert _whole_file(repo, tmp_path, "spaces.py") == []
    repo.write("policy.py", POLICY_KEEPS)
    repo.commit("the policy reads its action again after the helper wrote into it")
    assert _whole_file(repo, tmp_path, "spaces.py") == [("RC102", 8)]


SPLAT = """
import torch


def splat(init_grid: torch.Tensor, feat: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    b, f = init_grid.shape[:2]
    grid_flat = init_grid.view(b, f, -1)
    grid_flat.scatter_add_(2, index, feat)
    grid_flat = torch.round(grid_flat)
    return grid_flat.view({reshape})
"""

MAPPER = """
import torch

import depth as du


def project(feat, index):
    init_grid = torch.zeros(2, 3, 8, 8)
    return du.splat(init_grid, feat, index).transpose(2, 3)
"""


def test_a_helper_that_reads_only_the_shape_of_what_it_wrote_leaves_it_to_the_callers(repo: Repo, tmp_path: Path) -> None:
    # home-robot's `splat_feat_nd`: it scatters into its grid through a view and returns
    # `grid_flat.view(init_grid.shape)`; every caller passes a new grid it never reads again.
    repo.write("depth.py", SPLAT.format(reshape="init_grid.shape"))
    repo.write("mapper.py", MAPPER)
    repo.commit("a splatting helper and its one caller")
    assert _whole_file(repo, tmp_path, "depth.py") == []
    # Reading the grid's values after writing it is the helper's own hazard, whoever calls.
    repo.write("depth.py", SPLAT.format(reshape="init_grid.shape) + init_grid.mean("))
    repo.commit("the helper reads the grid's values again")
    assert _whole_file(repo, tmp_path, "depth.py") == [("RC102", 7)]


def test_a_call_that_could_not_bind_to_the_helper_is_another_functions(repo: Repo, tmp_path: Path) -> None:
    # A namesake with another signature (`postprocess(frames, size=...)`) is called on a
    # tensor read again; that call could not reach `GripperSpace.postprocess(self, action)`.
    repo.write("spaces.py", ACTION_SPACE)
    repo.write("policy.py", POLICY_DROPS)
    repo.write("video.py", "def clip(head, frames):\n    small = head.postprocess(frames, size=64)\n    return small, frames.mean()\n")
    repo.commit("a policy that hands its fresh action over, and a video head of its own")
    assert _whole_file(repo, tmp_path, "spaces.py") == []
    repo.write("video.py", "def clip(head, frames):\n    small = head.postprocess(frames)\n    return small, frames.mean()\n")
    repo.commit("the same call without the keyword could be the gripper's")
    assert _whole_file(repo, tmp_path, "spaces.py") == [("RC102", 8)]


ACTOR = """
import torch
from torch import nn


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)

    @torch.no_grad()
    def select_action(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)

    def score(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).sum()
"""

ROLLOUT = """
import torch
from actor import Actor


def rollout(actor: Actor, obs: torch.Tensor):
    actor.eval()
    action = actor.select_action(obs).squeeze(0).cpu()
    return action.numpy()


def report(actor: Actor, obs: torch.Tensor):
    actor.eval()
    return actor.score(obs).cpu().numpy()
"""


def test_numpy_on_what_a_no_grad_method_elsewhere_returned_is_not_reported(repo: Repo, tmp_path: Path) -> None:
    repo.write("actor.py", ACTOR)
    repo.write("rollout.py", ROLLOUT)
    repo.commit("an actor and its rollout")
    # `select_action` is decorated with @torch.no_grad() in actor.py: its result carries no
    # graph. `score` is not: converting its result still raises.
    assert _whole_file(repo, tmp_path, "rollout.py") == [("RC321", 13)]


BASE_POLICY = """
import abc
import torch


class Policy(abc.ABC):
    @abc.abstractmethod
    def select_action(self, obs: torch.Tensor) -> torch.Tensor:
        \"\"\"One action for the environment.\"\"\"
        raise NotImplementedError
"""


def test_an_abstract_declaration_does_not_hide_the_no_grad_implementations(repo: Repo, tmp_path: Path) -> None:
    repo.write("base.py", BASE_POLICY)
    repo.write("actor.py", ACTOR)
    repo.write("rollout.py", ROLLOUT)
    repo.commit("an abstract policy, an actor and its rollout")
    assert _whole_file(repo, tmp_path, "rollout.py") == [("RC321", 13)]


DUMMY = """
import torch


class DummyPolicy:
    def select_action(self, obs: torch.Tensor) -> torch.Tensor:
        return obs * 0
"""


def test_the_receivers_declared_class_decides_which_method_runs(repo: Repo, tmp_path: Path) -> None:
    # A test double defines `select_action` without no_grad; `rollout` declares `actor: Actor`,
    # whose method is decorated, so the double does not make its result attached.
    repo.write("tests/dummy.py", DUMMY)
    repo.write("actor.py", ACTOR)
    repo.write("rollout.py", ROLLOUT)
    repo.commit("an actor, a test double and a rollout")
    assert _whole_file(repo, tmp_path, "rollout.py") == [("RC321", 13)]



WAV2VEC = """
import torch
from torch import nn


class Wav2Vec2Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def get_logits(self, net_output):
        return self.proj(net_output["x"]).flatten(0, 1)

    def get_targets(self, sample, net_output):
        x = net_output["x"]
        return x.new_zeros(x.size(0) * x.size(1), dtype=torch.long)
"""

CRITERION = """
import torch
import torch.nn.functional as F


def log_targets(model, sample):
    net_output = model(**sample["net_input"])
    target = model.get_targets(sample, net_output)
    return {"target": target.cpu().numpy()}
"""


def test_numpy_on_what_a_method_elsewhere_builds_without_a_graph_is_not_reported(repo: Repo, tmp_path: Path) -> None:
    # wav2vec's `get_targets` returns `x.new_zeros(..., dtype=torch.long)`: an integer tensor
    # cannot require grad, whatever calling a method of a model suggests. Logging the logits
    # the same way still raises.
    repo.write("model.py", WAV2VEC)
    repo.write("criterion.py", CRITERION)
    repo.commit("a model and its criterion")
    assert _whole_file(repo, tmp_path, "criterion.py") == []
    repo.write("criterion.py", CRITERION.replace("target = model.get_targets(sample, net_output)", "target = model.get_logits(net_output)"))
    repo.commit("the criterion logs the logits")
    assert _whole_file(repo, tmp_path, "criterion.py") == [("RC321", 8)]


def test_only_results_that_cannot_require_grad_count_as_graph_free() -> None:
    # An integer tensor, or one made without `requires_grad`, cannot require grad; a leaf
    # made with `requires_grad=True` does, and `.numpy()` on it still raises.
    source = (
        "import torch\n\ndef targets(x):\n    return x.new_zeros(3, dtype=torch.long)\n\n"
        "def noise(n):\n    z = torch.randn(n)\n    return z\n\n"
        "def weights(n):\n    return torch.zeros(n, requires_grad=True)\n"
    )
    functions = file_facts(source)["functions"]
    assert {name: fn["no_graph"] for name, fn in functions.items()} == {"targets": True, "noise": True, "weights": False}


def test_a_distributions_sample_is_graph_free_and_anything_elses_is_not() -> None:
    # torch.distributions' `sample()` runs under no_grad (TimeVQVAE's `softmax_sample`); a
    # model's `sample()` may well keep its graph.
    source = (
        "import torch\nfrom torch.distributions import Categorical\n\n"
        "def drawn(t):\n    m = Categorical(logits=t)\n    return m.sample()\n\n"
        "def generated(model, z):\n    return model.sample(z)\n"
    )
    functions = file_facts(source)["functions"]
    assert {name: fn["no_graph"] for name, fn in functions.items()} == {"drawn": True, "generated": False}


def test_a_list_of_numbers_is_graph_free_and_a_list_of_tensors_is_not() -> None:
    # RandLA-Net's `accuracy` returns `accs`, filled with `.item()` numbers; a list given the
    # loss itself keeps its graph.
    source = (
        "import torch\n\ndef numbers(xs):\n    accs = []\n    for x in xs:\n        accs.append(x.mean().item())\n    return accs\n\n"
        "def tensors(xs):\n    out = []\n    for x in xs:\n        out.append(x.mean())\n    return out\n\n"
        "def extended(xs):\n    out = []\n    out.extend(xs)\n    return out\n\n"
        "def pair(x):\n    return (x.argmax().item(), x.sum().item())\n"
    )
    functions = file_facts(source)["functions"]
    assert {name: fn["no_graph"] for name, fn in functions.items()} == {"numbers": True, "tensors": False, "extended": False, "pair": True}

def test_a_metrics_dict_handed_back_through_a_sibling_method_is_graph_free() -> None:
    # StoneA18's trainable SAE: `loss()` returns the loss and a dict of `float(...)` numbers,
    # `training_step()` backpropagates the first and returns the second; a step that returns
    # the loss itself keeps its graph.
    source = (
        "import torch\n\nclass SAE(torch.nn.Module):\n"
        "    def loss(self, x):\n        total = self.fc(x).pow(2).mean()\n        return total, {'loss': float(total.detach()), 'n': len(x)}\n\n"
        "    def training_step(self, x):\n        loss, metrics = self.loss(x)\n        loss.backward()\n        return metrics\n\n"
        "    def loss_step(self, x):\n        loss, metrics = self.loss(x)\n        return loss\n"
    )
    methods = file_facts(source)["classes"]["SAE"]["methods"]
    assert {name: fn["no_graph"] for name, fn in methods.items()} == {"loss": False, "training_step": True, "loss_step": False}
    # Through a base class of the same file, and a dict filled key by key: with numbers it
    # holds no graph, with the loss itself it does.
    derived = source + (
        "\nclass Trainable(SAE):\n"
        "    def step(self, x):\n        loss, metrics = self.loss(x)\n        metrics['scale'] = float(x.abs().max())\n        return metrics\n\n"
        "    def step_keeping_loss(self, x):\n        loss, metrics = self.loss(x)\n        metrics['total'] = loss\n        return metrics\n"
    )
    steps = file_facts(derived)["classes"]["Trainable"]["methods"]
    assert {name: fn["no_graph"] for name, fn in steps.items()} == {"step": True, "step_keeping_loss": False}


TRAINABLE_SAE = """
import torch


class SAE(torch.nn.Module):
    def __init__(self, d: int, k: int):
        super().__init__()
        self.encoder = torch.nn.Linear(d, k)

    def loss(self, x: torch.Tensor):
        total = self.encoder(x).abs().mean()
        return total, {{"loss": float(total.detach())}}

    def training_step(self, x: torch.Tensor, optimizer):
        optimizer.zero_grad()
        loss, metrics = self.loss(x)
        loss.backward()
        optimizer.step()
        return {result}
"""

TRAIN_SAE = """
import torch

from sae import SAE


def train(sae: SAE, batches, steps: int):
    optimizer = torch.optim.AdamW(sae.parameters())
    history = []
    for step, batch in enumerate(batches, start=1):
        history.append(sae.training_step(batch, optimizer))
        if step >= steps:
            break
    return history
"""


def test_a_training_steps_metrics_kept_each_step_hold_no_graph(repo: Repo, tmp_path: Path) -> None:
    repo.write("sae.py", TRAINABLE_SAE.format(result="metrics"))
    repo.write("train.py", TRAIN_SAE)
    repo.commit("a training step that returns its numbers")
    assert _whole_file(repo, tmp_path, "train.py") == []
    repo.write("sae.py", TRAINABLE_SAE.format(result="loss"))
    repo.commit("a training step that returns the loss itself")
    assert _whole_file(repo, tmp_path, "train.py") == [("RC252", 10)]


def test_callers_that_are_tests_do_not_speak_for_a_librarys_users(repo: Repo, tmp_path: Path) -> None:
    # Only a test calls the helper, and it checks the result alone: a library's users are not
    # in the repository, so the write into their tensor is still reported.
    repo.write("spaces.py", ACTION_SPACE)
    repo.write("tests/test_spaces.py", "from spaces import GripperSpace\n\ndef test_trim(action):\n    out = GripperSpace().postprocess(action)\n    assert out.shape[-1] == 12\n")
    repo.commit("a helper and its test")
    assert _whole_file(repo, tmp_path, "spaces.py") == [("RC102", 8)]


def test_a_warm_index_reads_no_file_of_a_commit(repo: Repo, tmp_path: Path) -> None:
    # Facts of a commit's files are cached by object id: the second index answers from the
    # cache without reading any file's text.
    from review_copies.source.tree import RevisionFiles

    repo.write("utils/meters.py", METER)
    repo.write("train.py", TRAIN)
    repo.commit("meters and a loop")
    commit = subprocess.run(["git", "-C", str(repo.path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    reads: list[str] = []

    class Counting(RevisionFiles):
        def read(self, path: str) -> str | None:
            reads.append(path)
            return super().read(path)

    files = Counting(str(repo.path / ".git"), commit)
    cold = RepoIndex(files, tmp_path / "index")
    assert cold.keeps("AverageMeter", "update", 0, None) is not None
    assert reads == ["utils/meters.py"]
    warm = RepoIndex(files, tmp_path / "index")
    assert warm.keeps("AverageMeter", "update", 0, None) == cold.keeps("AverageMeter", "update", 0, None)
    assert reads == ["utils/meters.py"]


def test_a_script_that_reads_its_tensor_again_keeps_the_helper_reported(repo: Repo, tmp_path: Path) -> None:
    repo.write("spaces.py", ACTION_SPACE)
    repo.write("policy.py", POLICY_DROPS)
    repo.write("rollout.py", "import torch\nfrom spaces import GripperSpace\n\naction = torch.randn(1, 14)\nclean = GripperSpace().postprocess(action)\nprint(action.sum(), clean.sum())\n")
    repo.commit("a policy that drops its action, and a script that reads it again")
    assert _whole_file(repo, tmp_path, "spaces.py") == [("RC102", 8)]


SAMPLING = """
import torch


def denoise(model, latents, steps):
    for t_curr, t_prev in zip(steps[:-1], steps[1:]):
        pred = model(latents, t_curr)
        latents = latents + (t_prev - t_curr) * pred
    return latents


def generate(model, noise, steps):
    return denoise(model, noise, steps)
"""

INFER_NO_GRAD = """
import torch
from sampling import generate


@torch.no_grad()
def infer(model, noise, steps):
    return generate(model, noise, steps)


def validate(model, noise, steps):
    with torch.no_grad():
        return generate(model, noise, steps)
"""

FINETUNE_WITH_GRAD = """
import torch
from sampling import generate


def finetune(model, noise, steps, optimizer):
    loss = generate(model, noise, steps).pow(2).mean()
    loss.backward()
    optimizer.step()
"""


def test_a_loop_every_caller_elsewhere_runs_without_grad_keeps_no_graph(repo: Repo, tmp_path: Path) -> None:
    # `denoise` is reached only through `generate`, which other files call under
    # `@torch.no_grad()` or `with torch.no_grad():` (torchtitan's Flux sampling): its update
    # of `latents` builds no graph. One caller with autograd on brings the finding back.
    repo.write("sampling.py", SAMPLING)
    repo.write("infer.py", INFER_NO_GRAD)
    repo.write("tests/test_sampling.py", "from sampling import generate\n\ndef test_shape(model, noise, steps):\n    assert generate(model, noise, steps).shape == noise.shape\n")
    repo.commit("sampling, called without grad (and by a test)")
    assert _whole_file(repo, tmp_path, "sampling.py") == []
    repo.write("finetune.py", FINETUNE_WITH_GRAD)
    repo.commit("a caller that backpropagates through the sampler")
    assert _whole_file(repo, tmp_path, "sampling.py") == [("RC251", 7)]


def test_a_folder_outside_git_answers_from_what_its_files_say_now(tmp_path: Path) -> None:
    # The texts of a plain folder are kept between the index's questions, so a review of an
    # installed package reads each file once; a file changed since must be read again.
    import os

    from review_copies.source.tree import FolderFiles

    helper = tmp_path / "pkg" / "helpers.py"
    helper.parent.mkdir()
    helper.write_text("def scale(x):\n    return x * 2\n")
    files = FolderFiles((tmp_path / "pkg",), tmp_path)
    assert files.mentioning("scale_(") == []
    helper.write_text("def scale(x):\n    return x.mul_(2)  # scale_( in place\n")
    stat = helper.stat()
    os.utime(helper, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert files.mentioning("scale_(") == ["pkg/helpers.py"]


EMBEDDINGS = """
import torch
from torch import nn


def fast_learn(u: nn.Embedding, v: nn.Embedding, nodes, lr):
    emb_u = u.weight[nodes]
    emb_v = v.weight[nodes]
    score = torch.sigmoid(torch.mul(emb_u, emb_v).sum(dim=1, keepdim=True))
    grad_v = (1 - score) * emb_u * lr
    v.weight.data.index_add_(0, nodes, grad_v)
    return score
"""

TRAIN_WITHOUT_GRAD = """
import torch
from model import fast_learn


def train(u, v, walks, lr):
    with torch.no_grad():
        for nodes in walks:
            fast_learn(u, v, nodes, lr)
"""


def test_a_data_write_every_caller_elsewhere_runs_without_grad_hides_nothing_from_autograd(repo: Repo, tmp_path: Path) -> None:
    # A hand-written embedding update (DGL's DeepWalk) called only under `with
    # torch.no_grad():` in another file: nothing is saved for a backward, so the `.data`
    # update cannot corrupt one. A caller with autograd on brings the finding back (the
    # returned score holds the graph that saved the embeddings).
    repo.write("model.py", EMBEDDINGS)
    repo.write("deepwalk.py", TRAIN_WITHOUT_GRAD)
    repo.commit("a hand-written update, called without grad")
    assert _whole_file(repo, tmp_path, "model.py") == []
    repo.write("finetune.py", "from model import fast_learn\n\n\ndef finetune(u, v, nodes, lr):\n    fast_learn(u, v, nodes, lr)\n")
    repo.commit("a caller with autograd on")
    assert _whole_file(repo, tmp_path, "model.py") == [("RC203", 10)]


EXPERIMENTS = """
import numpy as np
import torch


def save_samples(model, batch, out_dir):
    samples = model(batch).cpu()
    for k in range(samples.shape[0]):
        np.save(f"{out_dir}/{k}", samples[k].numpy())


EXPERIMENTS = {"samples": save_samples}
"""

RUN_EXPERIMENTS = """
import torch
from experiments import EXPERIMENTS


def run(model, batch, out_dir, names):
    model.eval()
    with torch.no_grad():
        for name in names:
            EXPERIMENTS[name](model, batch, out_dir)
"""


def test_a_function_reached_only_through_a_dispatch_table_called_without_grad_holds_no_graph(repo: Repo, tmp_path: Path) -> None:
    # A research repository's experiments, registered in a table and run by name under
    # `with torch.no_grad():` in main.py: the sampled tensors hold no graph and `.numpy()`
    # does not raise. A call through the table with autograd on brings the finding back.
    repo.write("experiments.py", EXPERIMENTS)
    repo.write("main.py", RUN_EXPERIMENTS)
    repo.commit("experiments run by name, without grad")
    assert _whole_file(repo, tmp_path, "experiments.py") == []
    repo.write("finetune.py", "from experiments import EXPERIMENTS\n\n\ndef probe(model, batch, out_dir):\n    EXPERIMENTS['samples'](model, batch, out_dir)\n")
    repo.commit("a call through the table with autograd on")
    assert _whole_file(repo, tmp_path, "experiments.py") == [("RC321", 8)]


SEARCH = """
import torch
from torch import nn


def search(model: nn.Module, encoder_out, ys_log_probs):
    log_probs = model.joiner(encoder_out).log_softmax(dim=-1)
    log_probs.add_(ys_log_probs)
    return log_probs.topk(4)
"""

DECODE = """
import torch
from beam_search import search


def decode_one_batch(model, batch):
    return search(model, batch, batch)


def decode_dataset(model, loader):
    return [decode_one_batch(model, batch) for batch in loader]


{decorator}
def main(model, loader):
    return decode_dataset(model, loader)
"""

# Another recipe's own `decode_dataset`, run with autograd on; a third recipe's own search,
# imported from its own folder and run with autograd on.
PPL = """
import torch


def decode_dataset(model, loader):
    return [model(batch) for batch in loader]


def main(model, loader):
    return decode_dataset(model, loader)
"""

OTHER_RECIPE = """
from beam_search import search


def score(model, chunk):
    return search(model, chunk, chunk)[0].sum()


def main(model, chunk):
    score(model, chunk).backward()
"""


def _search_findings(repo: Repo, tmp_path: Path, decorator: str) -> list[tuple[str, str]]:
    repo.write("recipe_a/beam_search.py", SEARCH)
    repo.write("recipe_a/decode.py", DECODE.format(decorator=decorator))
    repo.write("recipe_b/compute_ppl.py", PPL)
    repo.write("recipe_c/beam_search.py", SEARCH)
    repo.write("recipe_c/train.py", OTHER_RECIPE)
    repo.commit("recipes")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    return [(f["path"], f["rule"]) for f in result.json["findings"]]


def test_a_search_every_caller_chain_of_which_starts_under_no_grad_saves_nothing(repo: Repo, tmp_path: Path) -> None:
    # The callers are followed up to `main`'s @torch.no_grad(); another recipe's own
    # `decode_dataset`, and a third recipe's `train.py` that imports its own folder's `search`
    # (both run with autograd on), are not callers of this one.
    assert ("recipe_a/beam_search.py", "RC201") not in _search_findings(repo, tmp_path, "@torch.no_grad()")


def test_a_search_reached_with_autograd_on_is_still_reported(repo: Repo, tmp_path: Path) -> None:
    assert ("recipe_a/beam_search.py", "RC201") in _search_findings(repo, tmp_path, "")


def test_the_index_follows_callers_of_this_definition_not_of_its_namesakes() -> None:
    recipe = {"a/beam_search.py": _dedent(SEARCH), "a/decode.py": _dedent(DECODE.format(decorator="@torch.no_grad()"))}
    assert RepoIndex(Files(recipe)).called_grad_off("search", "function", origin="a/beam_search.py")
    # Another file's own `decode_dataset`, and a file that imports its own folder's `search`.
    namesakes = {**recipe, "b/compute_ppl.py": _dedent(PPL), "c/beam_search.py": _dedent(SEARCH), "c/train.py": _dedent(OTHER_RECIPE)}
    assert RepoIndex(Files(namesakes)).called_grad_off("search", "function", origin="a/beam_search.py")
    # Without knowing which definition is asked about, c's caller counts and vetoes.
    assert not RepoIndex(Files(namesakes)).called_grad_off("search", "function")
    # A caller that takes it through a package's `__init__` (which re-exports it) is its caller.
    package = {
        "lib/__init__.py": "from .beam import search\n",
        "lib/beam.py": _dedent(SEARCH),
        "lib/decode.py": _dedent(DECODE.format(decorator="@torch.no_grad()")).replace("from beam_search import search", "from .beam import search"),
        "app/run.py": "from lib import search\n\n\ndef score(model, x):\n    return search(model, x, x)[0].sum()\n",
    }
    assert RepoIndex(Files(package)).called_grad_off("search", "function", origin="lib/beam.py") is False
    assert RepoIndex(Files({k: v for k, v in package.items() if k != "app/run.py"})).called_grad_off("search", "function", origin="lib/beam.py")
    # A file that defines no `decode_dataset` of its own and calls one with autograd on does veto.
    vetoed = RepoIndex(Files({**recipe, "b/compute_ppl.py": _dedent(PPL).replace("def decode_dataset(model, loader):\n    return [model(batch) for batch in loader]\n", "")}))
    assert not vetoed.called_grad_off("search", "function", origin="a/beam_search.py")


HANDLER = """
import torch
import torch.nn.functional as F


class Handler:
    def __init__(self):
        self.probs = []

    def {name}(self, model, image):
        probs = F.softmax(model(image=image), dim=1)
        self.probs.append(probs)


@torch.no_grad()
def evaluate(loader, model, handler):
    for image in loader:
        handler.{name}(model=model, image=image)
"""


def test_a_handlers_method_called_only_from_a_no_grad_loop_runs_with_autograd_off(repo: Repo, tmp_path: Path) -> None:
    # torchscale's LongViT engine: `evaluate` is `@torch.no_grad()` and is the one caller of
    # the handler's `eval_batch`, so the probabilities it keeps carry no graph. A method a
    # framework calls for the repository (`validation_step`) may be called with autograd on.
    repo.write("engine.py", HANDLER.format(name="eval_batch"))
    repo.write("lit.py", HANDLER.format(name="validation_step"))
    repo.commit("an evaluation handler")
    assert _whole_file(repo, tmp_path, "engine.py") == []
    assert _whole_file(repo, tmp_path, "lit.py") == [("RC252", 11)]


GATHER_LOOP = """
def forward(self, x, x_0, convs, norm):
    x = self.propagate(x)
    out = self.transformation(x, x_0)
    for conv in convs:
        bar = spmm(out).detach()
        if norm:
            emb = norm(conv.transformation(bar, x_0))
        else:
            emb = conv.transformation(bar, x_0)
        out = push(emb)
    return out
"""


def _first_argument_kept(text: str) -> list[bool]:
    return [c["pos"][0] in c["kept"] for c in file_facts(text)["calls"] if c["callee"] == "transformation"]


def test_what_a_call_passed_is_read_again_only_where_that_value_can_still_be_reached() -> None:
    # The other arm of the `if` never runs after this one in the same pass, and the next pass
    # binds `bar` anew before reading it; `x` was the caller's, but the body bound it anew
    # before handing it over.
    assert _first_argument_kept(_dedent(GATHER_LOOP)) == [False, False, False]
    shared = _dedent(GATHER_LOOP).replace("        out = push(emb)\n", "        out = push(emb, bar)\n")
    assert _first_argument_kept(shared) == [False, True, True]
    theirs = _dedent(GATHER_LOOP).replace("    x = self.propagate(x)\n", "")
    assert _first_argument_kept(theirs) == [True, False, False]


SOFTCAP = """
import torch
from torch import nn


class Head(nn.Module):
    def forward(self, hidden):
        logits = torch.tanh(self.proj(hidden) / self.softcap)
        logits *= self.softcap
        return logits
"""


def test_a_package_that_turns_autograd_off_when_imported_runs_its_modules_without_a_graph(repo: Repo, tmp_path: Path) -> None:
    # An inference server's `models/__init__.py` runs `torch.set_grad_enabled(False)` at
    # import (text-generation-inference): `tanh` saves no output there, so scaling it in
    # place breaks no backward. A call inside a function of the `__init__` turns nothing off
    # at import, and the finding stays.
    repo.write("server/models/heads/gemma.py", SOFTCAP)
    repo.write("server/models/__init__.py", "import torch\n\n\ndef serve():\n    torch.set_grad_enabled(False)\n")
    repo.commit("a head with a soft cap")
    assert _whole_file(repo, tmp_path, "server/models/heads/gemma.py") == [("RC201", 8)]
    repo.write("server/models/__init__.py", "import torch\n\n# Disable gradients\ntorch.set_grad_enabled(False)\n")
    repo.commit("the package turns autograd off")
    assert _whole_file(repo, tmp_path, "server/models/heads/gemma.py") == []


CHOOSER = """
import torch


class Chooser:
    def __call__(self, ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        scores[:, 0] = float("-inf")
        return scores.argmax(-1)
"""

GENERATE = """
from chooser import Chooser


class Batch:
    def __init__(self, ids):
        self.ids = ids
        self.chooser = Chooser()


def step(model, batch):
    logits = model(batch.ids)
    return batch.chooser(batch.ids, logits)
"""


SAMPLE_AND_LOG = """
from chooser import Chooser


def sample(model, ids, log):
    chooser = Chooser()
    logits = model(ids)
    token = chooser(ids, logits)
    log(logits)
    return token
"""


def test_an_object_call_is_a_call_of_its_class_dunder_call(repo: Repo, tmp_path: Path) -> None:
    # A token chooser masks the scores it is handed (text-generation-inference's
    # `HeterogeneousNextTokenChooser`); its instances are called as `batch.chooser(...)`, never
    # by the name `__call__`. The one caller passes fresh logits it never reads again: the
    # write is invisible. A caller that logs the logits after choosing brings it back.
    repo.write("chooser.py", CHOOSER)
    repo.write("generate.py", GENERATE)
    repo.commit("a chooser")
    assert _whole_file(repo, tmp_path, "chooser.py") == []
    repo.write("sample.py", SAMPLE_AND_LOG)
    repo.commit("a caller that reads the logits again")
    assert _whole_file(repo, tmp_path, "chooser.py") == [("RC102", 6)]


SPLINE = """
import torch


class Spline:
    def _elementwise(self, inputs, params):
        transform = params.view(inputs.shape[0], inputs.shape[1], 16)
        widths = transform[..., :8]
        widths /= 8.0
        return inputs * widths.softmax(-1).sum(-1)

    def _elementwise_forward(self, inputs, params):
        return self._elementwise(inputs, params)
"""

FLOW = """
from spline import Spline


class Flow(Spline):
    def forward(self, inputs):
        params = self.net(inputs)
        return self._elementwise_forward(inputs, params)
"""


def test_a_wrapper_that_hands_its_parameter_on_drops_what_its_callers_drop(repo: Repo, tmp_path: Path) -> None:
    # normalizing-flows' spline: `_elementwise` scales a slice of the parameters it is
    # handed in place, and is reached only through `_elementwise_forward`, a one-line
    # wrapper whose callers pass a fresh network output they never read again. A caller of
    # the wrapper that reads the parameters afterwards brings the finding back.
    repo.write("spline.py", SPLINE)
    repo.write("flow.py", FLOW)
    repo.commit("a spline flow")
    assert _whole_file(repo, tmp_path, "spline.py") == []
    repo.write("flow.py", FLOW.replace("return self._elementwise_forward(inputs, params)", "out = self._elementwise_forward(inputs, params)\n        return out, params.norm()"))
    repo.commit("the flow reports its parameters' norm")
    assert _whole_file(repo, tmp_path, "spline.py") == [("RC102", 8)]


WINDOW = """
import torch


def hann2d_clipped(sz: torch.Tensor, effective_sz: torch.Tensor) -> torch.Tensor:
    effective_sz += (effective_sz - sz) % 2
    return torch.ones(int(effective_sz[0]), int(effective_sz[1]))
"""

TRACKER = """
from window import hann2d_clipped


class Tracker:
    def initialize(self, output_sz, area, scale):
        self.window = hann2d_clipped(output_sz.long(), (output_sz * area / scale).long())
"""


def test_a_method_of_a_new_value_passed_elsewhere_is_no_one_elses(repo: Repo, tmp_path: Path) -> None:
    # pytracking's `hann2d_clipped` evens out the size it is handed in place; its callers
    # hand it `(sz * area / scale).long()`, a conversion of a new product that no one else
    # holds. A caller that passes its own size and reads it again brings the finding back.
    repo.write("window.py", WINDOW)
    repo.write("tracker.py", TRACKER)
    repo.commit("a clipped window")
    assert _whole_file(repo, tmp_path, "window.py") == []
    repo.write("search.py", "from window import hann2d_clipped\n\n\ndef search(sz, effective):\n    window = hann2d_clipped(sz, effective)\n    return window, effective\n")
    repo.commit("a caller that reads its size again")
    assert _whole_file(repo, tmp_path, "window.py") == [("RC102", 5)]



BEAM_STEP = """
import torch


class BeamSearch:
    def step(self, step, lprobs, scores):
        bsz, beam_size, vocab_size = lprobs.size()
        lprobs.add_(scores[:, :, step - 1].unsqueeze(-1))
        top = torch.topk(lprobs.view(bsz, -1), k=2 * beam_size)
        return top.values, top.indices
"""

STEP_CALLER = """
import torch


class SequenceGenerator:
    def generate(self, model, tokens, bsz, beam_size):
        scores = torch.zeros(bsz, beam_size, 10)
        for step in range(10):
            lprobs = model(tokens).log_softmax(-1)
            lprobs[:, 0] = -1e9
            cand_scores, cand_indices = self.search.step(step, lprobs.view(bsz, beam_size, -1), scores)
            scores[:, :, step] = cand_scores[:, :beam_size]
        return scores
"""


def test_a_view_of_a_name_the_caller_never_reads_again_is_dropped_with_it(repo: Repo, tmp_path: Path) -> None:
    # fairseq's beam search adds the running scores into the log-probabilities it is handed;
    # its one caller passes `lprobs.view(...)`, a view of a name it rebinds before reading it
    # again: the write is invisible. A caller that reads `lprobs` after the step sees it.
    repo.write("search.py", BEAM_STEP)
    repo.write("generator.py", STEP_CALLER)
    repo.commit("a beam search")
    assert _whole_file(repo, tmp_path, "search.py") == []
    repo.write("generator.py", STEP_CALLER.replace("        return scores", "        return scores, lprobs.max()"))
    repo.commit("the generator reports the last step's best log-probability")
    assert _whole_file(repo, tmp_path, "search.py") == [("RC102", 7)]


INSERTIONS = """
import torch


def _apply_ins_masks(in_tokens, mask_ins_pred, padding_idx, eos_idx):
    in_masks = in_tokens.ne(padding_idx)
    in_tokens.masked_fill_(~in_masks, eos_idx)
    out_lengths = in_masks.sum(1) + mask_ins_pred.sum(1)
    out_tokens = in_tokens.new_full((in_tokens.size(0), int(out_lengths.max())), padding_idx)
    out_tokens[:, : in_tokens.size(1)] = in_tokens
    return out_tokens, out_lengths
"""

DECODER = """
from insertions import _apply_ins_masks


def forward_decoder(output_tokens, mask_ins_pred, pad, eos, max_lens):
    can_ins_mask = output_tokens.ne(pad).sum(1) < max_lens
    tokens, lengths = _apply_ins_masks(output_tokens[can_ins_mask], mask_ins_pred, pad, eos)
    output_tokens[can_ins_mask] = tokens[:, : output_tokens.size(1)]
    return output_tokens, lengths
"""


def test_an_index_by_a_boolean_mask_passes_a_copy(repo: Repo, tmp_path: Path) -> None:
    # fairseq's Levenshtein decoder hands `_apply_ins_masks` the rows a comparison selected,
    # `output_tokens[can_ins_mask]`: indexing by a boolean tensor copies, so the helper's
    # write lands in a copy, though the caller reads `output_tokens` again. An index by a
    # name that is not a mask (a row number) is a view, and brings the finding back.
    repo.write("insertions.py", INSERTIONS)
    repo.write("decoder.py", DECODER)
    repo.commit("insertions")
    assert _whole_file(repo, tmp_path, "insertions.py") == []
    repo.write("decoder.py", DECODER.replace("can_ins_mask = output_tokens.ne(pad).sum(1) < max_lens", "can_ins_mask = int(max_lens) - 1"))
    repo.commit("the decoder inserts into one row")
    assert _whole_file(repo, tmp_path, "insertions.py") == [("RC102", 6)]


POOL = """
import torch


def pool(last_hidden, attention_mask):
    attention_mask *= attention_mask.cumsum(dim=1)
    weighted = last_hidden * attention_mask.unsqueeze(-1).float()
    return weighted.sum(1) / attention_mask.sum(1, keepdim=True).float()
"""

ENCODE = """
from pool import pool


def encode(encoder, tokenizer, texts):
    embeddings = []
    for chunk in texts:
        batch_dict = tokenizer(chunk, return_tensors="pt")
        outputs = encoder(**batch_dict)
        embeddings.append(pool(outputs.last_hidden_state, batch_dict["attention_mask"]))
    return embeddings
"""


def test_an_item_of_a_name_the_caller_never_reads_again_is_dropped_with_it(repo: Repo, tmp_path: Path) -> None:
    # E5's position-weighted pooling turns the attention mask it is handed into positions, in
    # place; its caller passes `batch_dict["attention_mask"]` from a batch it rebinds on the
    # next pass without reading it again. A caller that counts tokens from the batch's mask
    # afterwards would count positions: the finding comes back.
    repo.write("pool.py", POOL)
    repo.write("encode.py", ENCODE)
    repo.commit("pooling")
    assert _whole_file(repo, tmp_path, "pool.py") == []
    repo.write("encode.py", ENCODE.replace("    return embeddings", "        print(batch_dict['attention_mask'].sum())\n    return embeddings"))
    repo.commit("the encoder logs how many tokens each batch had")
    assert _whole_file(repo, tmp_path, "pool.py") == [("RC102", 5)]



PPOSE_NMS = """
import torch


def pose_nms(bboxes, pose_preds, pose_scores):
    return pose_nms_body(bboxes, pose_preds, pose_scores)


def pose_nms_body(bboxes, pose_preds, pose_scores):
    pose_scores[pose_scores == 0] = 1e-5
    keep = pose_scores.mean(dim=(1, 2)) > 0.1
    return bboxes[keep], pose_preds[keep], pose_scores[keep]
"""

WRITER = """
import torch
from ppose_nms import pose_nms


def update(boxes, coords, scores):
    preds_img = torch.cat(coords)
    preds_scores = torch.cat(scores)
    boxes, preds_img, preds_scores = \\
        pose_nms(boxes, preds_img, preds_scores)
    return [(preds_img[k], preds_scores[k].mean()) for k in range(len(boxes))]
"""


def test_a_caller_that_rebinds_the_name_in_a_statement_over_two_lines_drops_it(repo: Repo, tmp_path: Path) -> None:
    # AlphaPose's pose NMS fixes zero scores in the scores it is handed; its wrapper hands on
    # its own argument, and the one caller of the wrapper rebinds `preds_scores` to the result
    # in the very statement, written over two lines: what it reads afterwards is the result.
    # A caller that reads the scores it passed brings the finding back.
    repo.write("ppose_nms.py", PPOSE_NMS)
    repo.write("writer.py", WRITER)
    repo.commit("pose NMS")
    assert _whole_file(repo, tmp_path, "ppose_nms.py") == []
    repo.write("writer.py", WRITER.replace("boxes, preds_img, preds_scores = \\\n", "boxes, preds_img, kept_scores = \\\n"))
    repo.commit("the writer keeps the raw scores beside the kept ones")
    assert _whole_file(repo, tmp_path, "ppose_nms.py") == [("RC102", 9)]



SAMPLER = """
import torch
import torch.nn.functional as F


class Sampler:
    @staticmethod
    def top_k_logits(logits, top_k=0, filter_value=-float("Inf")):
        if top_k > 0:
            indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
            logits[indices_to_remove] = filter_value
        return logits.view(1, -1).contiguous()

    def sample(self, model, tokens):
        logits = model(tokens)[:, -1, :]
        logits = self.top_k_logits(
            logits,
            top_k=8)
        return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
"""


def test_a_static_methods_first_parameter_is_what_the_call_passes_first(repo: Repo, tmp_path: Path) -> None:
    # PLUG's `top_k_logits` is a `@staticmethod`: `self.top_k_logits(logits, ...)` passes
    # `logits` for its first parameter, which is no `self`. Its one caller rebinds `logits`
    # to the result, so the write is invisible; a caller that keeps the raw logits sees it.
    repo.write("sampler.py", SAMPLER)
    repo.commit("top-k sampling")
    assert _whole_file(repo, tmp_path, "sampler.py") == []
    kept = SAMPLER.replace("        logits = self.top_k_logits(\n", "        kept = self.top_k_logits(\n")
    repo.write("sampler.py", kept.replace("F.softmax(logits, dim=-1)", "F.softmax(kept, dim=-1) + 0 * logits"))
    repo.commit("sample from the kept logits")
    assert _whole_file(repo, tmp_path, "sampler.py") == [("RC102", 10)]



ENCODE_LOADER = """
import tqdm
from torch.utils.data import DataLoader
from pool import pool


def encode(encoder, dataset, collate, texts):
    loader = DataLoader(dataset, batch_size=64, collate_fn=collate)
    embeddings = []
    for batch_dict in tqdm.tqdm(loader, disable=len(texts) < 128):
        batch_dict = {k: v.cuda() for k, v in batch_dict.items()}
        outputs = encoder(**batch_dict)
        embeddings.append(pool(outputs.last_hidden_state, batch_dict["attention_mask"]))
    return embeddings
"""


def test_a_loop_target_is_bound_anew_at_each_pass(repo: Repo, tmp_path: Path) -> None:
    # The E5 evaluation loop as it was when the in-place pooling came in: the batch is the
    # loop's target, and the next pass's `batch_dict` is the next batch, not the one whose
    # mask `pool` wrote. Items of a list the caller was handed (which it, or its own caller,
    # may read again) are another matter: the finding stays.
    repo.write("pool.py", POOL)
    repo.write("encode.py", ENCODE_LOADER)
    repo.commit("pooling over a data loader")
    assert _whole_file(repo, tmp_path, "pool.py") == []
    repo.write("encode.py", ENCODE_LOADER.replace("tqdm.tqdm(loader, disable=len(texts) < 128)", "batches").replace("dataset, collate, texts", "batches"))
    repo.commit("pooling over the batches the caller hands in")
    assert _whole_file(repo, tmp_path, "pool.py") == [("RC102", 5)]

def test_a_change_that_makes_a_helper_write_its_argument_is_quiet_when_no_caller_reads_it_again(repo: Repo, tmp_path: Path) -> None:
    # The pull request that added E5's position-weighted pooling (`attention_mask *= ...`):
    # the base version did not write the mask, but the one caller hands over a batch's mask
    # and never reads that batch again, so no caller sees the change. A caller that counts
    # tokens from the mask afterwards is told.
    repo.write("pool.py", POOL.replace("attention_mask *= attention_mask.cumsum(dim=1)", "attention_mask = attention_mask * attention_mask.cumsum(dim=1)"))
    repo.write("encode.py", ENCODE)
    repo.commit("pooling")
    repo.write("pool.py", POOL)
    repo.commit("position-weighted pooling, in place")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert result.json["findings"] == []
    repo.write("encode.py", ENCODE.replace("    return embeddings", "        print(batch_dict['attention_mask'].sum())\n    return embeddings"))
    repo.commit("the encoder logs how many tokens each batch had")
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~2", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert [(f["path"], f["line"]) for f in result.json["findings"]] == [("pool.py", 5)]
    assert "This change makes `pool` write into its argument `attention_mask`" in result.json["findings"][0]["message"]


TRACKER_UTILS = "\nimport torch\n\n" + METER + """

class LossTracker:
    def __init__(self):
        self.losses = AverageMeter()

    def update(self, loss, output, target):
        self.losses.update(loss.item(), {n})
"""

TRACKED_TRAINING = """
import torch
from utils import LossTracker


def train(loader, model, criterion, optimizer):
    tracker = LossTracker()
    for images, target in loader:
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tracker.update(loss, output, target)
    return tracker.losses.sum / tracker.losses.count
"""


def test_what_a_tracker_keeps_of_an_output_is_its_size_not_its_graph(repo: Repo, tmp_path: Path) -> None:
    # DeepSpeed's ViT example: `LossTracker.update` keeps `loss.item()` and
    # `output.size(0)`, numbers both. A tracker that weighs by `output.sum()` keeps its graph.
    repo.write("utils.py", TRACKER_UTILS.format(n="output.size(0)"))
    repo.write("train.py", TRACKED_TRAINING)
    repo.commit("a tracker of numbers")
    assert _whole_file(repo, tmp_path, "train.py") == []
    repo.write("utils.py", TRACKER_UTILS.format(n="output.sum()"))
    repo.commit("the tracker weighs by the outputs' sum")
    assert _whole_file(repo, tmp_path, "train.py") == [("RC254", 13)]

AVERAGER = """
class Averager:
    def __init__(self):
        self.n_count, self.sum = 0, 0

    def add(self, v):
        count = v.data.numel()
        v = v.data.sum()
        self.n_count += count
        self.sum += v
"""


def test_an_accumulator_that_rebinds_its_argument_through_data_keeps_no_graph(repo: Repo, tmp_path: Path) -> None:
    # EasyOCR's `Averager.add`: `v = v.data.sum()` before `self.sum += v` keeps a value
    # without a graph, so `loss_avg.add(cost)` keeps no step's graph. Accumulating `v` itself
    # keeps them all.
    repo.write("utils/__init__.py", "")
    repo.write("utils/meters.py", AVERAGER)
    repo.write("train.py", TRAIN.replace("AverageMeter", "Averager").replace("losses.update(loss, x.size(0))", "losses.add(loss)"))
    repo.commit("an averager over .data")
    assert _whole_file(repo, tmp_path, "train.py") == []
    repo.write("utils/meters.py", AVERAGER.replace("v = v.data.sum()", "total = v.data.sum()"))
    repo.commit("the averager keeps the argument itself")
    assert _whole_file(repo, tmp_path, "train.py") == [("RC254", 12)]


HEATMAP = """
import torch


def _sigmoid(x):
    y = torch.clamp(x.sigmoid_(), min=1e-4, max=1 - 1e-4)
    return y
"""

LOSS = """
from heads import _sigmoid


class CtdetLoss:
    def forward(self, outputs, batch):
        output = outputs[-1]
        output["hm"] = _sigmoid(output["hm"])
        return self.crit(output["hm"], batch["hm"])
"""


def test_a_caller_that_puts_the_result_where_the_argument_was_drops_the_argument(repo: Repo, tmp_path: Path) -> None:
    # CenterNet's `_sigmoid` squashes the heatmap it is handed in place; every caller stores
    # the result back in the slot it took the heatmap from (`output["hm"] = _sigmoid(output["hm"])`),
    # so the old tensor is read through that slot no more. A caller that keeps the slot's
    # tensor under another slot brings the finding back.
    repo.write("heads.py", HEATMAP)
    repo.write("loss.py", LOSS)
    repo.commit("a heatmap loss")
    assert _whole_file(repo, tmp_path, "heads.py") == []
    repo.write("debug.py", "from heads import _sigmoid\n\n\ndef show(output):\n    output['prob'] = _sigmoid(output['hm'])\n    return output\n")
    repo.commit("a caller that keeps the logits")
    assert _whole_file(repo, tmp_path, "heads.py") == [("RC102", 5)]


HARNESS_TEST = """
import torch


class TestInplace:
    def test_inplace_view_modify_base(self):
        r = torch.ones(1, requires_grad=True)
        x = torch.ones(5)

        def fn(r, x):
            v = x.select(0, 1)
            x.add_(r)
            v.sum().backward()
            return r.grad

        self.runAtenTest((r, x), {call})
"""


def test_a_tests_closure_handed_to_its_harness_may_write_its_argument(repo: Repo, tmp_path: Path) -> None:
    # pytorch/xla's op tests hand a closure to `runAtenTest`, which runs it on CPU and XLA
    # copies of the inputs: the in-place write is what the test checks. The same closure
    # called directly, its result kept while `x` is still in hand, is reported.
    repo.write("tests/test_ops.py", HARNESS_TEST.format(call="fn"))
    repo.commit("a harnessed op test")
    assert _whole_file(repo, tmp_path, "tests/test_ops.py") == []
    repo.write("tests/test_ops.py", HARNESS_TEST.format(call="fn") + "        grad = fn(r, x)\n        assert x.sum() > 0 and grad is not None\n")
    repo.commit("the closure called directly as well")
    assert _whole_file(repo, tmp_path, "tests/test_ops.py") == [("RC102", 11)]


TRANSFORM_TEST = """
import torch


def test_inplace_cases(executor):
    def f(x):
        x.add_(1)
        return x * 2

    def g(x):
        y = x.view(-1)
        y.mul_(2)
        return y

    for fn in {cases}:
        a = torch.randn(2, 3)
        a_ = a.clone().detach()
        jfn = executor.make_callable(fn)
        torch.testing.assert_close(jfn(a), fn(a_))
"""


def test_a_tests_cases_run_against_a_transformed_copy_may_write_their_arguments(repo: Repo, tmp_path: Path) -> None:
    # lightning-thunder's alias tests: each case writes into its argument on purpose, and the
    # test compares the jitted run with the eager one. Listed in a table of cases (or handed
    # to a transform whose result is called), a closure is the test's subject; a closure of
    # the same shape outside a test file is still reported.
    repo.write("tests/test_aliases.py", TRANSFORM_TEST.format(cases="[f, g]"))
    repo.write("aliases.py", TRANSFORM_TEST.format(cases="[f, g]"))
    repo.commit("alias cases")
    assert _whole_file(repo, tmp_path, "tests/test_aliases.py") == []
    assert _whole_file(repo, tmp_path, "aliases.py") == [("RC102", 6), ("RC102", 11)]


INCEPTION = """
import torch
from torch import nn


class InceptionV3(nn.Module):
    def __init__(self, blocks, requires_grad=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        for param in self.parameters():
            param.requires_grad = requires_grad

    def forward(self, x):
        return [self.conv(x)]
"""

SCORE = """
import torch
from inception import InceptionV3


def activations(batches, model):
    return [model(batch)[0][:, :, 0, 0].cpu().numpy() for batch in batches]


def statistics(batches, cuda):
    model = InceptionV3([3])
    if cuda:
        model = model.cuda()
    return activations(batches, model)
"""


@pytest.mark.parametrize(
    ("freeze", "expected"),
    [("requires_grad=False", []), ("requires_grad=True", ["RC321"]), ("requires_grad_()", ["RC321"]), ("conv unfrozen", ["RC321"])],
)
def test_a_module_whose_constructor_freezes_its_parameters_gives_outputs_numpy_takes(repo: Repo, tmp_path: Path, freeze: str, expected: list[str]) -> None:
    # pytorch-fid's InceptionV3 turns grad off for every parameter: what the caller's loop
    # converts with `.cpu().numpy()` holds no graph. A class that leaves grad on (by default,
    # through `requires_grad_()` with no argument, or for a layer it turns back on after
    # freezing the rest) makes the same conversion raise.
    inception = _dedent(INCEPTION)
    if freeze == "requires_grad=True":
        inception = inception.replace("requires_grad=False):", "requires_grad=True):")
    elif freeze == "requires_grad_()":
        inception = inception.replace("param.requires_grad = requires_grad", "param.requires_grad_()")
    elif freeze == "conv unfrozen":  # frozen, then one layer turned back on for fine-tuning
        inception = inception.replace("param.requires_grad = requires_grad\n", "param.requires_grad = requires_grad\n        self.conv.requires_grad_(True)\n")
    repo.write("inception.py", inception)
    repo.write("score.py", _dedent(SCORE))
    repo.commit("fid score")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", "--fail-on", "none", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert [f["rule"] for f in result.json["findings"] if f["path"] == "score.py"] == expected


UNIT = """
import torch
from torch import nn


class Unit(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3)
        self.gn = nn.GroupNorm(8, width)

    def load_from(self, weights, n_block, n_unit):
        self.gn.weight.copy_(torch.from_numpy(weights[n_block + n_unit + "/scale"]).view(-1))
"""

NET = """
import torch
from torch import nn
from unit import Unit


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.units = nn.ModuleList([Unit(32), Unit(32)])

    def load_from(self, weights):
        with torch.no_grad():
            for i, unit in enumerate(self.units):
                unit.load_from(weights, n_block="block1", n_unit=f"unit{i}")
"""

LOAD_SCRIPT = """
import numpy as np
from net import Net


def main(path):
    net = Net()
    net.load_from(weights=np.load(path))
"""


def test_a_call_that_cannot_bind_to_a_method_is_not_one_of_its_callers(repo: Repo, tmp_path: Path) -> None:
    # TransUNet: the unit's `load_from(weights, n_block, n_unit)` copies into its norm weight
    # and is only called under the network's `with torch.no_grad():`; `net.load_from(weights=...)`
    # in the training script cannot bind to it (no `n_block`), so it is the network's.
    repo.write("unit.py", UNIT)
    repo.write("net.py", NET)
    repo.write("train.py", LOAD_SCRIPT)
    repo.commit("pretrained weights")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert [(f["path"], f["rule"]) for f in result.json["findings"]] == []
    # A call that could bind to it with autograd on still makes the copy an error.
    repo.write("train.py", LOAD_SCRIPT + '\n\ndef refresh(unit, weights):\n    unit.load_from(weights, "block1", "unit0")\n')
    repo.commit("refresh one unit")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert [(f["path"], f["rule"]) for f in result.json["findings"]] == [("unit.py", "RC202")]


METRICS = """
import numpy as np
import torch


def iou_on_batch(masks, pred):
    ious = []
    for i in range(pred.shape[0]):
        pred_tmp = pred[i][0]{move}.detach().numpy()
        pred_tmp[pred_tmp >= 0.5] = 1
        pred_tmp[pred_tmp < 0.5] = 0
        ious.append((pred_tmp == masks[i][0].numpy()).mean())
    return np.mean(ious)
"""

EPOCH = """
from metrics import iou_on_batch


def train_one_epoch(loader, model, criterion, optimizer):
    for images, masks in loader:
        preds = model(images)
        loss = criterion(preds, masks.float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(iou_on_batch(masks, preds), criterion.show_dice(preds, masks.float()))
"""


def test_a_write_through_cpu_numpy_says_it_reaches_the_caller_only_from_the_cpu(repo: Repo, tmp_path: Path) -> None:
    # UCTransNet's metrics binarize `pred[i][0].cpu().detach().numpy()` in place: the caller's
    # predictions change only when they are on the CPU already (training moves them to the
    # GPU, where `.cpu()` copies). The message says so instead of claiming it always does.
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    repo.write("metrics.py", METRICS.format(move=".cpu()"))
    repo.write("train.py", EPOCH)
    repo.commit("metrics")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    [finding] = result.json["findings"]
    assert finding["rule"] == "RC102" and "when `pred` is on the CPU already" in finding["message"]
    # Without the move, `.numpy()` shares the caller's memory wherever it runs.
    repo.write("metrics.py", METRICS.format(move=""))
    repo.commit("no move")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    [finding] = result.json["findings"]
    assert finding["rule"] == "RC102" and "on the CPU" not in finding["message"]


AGENT_BASE = """
import torch


class Agent:
    def record_transition(self, states, rewards):
        self.last_reward = rewards.mean().item()
"""

PPO_AGENT = """
import torch
from agents.base import Agent


class PPO(Agent):
    def record_transition(self, states, rewards):
        super().record_transition(states, rewards)
        rewards {op} 0.99 * self.value(states)
        self.memory.append(rewards)
"""

JAX_AGENT = """
import jax.numpy as jnp
from agents.ppo import PPO


def replay(agent: PPO, states, rewards):
    agent.record_transition(states, rewards)
    return jnp.mean(rewards)
"""

TRAINER = """
import torch


def train(env, agent, steps):
    states = env.reset()
    for _ in range(steps):
        states, rewards = env.step(agent.act(states))
        agent.record_transition(states, rewards)
"""


def test_a_base_class_call_through_super_is_not_a_caller_of_the_method_that_makes_it(repo: Repo, tmp_path: Path) -> None:
    # skrl's time-limit bootstrapping (`rewards += gamma * values * truncated` in each agent's
    # `record_transition`): the agent's own `super().record_transition(states, rewards)`
    # reaches the base class's method, and a JAX file's call passes an array that `+=`
    # cannot change; the one torch caller never reads `rewards` again.
    repo.write("agents/base.py", AGENT_BASE)
    repo.write("agents/ppo.py", PPO_AGENT.format(op="= rewards +"))
    repo.write("agents/jax_replay.py", JAX_AGENT)
    repo.write("trainer.py", TRAINER)
    repo.commit("agents")
    repo.write("agents/ppo.py", PPO_AGENT.format(op="+="))
    repo.commit("bootstrap in place")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert result.json["findings"] == []
    # A subclass's `super().record_transition(...)` does reach PPO's, and reads `rewards` after.
    logged = "from agents.ppo import PPO\n\n\nclass LoggedPPO(PPO):\n    def record_transition(self, states, rewards):\n"
    repo.write("agents/logged.py", logged + "        super().record_transition(states, rewards)\n        print(rewards.sum())\n")
    repo.commit("log the rewards each step")
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~2", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert [(f["path"], f["rule"]) for f in result.json["findings"]] == [("agents/ppo.py", "RC112")]
    assert "(`agents/logged.py:6` passes `rewards` and reads it again)" in result.json["findings"][0]["message"]


SCALE_BOXES = """
import torch


def scale_boxes(img1_shape, boxes: torch.Tensor, img0_shape) -> torch.Tensor:
    gain = min(img1_shape[0] / img0_shape[0], img1_shape[1] / img0_shape[1])
    boxes[..., 0] -= (img1_shape[1] - img0_shape[1] * gain) / 2
    boxes[..., 1] -= (img1_shape[0] - img0_shape[0] * gain) / 2
    boxes[..., :4] /= gain
    return boxes.clamp(min=0)
"""

PREDICT = """
import ops


def postprocess(raw, shape, orig_shape):
    boxes = ops.scale_boxes(shape, raw, orig_shape)
    return boxes, raw.amax()
"""

VALIDATE = """
import ops


def prepare_labels(bbox, imgsz, ori_shape):
    ops.scale_boxes(imgsz, bbox, ori_shape)  # native-space labels
    return {"bboxes": bbox}
"""


def test_a_helper_the_repository_calls_for_its_write_is_not_reported(repo: Repo, tmp_path: Path) -> None:
    # yolov10's `ops.scale_boxes`: it shifts and scales the boxes it is handed and returns
    # them clipped; a validator calls it as a statement and then uses `bbox`, so the write
    # is what the repository calls it for, not a change behind a caller's back.
    repo.write("ops.py", SCALE_BOXES)
    repo.write("predict.py", PREDICT)
    repo.commit("scale boxes back to the original image")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert [(f["path"], f["rule"]) for f in result.json["findings"]] == [("ops.py", "RC102")]
    repo.write("val.py", VALIDATE)
    repo.commit("labels in native space")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert result.json["findings"] == []


EMA_KEEPS = """\
import torch


class Ema:
    def __init__(self, source, target, decay=0.999):
        self.source, self.target, self.decay = source, target, decay
        self.source_dict = source.state_dict()

    def update(self):
        with torch.no_grad():
            for p_ema, p in zip(self.target.parameters(), self.source.parameters()):
                p_ema.copy_(p.lerp(p_ema, self.decay))
"""

RESTORE = """\
def restore(ema, model):
    model.load_state_dict(ema.source_dict)
"""


def test_a_state_dict_kept_on_an_object_is_reported_once_some_file_reads_it(repo: Repo, tmp_path: Path) -> None:
    # StudioGAN's `Ema` keeps `self.source_dict = source.state_dict()` and no code reads it:
    # nothing can see its values change. Once another file restores the model from it, the
    # "snapshot" holds the live weights and the finding is real.
    repo.write("ema.py", EMA_KEEPS)
    repo.commit("an EMA of the generator")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert result.json["findings"] == []
    repo.write("restore.py", RESTORE)
    repo.commit("restore from the EMA's state")
    result = run_cli("--repo", str(repo.path), "--all", "--offline", "--no-sandbox", "--format", "json", env=env)
    assert [(f["path"], f["rule"], f["line"]) for f in result.json["findings"]] == [("ema.py", "RC151", 7)]


def test_the_index_knows_a_call_after_set_grad_enabled_false_runs_without_autograd() -> None:
    # deeplab-pytorch's demo turns grad off as a statement before it infers; a caller that
    # turns it back on before the next call makes that call with autograd again.
    text = (
        "import torch\n"
        "def main(model, image):\n"
        "    torch.set_grad_enabled(False)\n"
        "    a = infer(model, image)\n"
        "    if a is None:\n"
        "        torch.set_grad_enabled(True)\n"
        "        b = infer(model, image)\n"
        "    torch.set_grad_enabled(True)\n"
        "    return infer(model, image), a\n"
    )
    off = {call["line"]: call["off"] for call in file_facts(text)["calls"] if call["callee"] == "infer"}
    assert off == {4: True, 7: False, 9: False}


ANCHORS = """
import numpy as np


class Anchors{base}:
    def __init__(self, strides=(8, 16, 32)):
        self.strides = np.array(strides, dtype=np.float32)

    def __call__(self, sizes):
        return [np.zeros((h * w, 4), dtype=np.float32) + s for (h, w), s in zip(sizes, self.strides)]
"""

ANCHOR_LOSS = """
import torch
from torch import nn
from anchors import Anchors


class DetectionLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.anchors = Anchors()

    def forward(self, preds, sizes):
        one_image_anchors = self.anchors(sizes)
        anchors = torch.cat([torch.tensor(a).view(-1, a.shape[-1]) for a in one_image_anchors], dim=0)
        return (preds - anchors).abs().mean()
"""


def test_a_helper_object_held_by_a_module_is_called_for_its_arrays_not_run_as_a_submodule(repo: Repo, tmp_path: Path) -> None:
    # SimpleAICV's losses call `self.anchors(sizes)` in an nn.Module: the index knows the
    # anchor generator derives from `object` alone and returns NumPy arrays, so
    # `torch.tensor(a)` copies an array, not a tensor. Were it a module, the copy is RC301's.
    repo.write("anchors.py", ANCHORS.format(base=""))
    repo.write("loss.py", ANCHOR_LOSS)
    repo.commit("anchors as NumPy arrays")
    assert _whole_file(repo, tmp_path, "loss.py") == []
    repo.write("anchors.py", "import torch\n" + ANCHORS.format(base="(torch.nn.Module)"))
    repo.commit("the anchor generator becomes a module")
    assert _whole_file(repo, tmp_path, "loss.py") == [("RC301", 13)]


PERTURB = """
import torch


def normalize(tensor, mean=0.5, std=0.5):
    tensor.sub_(mean).div_(std)
    return tensor


def evaluate(model, loader, steps):
    for data in loader:
        norm_data = normalize(data.clone())
        pred = model(norm_data)
        for i in range(steps):
            perturbed = data.reshape(data.shape[0], -1).clone()
            perturbed = perturbed.reshape(data.shape)
            norm_perturbed = normalize(perturbed)
            print(pred, model(norm_perturbed))
    {tail}
"""


def test_callers_that_pass_a_clone_or_a_local_they_drop_do_not_see_the_write(repo: Repo, tmp_path: Path) -> None:
    # Transformer-Explainability's `normalize` works in place; one caller hands it
    # `data.clone()`, the other a perturbed copy it never reads again.
    repo.write("perturb.py", PERTURB.format(tail="return pred"))
    repo.commit("perturbation test")
    assert _whole_file(repo, tmp_path, "perturb.py") == []
    repo.write("perturb.py", PERTURB.format(tail="return pred, perturbed.mean()"))
    repo.commit("report the last perturbed input too")
    assert _whole_file(repo, tmp_path, "perturb.py") == [("RC102", 5)]


STAIN = """
import numpy as np
import torch


def stain_vectors(paths):
    found = []
    for p in paths:
        patches = np.expand_dims(np.load(p) / 255.0, 0)

        def rgb_to_od(image: np.ndarray) -> np.ndarray:
            image[image == 0] = 1
            return np.maximum(-np.log(image), 1e-5)

        {call}
        found.append(torch.from_numpy(od))
    return found
"""


def test_a_new_numpy_array_handed_to_a_nested_helper_is_no_one_elses(repo: Repo, tmp_path: Path) -> None:
    # The explain-and-adapt library's stain estimation: the helper writes into its argument,
    # but its one call passes `np.stack(...)`, an array no one else holds. A name the
    # caller keeps and reads again is another matter.
    repo.write("stain.py", STAIN.format(call="od = rgb_to_od(np.stack(patches).reshape(-1, 3))"))
    repo.commit("stain estimation")
    assert _whole_file(repo, tmp_path, "stain.py") == []
    repo.write("stain.py", STAIN.format(call="flat = np.stack(patches).reshape(-1, 3)\n        od = rgb_to_od(flat)\n        od = od - flat.mean()"))
    repo.commit("centre the optical density")
    assert _whole_file(repo, tmp_path, "stain.py") == [("RC102", 11)]


NETHOOK = '''
import torch


def set_requires_grad(requires_grad, *models):
    for model in models:
        if isinstance(model, torch.nn.Module):
            for param in model.parameters():
                param.requires_grad = requires_grad
        elif isinstance(model, (torch.nn.Parameter, torch.Tensor)):
            model.requires_grad = requires_grad
'''

CAUSAL_TRACE = '''
import torch
from util import nethook


def make_generator_transform(mean, cov):
    d = len(mean)
    layer = torch.nn.Linear(d, d, dtype=torch.double)
    nethook.set_requires_grad({flag}, layer)
    layer.bias[...] = mean
    _, s, v = cov.svd()
    layer.weight[...] = s.sqrt()[None, :] * v
    return layer
'''


def test_a_write_into_a_layer_that_a_helper_elsewhere_froze_is_legal(repo: Repo, tmp_path: Path) -> None:
    # ROME's causal tracing freezes a new layer through `nethook.set_requires_grad(False, layer)`,
    # defined in another file, then fills its parameters in place: no leaf requires grad.
    repo.write("util/__init__.py", "")
    repo.write("util/nethook.py", _dedent(NETHOOK))
    repo.write("trace.py", _dedent(CAUSAL_TRACE.format(flag="False")))
    repo.commit("a generator layer frozen before it is filled")
    assert _whole_file(repo, tmp_path, "trace.py") == []
    # Turned on instead, the first write raises.
    repo.write("trace.py", _dedent(CAUSAL_TRACE.format(flag="True")))
    repo.commit("the layer left trainable")
    assert _whole_file(repo, tmp_path, "trace.py") == [("RC202", 9), ("RC202", 11)]


GAN = '''
import torch
from torch import nn


class Model:
    def __init__(self, netG: nn.Module, netD: nn.Module):
        self.netG, self.netD = netG, netD

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    def clip_discriminator(self):
        self.set_requires_grad({args})
        self.netD.fc.weight.clamp_(-0.01, 0.01)
'''


@pytest.mark.parametrize(("args", "expected"), [("[self.netD], False", []), ("self.netD", []), ("[self.netD], True", [("RC202", 19)]), ("[self.netG], False", [("RC202", 19)])])
def test_a_method_that_sets_the_flag_of_the_nets_it_is_handed_freezes_them_by_its_default(repo: Repo, tmp_path: Path, args: str, expected: list) -> None:
    # CycleGAN's `set_requires_grad(nets, requires_grad=False)`: a list or one net, off by default.
    repo.write("gan.py", _dedent(GAN.format(args=args)))
    repo.commit("a discriminator clipped after it is frozen")
    assert _whole_file(repo, tmp_path, "gan.py") == expected


EDIT_NORMS = '''
import matplotlib.pyplot as plt
import torch


def plot(result, n):
    edit = result.edit_vectors[0].cpu()
    norm = edit.norm(dim=2)
    norm = norm{detach}.numpy()[:n, :]
    plt.imshow(norm)
'''

EVALUATE = '''
import torch
from helpers import plot


{decorator}
def evaluate(editor, batch, n):
    plot(editor(batch), n)
'''


@pytest.mark.parametrize(("decorator", "expected"), [("@torch.no_grad()", []), ("", [("RC322", 8)])])
def test_a_dropped_detach_in_a_helper_only_called_with_autograd_off_elsewhere_is_harmless(repo: Repo, tmp_path: Path, decorator: str, expected: list) -> None:
    # hypernetwork-editor drops `.detach()` before `.numpy()` in a plotting helper whose one
    # caller, in another file, runs under `@torch.no_grad()`: nothing it gets requires grad.
    repo.write("evaluate.py", _dedent(EVALUATE.format(decorator=decorator)))
    repo.write("helpers.py", _dedent(EDIT_NORMS.format(detach=".detach()")))
    repo.commit("plot the edit norms")
    repo.write("helpers.py", _dedent(EDIT_NORMS.format(detach="")))
    repo.commit("fix a memory leak in evaluation")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = run_cli("--repo", str(repo.path), "--base", "HEAD~1", "--head", "HEAD", "--offline", "--no-sandbox", "--format", "json", "--fail-on", "none", env=env)
    assert [(f["rule"], f["line"]) for f in result.json["findings"]] == expected


NEIGHBOURS = '''
import numpy as np
import torch
import torch.nn as nn


def neighbourhood(emb, threshold: float):
    graph = np.zeros((emb.shape[0], emb.shape[0]), dtype="float32")
    sims = emb @ emb.T
    graph[sims > threshold] = 1.0
    return graph


class Encoder(nn.Module):
    def forward(self, adj, emb):
        adj = torch.tensor(adj)
        return adj @ emb


class Fuse(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Encoder()

    def forward(self, emb):
        graph = {graph}
        return self.enc(graph, emb)
'''


def test_a_forward_whose_instances_are_handed_arrays_converts_them_with_torch_tensor(repo: Repo, tmp_path: Path) -> None:
    # LLM-ISR's neighbour encoder: its one caller hands it what a function of the file builds
    # with `np.zeros`, so `torch.tensor(adj)` converts an array, as it should.
    repo.write("fuse.py", NEIGHBOURS.replace("{graph}", "neighbourhood(emb.detach().numpy(), 0.5)"))
    repo.commit("the graph is a NumPy array")
    assert _whole_file(repo, tmp_path, "fuse.py") == []
    # Handed a tensor, the same line copy-constructs one.
    repo.write("fuse.py", NEIGHBOURS.replace("{graph}", "(emb @ emb.T > 0.5).float()"))
    repo.commit("the graph is a tensor")
    assert _whole_file(repo, tmp_path, "fuse.py") == [("RC301", 15)]
