"""What a finding says, and whether there is one, depends on what else the code around it does:
its callers, the rest of its loop."""

from __future__ import annotations

import textwrap

from review_copies.review.engine import FileJob, example_job, review_file

CAPTURE = """
import torch


def capture(model, inputs, iterations: int):
    outputs = []
    for i in range(iterations):
        output = model(inputs[i])
        outputs.append(output)
        {backward}
    return outputs
"""


def _messages(source: str, rule: str) -> list[str]:
    text = textwrap.dedent(source).lstrip("\n")
    return [f.message for f in review_file(FileJob("m.py", text, None, (rule,))).findings]


def test_a_stored_output_whose_backward_already_ran_is_said_to_keep_only_nodes() -> None:
    # backward() frees the saved activations of the graph it runs through: what the list keeps
    # is the graph's nodes, and the message must not claim the whole graph.
    [freed] = _messages(CAPTURE.format(backward="output.backward(torch.ones_like(output))"), "RC252")
    assert "graph nodes alive" in freed and "line 9" in freed and "whole graph" not in freed
    [kept] = _messages(CAPTURE.format(backward="output.backward(torch.ones_like(output), retain_graph=True)"), "RC252")
    assert "whole graph alive" in kept
    # The usual training step: the loss computed from the stored output is what backpropagates.
    [through_loss] = _messages(CAPTURE.format(backward="loss = (output - 1).pow(2).mean()\n        loss.backward()"), "RC252")
    assert "graph nodes alive" in through_loss and "line 10" in through_loss and "whole graph" not in through_loss


CLIP = """
import torch
from torch import nn


class Attention(nn.Module):
    def clip(self, eta: float):
        w = self.linear_kv.weight
        {call}

    def _clip_kv(self, weight: torch.Tensor, eta: float) -> torch.Tensor:
        halves = weight.view(2, -1, weight.shape[-1])
        k = halves[0]
        k.mul_(eta)
        return torch.cat([k, halves[1]], dim=0)
"""


def test_a_helper_whose_caller_copies_the_result_back_into_what_it_passed_is_not_reported() -> None:
    # Megatron's qk-clip: `w.data.copy_(self._clip_kv(w.data, eta))` writes the result into
    # the very tensor the helper wrote into, so the write changes nothing the caller keeps.
    assert _messages(CLIP.format(call="w.data.copy_(self._clip_kv(w.data, eta))"), "RC102") == []
    # Copied into another tensor, the caller's weight is changed behind its back.
    [changed] = _messages(CLIP.format(call="self.clipped.copy_(self._clip_kv(w.data, eta))"), "RC102")
    assert "`weight`" in changed


EMA = """
import torch
from torch import nn


class ModelEma(nn.Module):
    def __init__(self, model: nn.Module, decay: float):
        super().__init__()
        self.module = model
        self.decay = decay

    @torch.no_grad()
    def update(self, model: nn.Module):
        base = {source}.state_dict()
        for key, ema in self.module.state_dict().items():
            ema.copy_(self.decay * ema + (1 - self.decay) * base[key])
"""


def test_a_methods_parameter_is_not_the_object_init_was_given_under_the_same_name() -> None:
    # `self.module` is the `model` __init__ was given; `update`'s own `model` is the live model
    # the average follows (vissl's EMA): writing into the first leaves the second's state alone.
    assert _messages(EMA.format(source="model"), "RC151") == []
    # Read from the averaged module itself, the "base" is changed by the very writes.
    [stale] = _messages(EMA.format(source="self.module"), "RC151")
    assert "`ema.copy_(" in stale


MIXUP = """
import torch


class Mixup:
    def _mix_elem(self, x):
        x_orig = x.clone()
        for i in range(len(x)):
            x[i][:, 2:4, 2:4] = x_orig[len(x) - i - 1][:, 2:4, 2:4]
        return torch.full((len(x), 1), 0.5)

    def __call__(self, sample):
        x = sample["input"]
        lam = self._mix_elem(x)
        return {result}
"""


def test_a_caller_that_returns_the_mixed_batch_in_what_it_builds_expects_the_write() -> None:
    # vissl's cutmix collator: `_mix_elem` mixes the batch in place by design and its caller
    # returns that very batch; a caller that returns something else did not ask for it.
    assert _messages(MIXUP.format(result='{"input": x, "lam": lam}'), "RC102") == []
    assert len(_messages(MIXUP.format(result='{"lam": lam, "mean": x.mean()}'), "RC102")) == 1


def test_a_caller_that_returns_the_sample_whose_input_was_mixed_expects_the_write() -> None:
    # ClassyVision's mixup: `self._mix_elem(sample["input"])`, then `return sample`.
    source = MIXUP.replace('x = sample["input"]\n        lam = self._mix_elem(x)', 'lam = self._mix_elem(sample["input"])')
    assert _messages(source.format(result="sample"), "RC102") == []
    assert len(_messages(source.format(result="lam"), "RC102")) == 1


def test_a_caller_that_passes_a_view_of_the_batch_it_returns_expects_the_write() -> None:
    # omnivore's cutmix: `self._mix_elem(torch.narrow(x, 0, 0, n))` mixes the first n rows
    # in place through the view ("using torch.narrow to make sure it is a view"), then
    # `return {"input": x, ...}`.
    source = MIXUP.replace("lam = self._mix_elem(x)", "lam = self._mix_elem({passed})")
    for passed in ("torch.narrow(x, 0, 0, len(x) - 1)", "x.narrow(0, 0, 2)", "x[:2]"):
        assert _messages(source.format(passed=passed, result='{"input": x, "lam": lam}'), "RC102") == [], passed
        assert len(_messages(source.format(passed=passed, result='{"lam": lam, "mean": x.mean()}'), "RC102")) == 1, passed


WRITE_THROUGH = """
import torch


def test_zero(make, params: bool):
    td = make()
    td0 = td.clone()
    if params:
        td_set = td0.data
    else:
        td_set = td0
    td_set.zero_()
    total = td_set.sum()
    {check}
"""


def test_a_test_that_writes_through_an_alias_and_asserts_on_the_original_checks_the_write() -> None:
    # tensordict's tests: `td_set = td0` (or `td0.data`), `td_set.zero_()`, then `assert (td0
    # != 1.0).all()`: the assertion is there to see the write reach the original.
    def found(path: str, check: str) -> list[str]:
        text = textwrap.dedent(WRITE_THROUGH.format(check=check)).lstrip("\n")
        return [f.message for f in review_file(FileJob(path, text, None, ("RC101",))).findings]

    for check in ("assert (td0 != 1.0).all()", "torch.testing.assert_close(td0, torch.zeros(3))", "for key in td0.keys():\n        assert (td0[0].get(key) == 0).all()"):
        assert found("test/test_methods.py", check) == [], check
        assert len(found("m.py", check)) == 1, check
    # The original fed to the code under test is read as if it still held its values.
    assert len(found("test/test_methods.py", "assert make.apply(td0).sum() > 0")) == 1


def test_a_write_through_an_alias_never_read_again_is_meant_for_what_it_aliases() -> None:
    # GPTQModel's AWQ: `weight_view = weight_abs.reshape(rows, -1, g)`, `weight_view.div_(...)`,
    # then only `weight_abs` is read. A write into a name nobody reads again can only be
    # for the tensor it shares memory with: normalising in groups through a view, on purpose.
    source = """
import torch


def mean_of_normalised(layers, group: int):
    total = 0
    for layer in layers:
        weight_abs = layer.weight.detach().abs()
        weight_view = weight_abs.reshape(weight_abs.shape[0], -1, group)
        {write}
        total = total + weight_abs.sum(dim=0)
    return total
"""
    assert _messages(source.format(write="weight_view.div_(weight_view.amax(dim=2, keepdim=True) + 1e-6)"), "RC106") == []
    # Read again afterwards, the view is a name of its own the author expected to change alone.
    [message] = _messages(source.format(write="weight_view.div_(weight_view.amax(dim=2, keepdim=True) + 1e-6)\n        total = total + weight_view.mean()"), "RC106")
    assert "weight_abs" in message


REGISTERED = """
import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, n: int, d: int, padding_idx: int):
        super().__init__()
        self.padding_idx = padding_idx
        self.register_parameter("weight", {weight})

    @staticmethod
    def create_weight(n: int, d: int):
        return nn.Parameter(torch.zeros((n, d)), requires_grad=False)

    def weight_loader(self, param: nn.Parameter, loaded: torch.Tensor):
        param.data.copy_(loaded)
        self.weight[self.padding_idx] = 0
"""


def test_a_registered_parameter_is_what_was_registered() -> None:
    # lmdeploy's inference Embedding registers a weight its helper makes with
    # `requires_grad=False`; writing a padding row into it raises nothing.
    assert _messages(REGISTERED.format(weight="self.create_weight(n, d)"), "RC202") == []
    assert _messages(REGISTERED.format(weight="nn.Parameter(torch.zeros(n, d), requires_grad=False)"), "RC202") == []
    [leaf] = _messages(REGISTERED.format(weight="nn.Parameter(torch.zeros(n, d))"), "RC202")
    assert "`self.weight`" in leaf


KEYPOINTS = """
import torch


def localize(goal: torch.Tensor, found: torch.Tensor, where):
    goal = goal[0].cpu().to({conversion}).numpy()
    return goal + found.sum().item()
"""


def test_a_dtype_given_by_keyword_is_no_device() -> None:
    # home-robot: `keypoints[0].cpu().to(dtype=int).numpy()`; `int` is not a name the analysis
    # resolves, but what is passed as `dtype=` cannot move the tensor off the CPU.
    assert _messages(KEYPOINTS.format(conversion="dtype=int"), "RC321") == []
    [moved] = _messages(KEYPOINTS.format(conversion="where"), "RC321")
    assert "may be on a GPU" in moved


CYCLE = """
from typing import Optional

import torch


def cycle(chunks, step):
    acc = None
    for i, c in enumerate(chunks):
        acc = step(c, i, None if i == 0 else c, acc)
    return acc


def backward(image_features: torch.Tensor, chunks):
    def my_step(incoming: torch.Tensor, rank: int, req, grad_text: Optional[torch.Tensor]) -> torch.Tensor:
        raw = image_features @ incoming.T
        if req is None:
            grad_text = torch.matmul(raw.T, image_features)
        else:
            grad_text.addmm_(raw.T, image_features)
        return {result}

    return cycle(chunks, my_step)
"""


def test_an_accumulator_written_in_one_arm_and_returned_is_handed_back() -> None:
    # dinov3's chunked CLIP backward: `grad_text` is built in the first step and grown in
    # place by the next ones, each returning it for the next call.
    assert _messages(CYCLE.format(result="grad_text"), "RC102") == []
    assert len(_messages(CYCLE.format(result="raw"), "RC102")) == 1


TRANSFORMED = """
from functools import partial

import torch
from torch import nn


class Transform:
    def __call__(self, image, max_num_chunks: int):
        return image, (1, 2)


class Model(nn.Module):
    def __init__(self, size: int):
        super().__init__()
        self.image_transform = {transform}

    def forward(self, batch_images):
        pairs = [[self.image_transform(im) for im in row] for row in batch_images]
        ratios = torch.ones(len(batch_images), 4, 2, dtype=torch.int64)
        for i, row in enumerate(pairs):
            ratios[i, : len(row)] = torch.stack([torch.tensor(x[1]) for x in row])
        return ratios
"""


def test_a_partial_kept_on_a_module_is_no_submodule() -> None:
    # llama-models: `self.image_transform = partial(VariableSizeImageTransform(...), ...)`
    # returns an image and a tuple of sizes; `torch.tensor(x[1])` builds from the tuple.
    assert _messages(TRANSFORMED.format(transform="partial(Transform(), max_num_chunks=size)"), "RC301") == []
    [copied] = _messages(TRANSFORMED.format(transform="nn.Linear(size, size)"), "RC301")
    assert "`x[1]`" in copied


SPREAD = """
import torch


def greedy(ref_embedding, ref_masks, hyp_embedding, hyp_masks, all_layers=False):
    ref_embedding.div_(torch.norm(ref_embedding, dim=-1).unsqueeze(-1))
    return torch.bmm(hyp_embedding, ref_embedding.transpose(1, 2)) * ref_masks.sum() * hyp_masks.sum()


def score(batches, stats):
    out = []
    {before}
    with torch.no_grad():
        for refs, hyps in batches:
            {bind}
            hyp_stats = stats(hyps)
            p = greedy(*ref_stats, *hyp_stats, False)
            out.append(p)
    return out
"""


def test_a_tuple_spread_into_a_call_and_never_read_again_is_the_callers_temporary() -> None:
    # lighteval's BERTScore: `greedy_cos_idf(*ref_stats, *hyp_stats, all_layers)` with
    # `ref_stats = pad_batch_stats(...)` made anew at the top of every iteration.
    assert _messages(SPREAD.format(before="pass", bind="ref_stats = stats(refs)"), "RC102") == []
    # Made once before the loop, the same tensors are normalised again every iteration.
    assert len(_messages(SPREAD.format(before="ref_stats = stats(batches[0][0])", bind="pass"), "RC102")) == 1


DENOISE = """
import torch
import torch.nn.functional as F


def denoise_loss(model, clean, sigma):
    noisy = clean
    noisy.add_(sigma * torch.randn(clean.shape))
    pred = model(noisy)
    return F.mse_loss(pred, {target})


def train_epoch(model, loader, optimizer, sigma=0.1):
    for batch in loader:
        clean = batch.float()
        loss = denoise_loss(model, clean, sigma)
        loss.backward()
        optimizer.step()
"""


def test_a_function_that_reads_what_it_wrote_through_an_alias_is_reported_whatever_its_callers_do() -> None:
    # The loop's `clean` is made anew every iteration and never read after the call, but the loss
    # itself compares with `clean`, which the alias `noisy` has just changed.
    [inside] = _messages(DENOISE.format(target="clean"), "RC102")
    assert "`noisy.add_(" in inside
    # Reading only what it made of it, the function leaves the write to callers that drop it.
    assert _messages(DENOISE.format(target="noisy"), "RC102") == []


def test_a_dtype_spelled_as_a_tensors_dtype_is_no_device() -> None:
    # FunASR's EEND report: `torch.from_numpy(...).to(y.dtype)`, indexed, then `np.array(...)`:
    # `y.dtype` moves nothing, whatever the analysis knows of `y`.
    source = KEYPOINTS.replace("goal = goal[0].cpu().to({conversion}).numpy()", "goal = goal[0].cpu().to({conversion}.dtype).numpy()")
    assert _messages(source.format(conversion="where"), "RC321") == []
    assert len(_messages(KEYPOINTS.format(conversion="where"), "RC321")) == 1


ADABELIEF = """
import torch


class AdaBelief(torch.optim.Optimizer):
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                half_precision = False
                if p.data.dtype == torch.float16:
                    half_precision = True
                    p.data = p.data.float()
                    p.grad = p.grad.float()
                grad = p.grad.data
                grad.add_(p.data, alpha=group["weight_decay"])
                p.data.add_(grad, alpha=-group["lr"])
                if half_precision:
                    p.data = p.data.half()
                    p.grad = p.grad.half()
"""


def test_an_optimizers_step_writing_through_its_gradients_alias_is_its_job() -> None:
    # LMFlow's AdaBelief: `grad = p.grad.data; grad.add_(p.data, alpha=wd)` (L2 decay folded
    # into the gradient, as the paper's code does): changing `p.grad` is the step's business.
    assert _messages(ADABELIEF, "RC103") == []
    assert len(_messages(ADABELIEF.replace("(torch.optim.Optimizer)", ""), "RC103")) == 1


STATIC = """
import torch


class Captured:
    def __init__(self, inputs):
        self.inputs = tuple({element} for value in inputs)
        for static, value in zip(self.inputs, inputs):
            static.copy_(value * 2)
        self.device = self.inputs[0].device
"""


def test_a_tuple_of_new_buffers_filled_in_place_is_no_shallow_copy() -> None:
    # RVC's CUDA-graph capture: static input buffers made with `empty_like` and filled.
    assert _messages(STATIC.format(element="torch.empty_like(value)"), "RC154") == []


FLIPPED = """
import torch


class Split:
    def _process_targets(self, targets):
        if self.rr_prob is not None:
            flip_probs = torch.tensor(self.rr_prob).expand(targets.size())
        if self.is_encrypted(targets):
            if self.rr_prob is not None:
                targets = targets + flip_probs
            targets_enc = targets
        else:
            if self.rr_prob is not None:
                flip_mask = flip_probs.bernoulli()
                targets += flip_mask - 2 * targets * flip_mask
            targets_enc = self.encrypt(targets)
        return targets_enc
"""


def test_an_argument_returned_from_the_arm_that_did_not_write_it_is_no_mutate_and_return() -> None:
    # CrypTen's randomised response: the plaintext arm flips the caller's labels in place and
    # returns their encryption; only the other arm hands `targets` back, unwritten.
    [flipped] = _messages(FLIPPED, "RC102")
    assert "`targets += " in flipped


PAIRS = """
import torch


class Mixup:
    def _mix_pair(self, x, lam: float):
        for i in range(0, len(x), 2):
            x_flipped = x[i:i+2].flip(0).mul_(1. - lam)
            x[i:i+2].mul_(lam).add_(x_flipped)
        return torch.tensor([lam] * len(x), device=x.device)

    def __call__(self, x, lam: float):
        weights = self._mix_pair(x, lam)
        return x, weights
"""


def test_a_write_through_an_expression_of_the_argument_is_no_hidden_alias() -> None:
    # Cream's TinyViT mixup: `x[i:i+2].mul_(lam)` in a loop that reads `x` again; the caller
    # returns the mixed batch, as it means to.
    assert _messages(PAIRS, "RC102") == []


CONVERT = """
import torch


def convert_pdc(op, weight):
    if op == "cv":
        return weight
    shape = weight.shape
    weight_c = weight.sum(dim=[2, 3])
    weight = weight.view(shape[0], shape[1], -1)
    weight[:, :, 4] = weight[:, :, 4] - weight_c
    return weight.view(shape)


def convert_pidinet(state_dict, ops):
    new_dict = {}
    for name, p in state_dict.items():
        new_dict[name] = convert_pdc(ops[name], p)
    return new_dict
"""


def test_an_item_a_loop_takes_from_the_callers_dict_is_still_held_after_the_call() -> None:
    # modelscope's PiDiNet converter: `p` is rebound every iteration, but it is a tensor of the
    # checkpoint the caller handed in, which the in-place conversion changes; and the `cv`
    # arm returns the argument unwritten, which makes no mutate-and-return of the other arm.
    [converted] = _messages(CONVERT, "RC102")
    assert "`weight[:, :, 4] = " in converted


MVN = """
import torch


def utterance_mvn(x: torch.Tensor, mask: torch.Tensor, ilens: torch.Tensor):
    if x.requires_grad:
        x = x.masked_fill(mask, 0.0)
    else:
        x.masked_fill_(mask, 0.0)
    return {result}
"""


def test_an_argument_written_on_one_path_and_returned_in_a_tuple_is_handed_back() -> None:
    # ESPnet's utterance MVN (in FunASR): written in place when no graph needs the input,
    # and returned with the lengths either way; callers rebind both.
    assert _messages(MVN.format(result="x, ilens"), "RC102") == []
    assert len(_messages(MVN.format(result="x.mean(), ilens"), "RC102")) == 1


RETAKEN = """
import torch


def check_steps(optimizer, reference, steps: int):
    for _ in range(steps):
        optimizer.step()
        reference.step()
        {snapshot}
        assert state.keys() == reference.state_dict().keys()
"""


def test_a_snapshot_taken_again_every_iteration_is_not_stale_by_the_previous_step() -> None:
    # nanotron's ZeRO test: the state_dict is taken after the step of its own iteration and
    # read at once; the step it would "miss" ran before it.
    assert _messages(RETAKEN.format(snapshot="state = optimizer.state_dict()"), "RC151") == []
    # Taken only on some iterations, it is read after later steps changed it.
    assert len(_messages(RETAKEN.format(snapshot="if _ == 0:\n            state = optimizer.state_dict()"), "RC151")) == 1


CAST = """
import torch


def cast_bias(bias: torch.Tensor, target_dtype: torch.dtype) -> torch.Tensor:
    {guard}
        bias = bias.to(target_dtype)
        bias.masked_fill_(bias == float("-inf"), torch.finfo(target_dtype).min)
    return bias * 2
"""


def test_a_conversion_under_a_dtype_test_that_says_it_changes_the_dtype_copies() -> None:
    # OLMo's `_cast_attn_bias`: under `if bias.dtype != target_dtype:` the `.to(target_dtype)`
    # always makes a new tensor, so the masked fill never reaches the caller's bias.
    assert _messages(CAST.format(guard="if bias.dtype != target_dtype:"), "RC102") == []
    assert len(_messages(CAST.format(guard="if target_dtype is not None:"), "RC102")) == 1


ACT = """
import torch


class Agent:
    def act(self, obs):
        {before}obs = torch.FloatTensor(obs).to(self.device)
        obs = obs.unsqueeze(0)
        obs.clamp_(-1.0, 1.0)
        return self.actor(obs)
"""


def test_what_a_parameter_holds_is_read_off_its_uses_before_it_is_rebound() -> None:
    # drq's agent: `obs.unsqueeze(0)` is a use of the tensor `torch.FloatTensor(obs)` made, not
    # evidence that the caller passed a tensor (an environment's observation is an ndarray).
    # With a tensor passed, the clamp writes through the alias into the caller's observation.
    assert _messages(ACT.format(before=""), "RC302") == []
    assert len(_messages(ACT.format(before="obs.mul_(2)\n        "), "RC302")) == 1



def test_the_copy_a_legacy_constructor_message_suggests_is_of_the_whole_expression() -> None:
    # The message once said "Use `x.double() * 2.detach().clone()`": the copy bound to the
    # literal, not to the product.
    source = "import torch\n\ndef widen(x: torch.Tensor):\n    mask = torch.FloatTensor(x.double() * 2)\n    mask.add_(1)\n    return mask\n"
    [message] = _messages(source, "RC302")
    assert "Use `(x.double() * 2).detach().clone()` for a copy" in message


LOAD_INTO = """
import numpy as np
import torch
from .mapping import ShardedTensor


def _load_from_array(sharded_tensor: ShardedTensor, checkpoint_dir, load_directly_on_device: bool = False):
    x = np.load(checkpoint_dir / sharded_tensor.key)
    ten = torch.from_numpy(x)
    if load_directly_on_device:
        sharded_tensor.data.data.{op}(ten)
        return sharded_tensor.data
    else:
        return ten
"""


def test_copying_into_the_tensor_an_argument_holds_is_the_load_it_was_asked_for() -> None:
    # Megatron's tensorstore loader fills the sharded tensor's own buffer when asked to load
    # straight onto the device: `.copy_()` into the holder's `.data` is the job. Adding into
    # it is not a load, and is still reported.
    assert _messages(LOAD_INTO.format(op="copy_"), "RC102") == []
    assert len(_messages(LOAD_INTO.format(op="add_"), "RC102")) == 1

OFFLOADED = """
from torch import nn


def save_offloaded(model: nn.Module, onload):
    state_dict = {{}}
    for name, module in model.named_children():
        {take}
        for key in module_state:
            state_dict[name + "." + key] = module_state[key].to("cpu")
    return state_dict
"""


def test_a_state_dict_taken_anew_in_every_iteration_inside_try_and_with_is_not_stale() -> None:
    # The next iteration's `onload(module, ...)` passes another module: what this iteration
    # took was read before it. Under `try:` / `with` the binding still runs every iteration.
    guarded = "try:\n            with onload(module, 'cpu'):\n                module_state = module.state_dict()\n        except MemoryError:\n            raise"
    assert _messages(OFFLOADED.format(take=guarded), "RC151") == []
    # Taken only under an `if` after a change made on every iteration, an iteration may read
    # what an earlier one took: still reported. (With the change in the same arm, just before
    # the take, every read after the change reads the new binding.)
    maybe = "onload(module, 'cpu')\n        if name:\n            module_state = module.state_dict()"
    assert len(_messages(OFFLOADED.format(take=maybe), "RC151")) == 1


HANDED_ON = """
import torch
from torch import nn


def class_named(model: nn.Module, name: str):
    return next(type(m) for m in model.modules() if type(m).__name__ == name)


{helper}


def shard(model: nn.Module, names: list[str]):
    original_sd = model.state_dict()
    wrap = helper(model, names)
    model = model.to(torch.device("meta"))
    return wrap, original_sd
"""


def test_a_repository_helper_that_changes_no_tensor_does_not_stale_a_state_dict() -> None:
    # `helper` passes the model on and builds a set, but writes nothing itself and never
    # steps or loads: the index says so, and the snapshot stays what it was.
    reads = "def helper(model: nn.Module, names: list[str]):\n    found = set()\n    for n in names:\n        found.add(class_named(model, n))\n    return found"
    assert _messages(HANDED_ON.format(helper=reads), "RC151") == []
    # A helper that trains the model changes what the state dict holds.
    trains = "def helper(model: nn.Module, names: list[str]):\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    model(torch.ones(1)).sum().backward()\n    opt.step()"
    assert len(_messages(HANDED_ON.format(helper=trains), "RC151")) == 1


STEPS = """
import torch


def losses_over(model, batch, opt, steps: int):
    losses = []
    for i in {loop}:
        loss = model(batch).sum()
        losses.append(loss)
        loss.backward()
        opt.step()
    return losses[0] > losses[-1]
"""


def test_a_loop_of_a_few_literal_steps_does_not_grow_memory_step_after_step() -> None:
    # Three steps written out keep three losses: bounded, not a leak to report.
    assert _messages(STEPS.format(loop="range(3)"), "RC252") == []
    assert _messages(STEPS.format(loop="(0, 1)"), "RC252") == []
    # As many steps as the caller asks for: each keeps its graph's nodes, the leak is real.
    assert len(_messages(STEPS.format(loop="range(steps)"), "RC252")) == 1


def test_a_forward_given_labels_still_may_not_write_into_the_model_output() -> None:
    # MixUp's forward takes the labels and mixes the data batch: quiet (its Valid example).
    # A loss's forward takes them too, but what it writes into is the model's output.
    loss = """
    import torch
    from torch import nn
    class ShiftedLoss(nn.Module):
        def forward(self, logits: torch.Tensor, target: torch.Tensor):
            logits.sub_(logits.max(dim=-1, keepdim=True).values)
            return logits
    scored = nn.Sequential(nn.Linear(8, 4), nn.Softmax(dim=-1), ShiftedLoss())
    """
    assert len(_messages(loss, "RC204")) == 1


def test_a_module_written_into_is_reported_only_after_a_layer_that_saves_its_output() -> None:
    # SphereNet's readout sums into a running total that its caller rebinds; nothing puts it
    # after a tanh, so the write breaks no backward. Put after `nn.Tanh()`, it would.
    readout = """
    import torch
    from torch import nn
    class Readout(nn.Module):
        def forward(self, u, v, batch):
            u += v.sum(0)
            return u
    """
    assert _messages(readout, "RC204") == []
    after_linear = readout + "head = nn.Sequential(nn.Linear(4, 4), Readout())\n"
    assert _messages(after_linear, "RC204") == []
    [after_tanh] = _messages(readout + "head = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), Readout())\n", "RC204")
    assert "writes in place into `u`" in after_tanh
    # fast-reid names a margin head `Linear`: torch's `nn.Linear` after a tanh is not it.
    named_like_torch = readout.replace("Readout", "Linear")
    assert _messages(named_like_torch + "head = nn.Sequential(nn.Tanh(), nn.Linear(4, 4))\n", "RC204") == []
    assert len(_messages(named_like_torch + "head = nn.Sequential(nn.Tanh(), Linear())\n", "RC204")) == 1


# tianshou's collector (read in the seventeenth untuned round).
SHALLOW = """
from copy import copy

import numpy as np
import torch

from tianshou.data import Batch


def _HACKY_create_info_batch(info_array: np.ndarray) -> Batch:
    if info_array.dtype != np.dtype("O"):
        raise ValueError(
            f"Expected info_array to have dtype=object, but got {info_array.dtype}.",
        )

    truthy_info_indices = info_array.nonzero()[0]
    falsy_info_indices = set(range(len(info_array))) - set(truthy_info_indices)
    falsy_info_indices = np.array(list(falsy_info_indices), dtype=int)

    if len(falsy_info_indices) == len(info_array):
        return Batch()

    some_nonempty_info = None
    for info in info_array:
        if info:
            some_nonempty_info = info
            break

    info_array = copy(info_array)
    info_array[falsy_info_indices] = some_nonempty_info
    result_batch_parent = Batch(info=info_array)
    result_batch_parent.info[falsy_info_indices] = {}
    return result_batch_parent.info
"""


def test_copy_copy_of_an_array_copies_its_data() -> None:
    # `copy.copy` of an ndarray copies the data (of a tensor it shares the storage: measured
    # with torch 2.13), so the write after it stays in the function.
    assert _messages(SHALLOW, "RC102") == []


REFERENCE = """
import torch


def check(loss_func, points: list, pairs, dtypes):
    embeddings = torch.tensor(points, requires_grad=True)
    {outside}for dtype in dtypes:
        loss = loss_func(embeddings.to(dtype))
        loss.backward()
        {inside}for a, p in pairs:
            total += torch.matmul(embeddings[a], embeddings[p])
        assert torch.isclose(loss, total)
"""


def test_a_sum_started_afresh_in_each_step_does_not_keep_graphs_across_steps() -> None:
    # metric-learning's reference losses: the sum over pairs is reset in every step of the
    # loop that backpropagates, so no graph outlives its step.
    assert _messages(REFERENCE.format(outside="", inside="total = 0\n        "), "RC251") == []
    # Started once before the steps, it keeps every step's graph.
    assert len(_messages(REFERENCE.format(outside="total = 0\n    ", inside=""), "RC251")) == 1


def test_a_whole_tensor_cloned_into_a_slot_of_a_namesake_buffer_is_still_a_double_copy() -> None:
    # `self.obs[t] = obs.clone()`: the argument is another tensor than the buffer it shares a
    # name with; only a slice of the buffer shifted into itself needs the copy.
    rollout = """
    import torch
    class Rollout:
        def __init__(self, steps: int, dim: int):
            self.obs = torch.zeros(steps, dim)
        def insert(self, t: int, obs: torch.Tensor):
            self.obs[t] = obs.clone()
    """
    assert len(_messages(rollout, "RC348")) == 1


RESIZE = """
import torch


def resize(img, scale):
    {bind}
    if img.dim() == 2:
        img.unsqueeze_(0)
    return torch.nn.functional.interpolate(img[None], scale_factor=scale)[0]
"""


def test_reshaping_in_place_is_a_change_to_the_callers_tensor_only_when_it_is_that_tensor() -> None:
    # `unsqueeze_` changes the shape of the object it is called on. On the caller's tensor
    # the caller sees a new shape; on `torch.from_numpy(img)` the caller's array keeps its own.
    [own] = _messages(RESIZE.format(bind="pass"), "RC102")
    assert "`img.unsqueeze_(0)` writes in place into the argument `img`" in own
    assert _messages(RESIZE.format(bind="img = torch.from_numpy(img)"), "RC102") == []


ALLOCATE = """
from typing import List
import torch


class BlockCache:
    def allocate(self, block_tables: torch.Tensor, lens: torch.Tensor){returns}:
        ids = block_tables[torch.arange(0, lens.numel()), lens]
        need = torch.nonzero(ids < 0).view(-1)
        recycle = []
        if need.numel() > self.free:
            need, recycle = need[: self.free], need[self.free :]
        block_tables[need, lens[need]] = self.take(need.numel())
        return recycle
"""


def test_a_function_annotated_to_return_numbers_works_on_its_tensors_in_place() -> None:
    # A cache allocator fills the block table it is handed and returns the ids it had to
    # recycle: `-> List[int]` says its result is bookkeeping, not a tensor computed from it.
    assert _messages(ALLOCATE.format(returns=" -> List[int]"), "RC102") == []
    [returned] = _messages(ALLOCATE.format(returns=" -> torch.Tensor"), "RC102")
    assert "writes in place into the argument `block_tables`" in returned


def test_the_fix_in_a_message_applies_to_the_whole_accumulated_expression() -> None:
    code = """
    import torch
    def train(model, loader, optimizer, scale):
        total = 0.0
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            optimizer.step()
            total += loss * scale
        return total
    """
    [message] = _messages(code, "RC251")
    assert "`(loss * scale).item()` or `(loss * scale).detach()`" in message


def test_the_data_of_a_scipy_matrix_is_an_array_not_a_tensor() -> None:
    # `csr.data` is the sparse matrix's values, an ndarray: `torch.tensor` of it builds a
    # tensor from an array, which is what it is for.
    code = """
    import scipy.sparse
    import torch
    def edge_probabilities(src, dst, degrees):
        weights = 1.0 / degrees
        matrix = scipy.sparse.csr_matrix((weights.numpy(), (src.numpy(), dst.numpy())))
        return torch.tensor(scipy.sparse.triu(matrix).data)
    """
    assert _messages(code, "RC301") == []
    [of_tensor] = _messages(code.replace("scipy.sparse.triu(matrix).data", "weights.data"), "RC301")
    assert "on the tensor `weights.data`" in of_tensor


def test_a_scipy_matrix_kept_in_a_name_keeps_an_array_data() -> None:
    # The same through a name, as adjacency helpers write it: `sp.coo_matrix(adj).data` is
    # still the matrix's values, an ndarray.
    code = """
    import numpy as np
    import scipy.sparse as sp
    import torch
    def adjacency_to_edge_index(adj_mx):
        adj_sparse = sp.coo_matrix(adj_mx)
        edge_index = torch.tensor(np.vstack((adj_sparse.row, adj_sparse.col)), dtype=torch.long)
        edge_weight = torch.tensor(adj_sparse.data, dtype=torch.float)
        return edge_index, edge_weight
    """
    assert _messages(code, "RC301") == []
    [of_tensor] = _messages(code.replace("sp.coo_matrix(adj_mx)", "torch.as_tensor(adj_mx)"), "RC301")
    assert "on the tensor `adj_sparse.data`" in of_tensor


OGC_TRAIN = """
import torch.nn.functional as F
import torch.optim as optim


def train(model, embeds, lazy_adj, args):
    patience = 0
    _, _, last_acc, last_output = model_test(model, embeds)

    tv_mask = model.tv_mask
    optimizer = optim.SGD(model.parameters(), lr=args.lr_clf)

    for i in range(64):
        model.train()
        output = model(embeds)
        loss_tv = F.mse_loss(
            output[tv_mask], model.label_one_hot[tv_mask], reduction="sum"
        )
        optimizer.zero_grad()
        loss_tv.backward()
        optimizer.step()

        # Updating node embeds by LGC and SEB jointly.
        embeds = model.update_embeds(embeds, lazy_adj, args)

        loss_tv, acc_tv, acc_test, pred = model_test(model, embeds)
        print(
            "epoch {} loss_tv {:.4f} acc_tv {:.4f} acc_test {:.4f}".format(
                i + 1, loss_tv, acc_tv, acc_test
            )
        )

        sim_rate = float(int((pred == last_output).sum()) / int(pred.shape[0]))
        if sim_rate > args.max_sim_rate:
            patience += 1
            if patience > args.max_patience:
                break
        last_acc = acc_test
        last_output = pred
    return last_acc
"""


def test_a_value_recomputed_by_the_repositorys_own_function_is_not_an_accumulation() -> None:
    # DGL's OGC example: `embeds = model.update_embeds(embeds, ...)` returns a new value
    # computed from `.data`; what a function of the repository returns is not known to
    # hold the old value's graph. Written as a sum, the same line keeps every step's graph.
    assert _messages(OGC_TRAIN, "RC251") == []
    [summed] = _messages(OGC_TRAIN.replace("embeds = model.update_embeds(embeds, lazy_adj, args)", "embeds = embeds + model(embeds)"), "RC251")
    assert "`embeds` accumulates" in summed


def test_the_fix_in_a_stored_tensors_message_applies_to_the_whole_expression() -> None:
    code = """
    import torch
    def train(model, loader, optimizer, weight):
        losses = []
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            optimizer.zero_grad()
            losses.append(loss * weight)
            optimizer.step()
        return losses
    """
    [message] = _messages(code, "RC252")
    assert "Store `(loss * weight).detach()`" in message


def test_the_fix_in_an_accumulators_message_applies_to_the_whole_argument() -> None:
    code = """
    import torch
    class AverageMeter:
        def __init__(self):
            self.sum, self.count = 0.0, 0
        def update(self, val, n=1):
            self.sum += val * n
            self.count += n
    def train(model, loader, optimizer, weight):
        losses = AverageMeter()
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            optimizer.step()
            losses.update(loss * weight, x.size(0))
        return losses.sum
    """
    [message] = _messages(code, "RC254")
    assert "Pass `(loss * weight).detach()` (or `(loss * weight).item()`)" in message


def test_a_flag_bound_to_an_isinstance_test_narrows_like_the_test() -> None:
    # mmdetection3d's Box3DMode.convert: `single_box = isinstance(box, (list, tuple))`, then
    # `torch.tensor(box)` under `if single_box:` builds a tensor from a list of floats.
    code = """
    from typing import Sequence, Union
    import torch
    from torch import Tensor
    class Box3DMode:
        @staticmethod
        def convert(box: Union[Sequence[float], Tensor], src, dst) -> Union[Sequence[float], Tensor]:
            if src == dst:
                return box
            single_box = isinstance(box, (list, tuple))
            if single_box:
                arr = torch.tensor(box)[None, :]
                if dst == "same":
                    arr = box.clone()  # never runs for a list; before, this use made `box` read as a tensor
            else:
                arr = box.clone()
            return arr
    """
    assert _messages(code, "RC301") == []
    # Bound anew after the test, `box` is a tensor again whatever the flag says.
    rebound = code.replace("            if single_box:", "            box = box.clone()\n            if single_box:")
    [message] = _messages(rebound, "RC301")
    assert "on the tensor `box`" in message


MATCHING = """
import torch


def dynamic_k_matching(cost: torch.Tensor, valid_mask: torch.Tensor):
    matching = torch.zeros_like(cost)
    fg_mask_inboxes = matching.sum(1) > 0
    valid_mask[{index}] = fg_mask_inboxes
    return matching.argmax(1)


def assign(cost, valid_mask, labels):
    matched = dynamic_k_matching(cost, valid_mask)
    labels[valid_mask] = matched
    return labels
"""


def test_a_write_indexed_by_a_copy_of_its_own_target_is_deliberate() -> None:
    # SimOTA refines the caller's mask in place, and copies the index because it writes into
    # the very tensor it indexes with: the author knows where the write lands.
    assert _messages(MATCHING.format(index="valid_mask.clone()"), "RC102") == []
    [message] = _messages(MATCHING.format(index="valid_mask > 0"), "RC102")
    assert "writes in place into the argument `valid_mask`" in message


RESCORE = """
import numpy as np
import torch


def rescore(overlap: np.ndarray, scores: np.ndarray, thr: float, kind: str = "gaussian"):
    if kind == "linear":
        inds = np.where(overlap >= thr)[0]
        scores[inds] = scores[inds] * (1 - overlap[inds])
    else:
        scores = scores * np.exp(-overlap**2 / thr)
    return scores


def soft_nms(overlap, values, thr):
    scores = np.array(values)
    {call}
    return scores.argsort()
"""


def test_a_caller_that_rebinds_the_name_it_passed_a_slice_of_does_not_see_the_write() -> None:
    assert _messages(RESCORE.format(call="scores = rescore(overlap, scores[1:], thr)"), "RC102") == []
    [message] = _messages(RESCORE.format(call="kept = rescore(overlap, scores[1:], thr)"), "RC102")
    assert "the caller's array is changed" in message


BACKTRACE = """
import torch


def backtrace(trace: torch.Tensor):
    trace[0, :] = 2
    return trace.nonzero()


def dtw_cuda(x):
    trace = x.cumsum(0)
    return backtrace(trace.cpu().numpy())


def dtw(x):
    trace = x.cumsum(0)
    {call}
"""


def test_callers_that_pass_a_local_they_never_read_again_do_not_see_the_write() -> None:
    # whisper's `backtrace` marks the borders of the trace it is given; both callers build
    # the trace and return what it gives back, one through `.cpu().numpy()`.
    assert _messages(BACKTRACE.format(call="return backtrace(trace)"), "RC102") == []
    [message] = _messages(BACKTRACE.format(call="path = backtrace(trace)\n    return path + trace.sum()"), "RC102")
    assert "writes in place into the argument `trace`" in message


DECODE = """
import torch


def decode_n_tokens(model, token: torch.Tensor, input_pos: torch.Tensor, n: int):
    tokens = []
    for _ in range(n):
        token = model(token, input_pos)
        input_pos += 1
        tokens.append(token.clone())
    return tokens


def speculate(model, token, input_pos):
    return decode_n_tokens(model, token, input_pos.clone(), 4)


def generate(model, token, start, n):
    input_pos = torch.tensor([start])
    {call}
"""


def test_a_caller_that_passes_a_copy_does_not_see_the_write() -> None:
    # gpt-fast: the speculative path hands `decode_n_tokens` a copy of the positions, the
    # plain path positions it never reads again.
    assert _messages(DECODE.format(call="return decode_n_tokens(model, token, input_pos, n)"), "RC102") == []
    [message] = _messages(DECODE.format(call="tokens = decode_n_tokens(model, token, input_pos, n)\n    return tokens, input_pos.item()"), "RC102")
    assert "writes in place into the argument `input_pos`" in message


def test_the_fix_for_a_stored_list_of_a_tensor_detaches_the_tensor() -> None:
    code = """
    import torch
    from torch import nn
    class FeatureBank(nn.Module):
        def __init__(self):
            super().__init__()
            self.pool = nn.Linear(4, 4)
            self.all_features = []
        def forward(self, x):
            features = self.pool(x)
            self.all_features += list(features)
            return x
    """
    [message] = _messages(code, "RC252")
    assert "Store `list(features.detach())`" in message


EDGES = """
import torch


class Postprocessor:
    def __call__(self, node_preds, edge_scores, edge_preds):
        for i in range(len(edge_scores)):
            {call}
        return [s.argmax() for s in edge_scores]

    def decode_edges(self, node_labels: torch.Tensor, edge_scores: torch.Tensor, edge_labels: torch.Tensor):
        pos = edge_scores.clone()
        mask = edge_labels.bool()
        edge_scores[~mask] = pos[~mask]
        return torch.max(edge_scores, edge_scores.T), edge_labels
"""


def test_a_caller_that_stores_the_result_where_it_took_the_argument_from_does_not_see_the_write() -> None:
    # mmocr's SDMGR postprocessor: `edge_scores[i], edge_preds[i] = self.decode_edges(..., edge_scores[i], ...)`.
    stored_back = "edge_scores[i], edge_preds[i] = self.decode_edges(node_preds[i], edge_scores[i], edge_preds[i])"
    assert _messages(EDGES.format(call=stored_back), "RC102") == []
    elsewhere = "best, edge_preds[i] = self.decode_edges(node_preds[i], edge_scores[i], edge_preds[i])"
    [message] = _messages(EDGES.format(call=elsewhere), "RC102")
    assert "writes in place into the argument `edge_scores`" in message


QUANTIZER = """
import torch
from torch import nn


class AbstractQuantizer(nn.Module):
    def unmap_to_all(self, inds: torch.Tensor) -> torch.Tensor:
        inds = inds.reshape(inds.shape[0], -1)
        inds[inds >= self.used.shape[0]] = 0
        return torch.gather(self.used[None, :].expand(inds.shape[0], -1), 1, inds)


class VectorQuantizer(AbstractQuantizer):
    def get_codebook_entry(self, indices: torch.Tensor):
        {body}
"""


def test_a_method_called_from_a_subclass_in_the_file_is_judged_by_that_caller() -> None:
    # generative-models: the base class's `unmap_to_all` writes into the indices it reshapes;
    # the subclass that calls it rebinds `indices` to the result.
    assert _messages(QUANTIZER.format(body="indices = self.unmap_to_all(indices)\n        return self.embedding(indices)"), "RC102") == []
    kept = "flat = self.unmap_to_all(indices)\n        return self.embedding(flat) + indices.float().mean()"
    [message] = _messages(QUANTIZER.format(body=kept), "RC102")
    assert "writes in place into the argument `inds`" in message


OVERRIDDEN = """
import torch
from torch import nn


class Base(nn.Module):
    def step(self, x: torch.Tensor):
        x[0] = 1
        return x.sum()


class Child(Base):
    def step(self, x: torch.Tensor):
        return super().step(x)


class GrandChild(Child):
    def run(self, x):
        x = self.step(x)
        return x
"""


def test_a_subclass_that_overrides_the_method_hides_it_from_its_own_subclasses() -> None:
    # GrandChild's `self.step` is Child's: its rebinding says nothing of Base.step's callers
    # (and a class that overrides the method must not send the search round for ever).
    [message] = _messages(OVERRIDDEN, "RC102")
    assert "writes in place into the argument `x`" in message


PARAMETRIZED = """
import pytest
import torch
from torch import Tensor


@pytest.mark.parametrize(
    "mask, expected",
    [
        ([[0, 1, 0]], [[2.0, 3.0, 2.0]]),
        ([[1, 1, 1]], [[3.0, 3.0, 3.0]]),
    ],
)
def test_mask(mask: Tensor, expected: Tensor) -> None:
    result = torch.tensor(mask, dtype=torch.bool).float() + 2
    assert torch.allclose(result, torch.tensor(expected, dtype=torch.float))


@pytest.mark.parametrize("weights", [torch.ones(3), pytest.param(torch.zeros(3), id="zeros")])
def test_weights(weights) -> None:
    assert torch.tensor(weights).sum() >= 0
"""


def test_a_parametrized_test_receives_what_its_cases_pass_not_what_its_annotation_says() -> None:
    # The cases feed nested lists to `mask: Tensor`: `torch.tensor(mask)` builds a tensor from a
    # list, no copy-construct; cases that pass tensors make an unannotated parameter a tensor.
    findings = review_file(FileJob("test_m.py", textwrap.dedent(PARAMETRIZED).lstrip("\n"), None, ("RC301",))).findings
    assert [f.line for f in findings] == [20]


SNAPSHOT_ARMS = """
import torch


def load(model: torch.nn.Module, incoming: dict, strict: bool = True):
    state_dict = model.state_dict()
    update = {k: v for k, v in incoming.items() if k in state_dict and state_dict[k].shape == v.shape}
    if strict:
        model.load_state_dict(update)
    else:
        state_dict.update(update)
        model.load_state_dict(state_dict)


class Plugin:
    def after_batch(self):
        self.scheduler.step()
        self.trainer.model.scheduler_state_dict = self.scheduler.state_dict()
"""


def test_a_state_dict_read_only_in_the_other_arm_and_a_schedulers_state_are_not_stale_snapshots() -> None:
    # The load in the `if` arm never reaches the read in the `else` arm; an LR scheduler's
    # state_dict() holds counters and rates, no live tensor.
    assert _messages(SNAPSHOT_ARMS, "RC151") == []
    # Read after the load on the same path, it is one.
    [finding] = _messages(SNAPSHOT_ARMS.replace("        model.load_state_dict(update)\n", "        model.load_state_dict(update)\n        print(state_dict)\n"), "RC151")
    assert "read at line 9" in finding


SNAPSHOT_REBOUND = """
import torch


class Cached:
    def __init__(self, model: torch.nn.Module, store, key):
        cpu_state_dict = model.state_dict()
        if store is not None:
            canonical = store.acquire(key, cpu_state_dict)
            if canonical is not cpu_state_dict:
                model.load_state_dict(canonical{assign})
            cpu_state_dict = canonical
        self._cpu_state_dict = cpu_state_dict
"""


def test_a_state_dict_name_bound_anew_after_the_load_is_not_read_as_the_old_snapshot() -> None:
    # `cpu_state_dict = canonical` runs on every path from the load to the read; and
    # `assign=True` swaps the module's tensors for the given ones instead of writing into them.
    assert _messages(SNAPSHOT_REBOUND.format(assign=", assign=True"), "RC151") == []
    assert _messages(SNAPSHOT_REBOUND.format(assign=""), "RC151") == []
    # Bound anew only on one path, the read after the `if` may still see the loaded tensors.
    conditional = SNAPSHOT_REBOUND.format(assign="").replace("            cpu_state_dict = canonical\n", "            if key:\n                cpu_state_dict = canonical\n")
    [finding] = _messages(conditional, "RC151")
    assert "read at line 13" in finding


def test_loading_with_assign_leaves_the_old_state_dicts_tensors_as_they_were() -> None:
    source = "import torch\n\n\ndef swap(model: torch.nn.Module, canonical: dict):\n    before = model.state_dict()\n    model.load_state_dict(canonical{assign})\n    return before\n"
    assert _messages(source.format(assign=", assign=True"), "RC151") == []
    [finding] = _messages(source.format(assign=""), "RC151")
    assert "read at line 7" in finding


RIPPLE = """
import torch
from torch import nn


class Ripple(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.entity_embedding = nn.Embedding(n, 8)
        self.h_emb_list = []

    def forward(self, heads):
{reset}        for head in heads:
            self.h_emb_list.append(self.entity_embedding(head))
        return sum(h.sum() for h in self.h_emb_list)
"""


def test_a_list_on_self_made_anew_in_the_same_call_keeps_only_that_calls_graphs() -> None:
    assert _messages(RIPPLE.format(reset="        self.h_emb_list = []\n"), "RC252") == []
    # Emptied only on some calls, it keeps every other call's embeddings.
    [finding] = _messages(RIPPLE.format(reset="        if not heads:\n            self.h_emb_list = []\n"), "RC252")
    assert "on every call" in finding
    # Never emptied here: every call's graph stays in the list.
    [finding] = _messages(RIPPLE.format(reset=""), "RC252")
    assert "`self.h_emb_list`" in finding


RESHAPED = """
import torch
from torch import nn


class Items(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.embedding = nn.Embedding(n, 8)
        self.transform = nn.Linear(8, 8)
        self.n_hop = 2

    def full(self, item):
        self.items = self.embedding.weight[:10]
        return self._key()

    def _key(self):
        o_list = []
        for hop in range(self.n_hop):
            o = self.embedding.weight.sum()
            if len(self.items.size()) == 2:
                self.items = {first}
                self.items = {second}
            self.items = self.transform(self.items + o)
            o_list.append(o)
        return o_list
"""


def test_reshaping_an_attribute_in_place_of_itself_accumulates_nothing() -> None:
    assert _messages(RESHAPED.format(first="self.items.unsqueeze(0)", second="self.items.expand(4, -1, -1)"), "RC251") == []
    # Adding a new attached value to it on every call does: each call's graph stays in it.
    growing = RESHAPED.replace("        self.items = self.embedding.weight[:10]\n", "").format(first="self.items.unsqueeze(0)", second="self.items + o")
    [finding] = _messages(growing, "RC251")
    assert "accumulates `self.items + o`" in finding and "on every call" in finding


def test_a_forward_that_reads_its_input_only_as_inputs_0_is_handed_a_list_not_a_tensor() -> None:
    # Keras-style `forward(self, inputs)` with numpy arrays in the list: `inputs[0]` is not
    # known to be a tensor, and `.detach()` on it would raise.
    listed = """
        import torch
        from torch import nn
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.dense = nn.Linear(4, 6)
            def forward(self, inputs):
                return torch.relu(self.dense(torch.tensor(inputs[0], dtype=torch.float32)))
        """
    assert _messages(listed, "RC301") == []
    # Used whole as well, it is the input tensor, and so is its first row.
    whole = listed.replace("return torch.relu", "scale = inputs.abs().max()\n                return scale * torch.relu")
    [finding] = _messages(whole, "RC301")
    assert "`inputs[0]`" in finding


def test_a_parameter_annotated_tensor_but_read_as_a_mapping_is_not_the_callers_tensor() -> None:
    source = """
        import numpy as np
        import torch
        def plot_prediction(series: torch.Tensor, predictions: torch.Tensor, end: int = 500):
            for key in predictions.keys():
                predictions[key] = np.array([x.detach().cpu().numpy() for x in predictions[key]]).ravel()
            return series[:end], predictions["median"][:end]
        """
    assert _messages(source, "RC102") == []
    # A real tensor argument written the same way is the caller's tensor changed.
    tensor = source.replace("for key in predictions.keys():", "for key in range(3):").replace("np.array([x.detach().cpu().numpy() for x in predictions[key]]).ravel()", "0.0")
    [finding] = _messages(tensor, "RC102")
    assert "`predictions`" in finding


OPTIONAL_FILLER = """
import torch


def build(candidate_features, next_candidate_features):
    filler = None
    first = None
    if candidate_features is not None:
        filler = torch.zeros((candidate_features.shape[0], candidate_features.shape[1]){dtype})
        first = filler.clone().float()
    if next_candidate_features is not None:
        assert filler is not None
        return first, filler.clone().float()
    return first, None
"""


def test_a_name_that_is_none_or_a_float32_tensor_keeps_its_dtype_when_it_is_the_tensor() -> None:
    # `.float()` of a float32 tensor returns it: the clone is the only copy, on both paths.
    assert _messages(OPTIONAL_FILLER.format(dtype=""), "RC342") == []
    # Of an int64 tensor, `.float()` copies again, and the clone is thrown away (both lines).
    findings = _messages(OPTIONAL_FILLER.format(dtype=", dtype=torch.int64"), "RC342")
    assert len(findings) == 2 and all("copies twice" in f for f in findings)


REPTILE = """
import copy
import torch


def fast_adapt(batch, learner, optimizer, steps: int):
    for _ in range(steps):
        optimizer.zero_grad()
        learner(batch).sum().backward()
        optimizer.step()


def meta_train(model, tasks, meta_lr: float, fast_lr: float, steps: int):
    opt = torch.optim.SGD(model.parameters(), meta_lr)
    adapt_opt = torch.optim.Adam(model.parameters(), lr=fast_lr)
    adapt_opt_state = adapt_opt.state_dict()
    for batch in tasks:
        learner = copy.deepcopy(model)
{rebind}        adapt_opt.load_state_dict(adapt_opt_state)
        fast_adapt(batch, learner, adapt_opt, steps)
        adapt_opt_state = adapt_opt.state_dict()
        {step}.step()
"""


def test_an_optimizers_state_dict_is_changed_by_its_own_steps_only() -> None:
    fresh = "        adapt_opt = torch.optim.Adam(learner.parameters(), lr=fast_lr)\n"
    # The meta-optimizer's step leaves the inner optimizer's moments alone, and each task
    # hands the helper a new inner optimizer (its `load_state_dict` copies the state in).
    assert _messages(REPTILE.format(rebind=fresh, step="opt"), "RC151") == []
    # Stepping the very optimizer whose state was taken changes what the name holds.
    [finding] = _messages(REPTILE.format(rebind=fresh, step="adapt_opt"), "RC151")
    assert "`adapt_opt.step()`" in finding


QDQ = '''
import torch


def quant_weight(weight, scale, fp8_aware: bool = False):
    """{doc}"""
    if fp8_aware:
        weight.mul_(1 / scale)
    return torch.round(weight / scale)


def act_qdq(x, use_gpu_path: bool, chunk: int = 2048):
    {flag} = use_gpu_path and x.is_cuda
    if {flag}:
        flat = x.reshape(-1, x.shape[-1])
        for start in range(0, flat.shape[0], chunk):
            flat[start : start + chunk].copy_(torch.round(flat[start : start + chunk]))
        return x * 2
    return torch.round(x) * 2
'''


def test_a_function_that_says_it_works_in_place_writes_its_argument_on_purpose() -> None:
    assert _messages(QDQ.format(doc="Quant and dequant the weight. It's an in-place function.", flag="use_inplace"), "RC102") == []
    # Saying nothing, or saying the opposite, the writes change the caller's tensors.
    findings = _messages(QDQ.format(doc="Quant and dequant the weight; returns a new tensor, not in place.", flag="use_fast"), "RC102")
    assert len(findings) == 2 and "`weight`" in findings[0] and "`x`" in findings[1]


def test_a_flag_that_says_the_value_is_not_a_tensor_picks_the_arm_that_builds_one() -> None:
    source = """
        import torch
        def prep(sat_val):
            is_scalar = not isinstance(sat_val, torch.Tensor)
            out = torch.tensor(sat_val) if {test} else sat_val.clone().detach()
            return out.float()
        """
    assert _messages(source.format(test="is_scalar"), "RC301") == []
    # The flag's opposite builds from the tensor itself: the copy-construct warning.
    [finding] = _messages(source.format(test="not is_scalar"), "RC301")
    assert "`sat_val`" in finding


ACTIVATION_MAPS = """
import torch
@torch.no_grad()
def visualize(model, loader, use_gpu):
    for imgs in loader:
        if use_gpu:
            imgs = imgs.cuda()
        outputs = (model(imgs) ** 2).sum(1)
        if use_gpu:
            {back}
        for j in range(outputs.size(0)):
            save(outputs[j, ...].numpy())
"""


def test_a_tensor_moved_back_under_the_flag_that_moved_it_is_on_the_cpu() -> None:
    # The same flag tested twice: where it held, `.cpu()` brought the maps back; where it
    # failed, nothing ever left the CPU. `.numpy()` after both is safe.
    assert _messages(ACTIVATION_MAPS.format(back="imgs, outputs = imgs.cpu(), outputs.cpu()"), "RC321") == []
    negated = ACTIVATION_MAPS.format(back="pass").replace("        if use_gpu:\n            pass\n", "        if not use_gpu:\n            pass\n        else:\n            outputs = outputs.cpu()\n")
    assert _messages(negated, "RC321") == []
    # Moving back only the images, or under another flag, leaves the maps where they were.
    [only_images] = _messages(ACTIVATION_MAPS.format(back="imgs = imgs.cpu()"), "RC321")
    assert "may be on a GPU" in only_images
    other_flag = ACTIVATION_MAPS.format(back="outputs = outputs.cpu()").replace("        if use_gpu:\n            outputs", "        if verbose:\n            outputs")
    [other] = _messages(other_flag, "RC321")
    assert "may be on a GPU" in other


def test_a_sum_set_back_only_when_the_loop_logs_still_keeps_many_steps_graphs() -> None:
    # deepchem's fit loop steps the optimizer every batch and sets `avg_loss` back to 0 only
    # every `log_frequency` steps: a hundred steps' graphs between two logs. torchtune's
    # recipes set `running_loss` back in the arm that steps the optimizer: one step's
    # micro-batches (its Valid example).
    code = """
    import torch
    def fit(model, loader, optimizer, log_frequency=100):
        avg_loss = 0.0
        for step, batch in enumerate(loader):
            batch_loss = model(batch).mean()
            batch_loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            avg_loss += batch_loss
            if step % log_frequency == 0:
                print(float(avg_loss) / log_frequency)
                avg_loss = 0.0
    """
    [kept] = _messages(code, "RC251")
    assert "`avg_loss` accumulates `batch_loss`" in kept
    stepped = code.replace("            optimizer.step()\n            optimizer.zero_grad()\n", "").replace(
        "                avg_loss = 0.0\n", "                optimizer.step()\n                optimizer.zero_grad()\n                avg_loss = 0.0\n"
    )
    assert _messages(stepped, "RC251") == []


LORA_MERGE = """
import torch
class LoRAModule(torch.nn.Module):
    def merge_to(self, sd, dtype, device):
        org_sd = self.org_module.state_dict()
        weight = org_sd["weight"]
        weight = weight.to(torch.float)
        if self.split_dims is None:
            weight = weight + self.multiplier * (sd["lora_up.weight"] @ sd["lora_down.weight"])
            org_sd["weight"] = weight.to(dtype)
            self.org_module.load_state_dict(org_sd)
        else:
            for i in range(len(self.split_dims)):
                down_weight = sd[f"lora_down.{i}.weight"].to(torch.float).to(device)
                up_weight = sd[f"lora_up.{i}.weight"].to(torch.float).to(device)
                start, end = sum(self.split_dims[:i]), sum(self.split_dims[: i + 1])
                weight[start:end] += self.multiplier * (up_weight @ down_weight)
            org_sd[KEY] = weight.to(dtype)
            self.org_module.load_state_dict(org_sd)
"""


def test_a_merge_that_sets_the_entry_it_changed_before_loading_it_back_keeps_no_stale_value() -> None:
    # sd-scripts' LoRA merge: `weight` may be the live tensor (`.to(float)` of a float
    # weight), and the merge writes into it, but `org_sd["weight"]` is set to the merged one
    # before `load_state_dict` reads the dict: nothing stale is read.
    assert _messages(LORA_MERGE.replace("KEY", "\"weight\""), "RC151") == []
    [stale] = _messages(LORA_MERGE.replace("KEY", "\"bias\""), "RC151")
    assert "is not a snapshot" in stale


SINKHORN_FILTER = """
import torch
import torch.nn as nn


class CoarseMatching(nn.Module):
    def forward(self, sim_matrix, L, S):
        assign_matrix = self.log_optimal_transport(sim_matrix).exp()
        conf_matrix = assign_matrix[:, :-1, :-1]
        if {test}:
            filter0 = (assign_matrix.max(dim=2)[1] == S)[:, :-1]
            conf_matrix[filter0[..., None].repeat(1, 1, S)] = 0
        return conf_matrix.sum()
"""


def test_a_write_on_the_evaluation_path_breaks_no_backward() -> None:
    # LoFTR's coarse matching zeroes dustbin rows of `exp()`'s output, which autograd saved,
    # but only `if not self.training`: in evaluation nothing calls backward. The same write
    # on the training path breaks the backward pass.
    assert _messages(SINKHORN_FILTER.format(test="not self.training and self.skh_prefilter"), "RC201") == []
    [broken] = _messages(SINKHORN_FILTER.format(test="self.skh_prefilter"), "RC201")
    assert "autograd saved at line 7" in broken


SCALE_ZP = """
import torch


def scale_zp(level_low, level_high, input_low, input_high):
    y_zero_point = (level_low * input_high - level_high * input_low) / (input_high - input_low)
    level_low {op} torch.ones_like(y_zero_point).to(torch.int8)
    level_low = level_low.to(y_zero_point.device)
    return torch.max(level_low, torch.round(y_zero_point)), level_high
"""


def test_what_a_name_is_after_an_augmented_assignment_of_a_tensor_says_nothing_of_the_argument() -> None:
    # nncf's quantizer export takes integer quantization levels: `level_low *= torch.ones_like(...)`
    # makes a tensor of the product, and `level_low.to(...)` after it is that tensor's method,
    # not a sign that the caller passed one. Asking its `.dim()` before the write is.
    assert _messages(SCALE_ZP.format(op="*="), "RC102") == []
    [written] = _messages(SCALE_ZP.replace("    y_zero_point = (", "    rank = level_low.dim()\n    y_zero_point = (", 1).format(op="*="), "RC102")
    assert "level_low" in written


GPTVQ = """
import torch

FINE_TUNE = False


def optimize(weight: torch.Tensor, hessian: torch.Tensor):
    if FINE_TUNE:
        original_hessian = hessian.clone()
    else:
        original_hessian = hessian
    dead = torch.diag(hessian) == 0
    hessian[dead, dead] = 1
    rounded = weight / torch.diag(hessian)
    if {flag}:
        rounded = rounded - original_hessian.mean()
    return rounded
"""


def test_two_branches_on_one_flag_take_the_same_arm() -> None:
    # aimet's GPTVQ keeps `original_hessian = hessian` (no copy) only when fine-tuning is off,
    # and reads it only under the same flag, where it is a clone: the write into `hessian`
    # never shows through a name that is read. Read under another flag, it may.
    assert _messages(GPTVQ.format(flag="FINE_TUNE"), "RC101") == []
    [seen] = _messages(GPTVQ.format(flag="weight.is_cuda"), "RC101")
    assert "original_hessian" in seen


def test_a_write_through_a_detached_conversion_says_when_it_reaches_the_caller() -> None:
    # FBGEMM's reference backward rebinds `k2 = k2.to(dtype=compute_dtype).detach()` and then
    # adds to it in place: the caller's `k2` changes only when it already has that dtype, and
    # the message must say so rather than claim the write always reaches the caller.
    [message] = _messages(
        """
        import torch
        def simplicial_bwd(q, k2, compute_dtype=torch.bfloat16):
            q = q.to(dtype=compute_dtype).detach()
            k2 = k2.to(dtype=compute_dtype).detach()
            k2 += 1 / q.shape[-1]
            return q @ k2.transpose(-1, -2)
        """,
        "RC102",
    )
    assert "when the conversion returns the same tensor" in message


def test_a_slice_of_a_list_the_caller_passes_is_not_the_callers_tensor() -> None:
    # TRL's `batched_forward_pass` annotates `response_masks: Optional[torch.Tensor]`, but its
    # one caller, `step`, hands on its own `response_masks: Optional[List[torch.LongTensor]]`:
    # `masks_batch = response_masks[i:j]` is a new list, and writing an item of it changes
    # nothing of the caller's (a call that leaves it to its default passes no tensor either).
    # The same function with a caller that passes a tensor is reported.
    source = """
        import math
        from typing import List, Optional
        import torch
        class Trainer:
            def step(self, queries, response_masks: {annotation} = None):
                reference = self.batched_pass(queries)
                return reference, self.batched_pass(queries, response_masks=response_masks)
            def batched_pass(self, queries: torch.Tensor, response_masks: Optional[torch.Tensor] = None):
                out = []
                for i in range(math.ceil(len(queries) / 4)):
                    masks_batch = response_masks[i * 4 : (i + 1) * 4]
                    for j in range(len(masks_batch)):
                        masks_batch[j] = masks_batch[j][1:]
                        out.append(masks_batch[j].sum())
                return out
        """
    assert _messages(source.replace("{annotation}", "Optional[List[torch.Tensor]]"), "RC102") == []
    [kept] = _messages(source.replace("{annotation}", "Optional[torch.Tensor]"), "RC102")
    assert "the argument `response_masks`" in kept


def test_a_sum_of_a_lists_items_inside_a_step_loop_still_keeps_each_steps_graph() -> None:
    # Adding up the items of a list is harmless when that loop is the only one; started
    # before an epoch loop, the same sum keeps every epoch's graphs.
    [message] = _messages(
        """
        import torch
        def train(model, batches, epochs: int, opt):
            total = 0
            for epoch in range(epochs):
                losses = [model(b).sum() for b in batches]
                for loss in losses:
                    total += loss
                sum(losses).backward()
                opt.step()
            return total
        """,
        "RC251",
    )
    assert "`total` accumulates `loss`" in message and "loop at line 4" in message


DEVICE_BY_FLAG = """
import torch

def predict(frames: torch.Tensor, flag: bool):
    device = {choice}
    masks = torch.zeros(len(frames), 4, device=device)
    if flag:
        return masks.cpu().numpy()
    else:
        return masks.numpy()
"""


def test_a_device_chosen_by_a_flag_narrows_only_the_way_the_flag_reads() -> None:
    # `"cuda" if flag else "cpu"` (and `"cpu" if not flag else "cuda"`) is a GPU exactly when
    # the flag holds: in the `else` arm of `if flag:` the masks are on the CPU. `"cuda" if not
    # flag else "cpu"` is a GPU when the flag fails: that `else` arm converts a GPU tensor.
    for gpu_when_true in ('"cuda" if flag else "cpu"', '"cpu" if not flag else "cuda"'):
        assert _messages(DEVICE_BY_FLAG.format(choice=gpu_when_true), "RC321") == []
    [message] = _messages(DEVICE_BY_FLAG.format(choice='"cuda" if not flag else "cpu"'), "RC321")
    assert "`masks` may be on a GPU" in message


SO2_BLOCK = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, c: int, k: int):
        super().__init__()
        self.k = k
        self.fc1 = nn.Linear(k * c, c, bias=False)
        self.fc2 = nn.Linear(c, k * c, bias=False)
        self.to_m = nn.Parameter(torch.randn(8, 8))

    def forward(self, x, gate):
        n = x.shape[0]
        x = torch.einsum("nac,ba->nbc", x, self.to_m)
        x_0 = {part}.contiguous()
        x_0 = self.fc1(x_0.view(n, -1))
        x_0 = self.fc2(x_0 * gate)
        x[:, 0 : self.k] = x_0.view(n, self.k, -1)
        return x
"""


def test_contiguous_of_an_inner_slice_is_a_copy_that_autograd_saves_instead() -> None:
    # fairchem's eSCN: `x[:, 0:k].contiguous()` copies (the slice skips part of dimension 1), so
    # the Linear saves the copy and writing the result back into `x` harms nothing; a slice of
    # the leading dimension is contiguous already, and the Linear then saves a view of `x`.
    assert _messages(SO2_BLOCK.format(part="x[:, 0 : self.k]"), "RC201") == []
    [saved] = _messages(SO2_BLOCK.format(part="x[0 : self.k]"), "RC201")
    assert "self.fc1" in saved


CODEC = """
import numpy as np
import torch


class Codec:
    def __init__(self, cutoffs, use_gpu: bool):
        self.use_gpu = use_gpu
        {move}
        self.cutoffs = cutoffs

    def binarize(self, residuals):
        codes = torch.bucketize(residuals.float(), self.cutoffs)
        if self.use_gpu:
            return codes.cpu().numpy()
        return np.asarray(codes)
"""


def test_a_tensor_moved_under_a_flag_in_init_is_on_the_cpu_where_a_method_sees_the_flag_fail() -> None:
    # ColBERT's ResidualCodec: the cutoffs go to the GPU only under `self.use_gpu`, inside a
    # check that they are a tensor at all; the `else` of `if self.use_gpu:` in another method
    # converts on the CPU. Moved unconditionally, the same conversion is reported.
    nested = "if torch.is_tensor(cutoffs):\n            if self.use_gpu:\n                cutoffs = cutoffs.cuda()"
    assert _messages(CODEC.format(move=nested), "RC321") == []
    assert _messages(CODEC.format(move="if True:\n            if self.use_gpu:\n                cutoffs = cutoffs.cuda()"), "RC321") == []
    [moved] = _messages(CODEC.format(move="cutoffs = cutoffs.cuda()"), "RC321")
    assert "`codes`" in moved


PARITY = """
import numpy as np


def run(net, query, backend):
    if backend == "pt":
        import torch

        return net(torch.{convert}(query)).detach().cpu().numpy()
    out = net.call(query)
    return np.asarray(out)
"""


def test_a_method_called_with_a_numpy_array_is_not_a_submodule_whose_output_requires_grad() -> None:
    # deepmd-kit's backend-parity tests: `torch.from_numpy(query)` says `query` is a NumPy
    # array, so `net.call(query)` is the NumPy backend's entry point, not a submodule, and its
    # result needs no `.detach()`. `torch.as_tensor` takes tensors too: then it may be one.
    assert _messages(PARITY.format(convert="from_numpy"), "RC321") == []
    [unknown] = _messages(PARITY.format(convert="as_tensor"), "RC321")
    assert "net.call(query)" in unknown


BAR_DISTRIBUTION = """
import torch


class BarDistribution(torch.nn.Module):
    def ignore_nans(self, y: torch.Tensor) -> torch.Tensor:
        mask = torch.isnan(y)
        y[mask] = self.borders[0]
        return mask

    def forward(self, logits: torch.Tensor, y: torch.Tensor):
        y = {bind}.view(*logits.shape[:-1])
        mask = self.ignore_nans(y)
        return self.bucket(y), mask
"""


def test_a_write_into_the_copy_a_caller_made_for_it_is_what_the_caller_meant() -> None:
    # TabPFN's bar distribution: `forward` clones the targets and hands the copy to
    # `ignore_init` (here `ignore_nans`, a name that says nothing of writing), whose job is to
    # fill their NaNs ("# alters y"), then reads the result. A caller that hands over a view
    # of its own argument instead is changed behind its back.
    assert _messages(BAR_DISTRIBUTION.format(bind="y.clone()"), "RC102") == []
    [changed] = _messages(BAR_DISTRIBUTION.format(bind="y"), "RC102")
    assert "`y[mask] = self.borders[0]`" in changed


AVERAGER = """
import torch
from torch import nn


def update(model: nn.Module, av_model: nn.Module, gamma: float):
    model_sd = model.state_dict()
    av_sd = av_model.state_dict()
    opt = torch.optim.SGD(av_model.parameters(), lr=0.1)
    for k in model_sd.keys():
        if isinstance(av_sd[k], torch.LongTensor):
            continue
        {write}
    {step}
    return av_sd
"""


def test_an_average_written_through_its_own_state_dict_is_a_handle_not_a_snapshot() -> None:
    # open_lm's model averaging: `av_sd[k].mul_(g).add_(...)` updates the averaged model
    # through its state_dict on purpose (the chain's first link is the dict's own tensor). A
    # state_dict whose model an optimizer steps is still no snapshot.
    assert _messages(AVERAGER.format(write="av_sd[k].mul_(gamma).add_(model_sd[k], alpha=1 - gamma)", step="pass"), "RC151") == []
    [stale] = _messages(AVERAGER.format(write="pass", step="opt.step()"), "RC151")
    assert "`opt.step()` at line 13" in stale


ADASUM = """
import torch


class Adasum({base}):
    def __init__(self, params, starting):
        super().__init__(params, {{}})
        self._starting_models = starting

    def _allreduce_grad_async(self, p):
        start = self._starting_models[p]
        start.data.copy_(p)
        super().step()
        p.data.sub_(start)
        handle = allreduce_async_(p.data)
        return handle
"""


def test_an_optimizers_helper_may_write_into_the_parameters_it_is_handed() -> None:
    # horovod's Adasum optimizer turns a parameter into its own update (`p.data.sub_(start)`)
    # in a helper of `step`: updating parameters is an optimizer's job. The same method in a
    # class that is no optimizer changes its caller's tensor.
    assert _messages(ADASUM.format(base="torch.optim.Optimizer"), "RC102") == []
    [changed] = _messages(ADASUM.format(base="object"), "RC102")
    assert "`p.data.sub_(start)`" in changed


SENTINEL = """
import torch


def extend_nlist(extended_atype: torch.Tensor, nlist: torch.Tensor) -> torch.Tensor:
    nall = extended_atype.shape[1]
    nlist_mask = nlist != -1
    nlist[nlist == -1] = 0
    nlist_shift = nlist + nall
    nlist[~nlist_mask] = {restore}
    nlist_shift[~nlist_mask] = -1
    return torch.cat([nlist, nlist_shift], dim=-1)
"""


def test_a_sentinel_swapped_out_and_written_back_leaves_the_argument_as_it_was() -> None:
    # deepmd-kit's spin model: the -1 padding of a neighbour list is set to 0 for one sum and
    # put back, so the caller's list ends as it began. Written back as another value, the
    # caller's -1 entries are changed for good.
    assert _messages(SENTINEL.format(restore="-1"), "RC102") == []
    [changed] = _messages(SENTINEL.format(restore="-2"), "RC102")
    assert "`nlist[nlist == -1] = 0`" in changed


FANIN = """
import numpy as np
import torch


def {name}(tensor: torch.Tensor):
    size = tensor.size()
    fan_in = size[0] if len(size) == 2 else np.prod(size[1:])
    bound = 1.0 / np.sqrt(fan_in)
    return tensor.data.uniform_(-bound, bound)
"""


def test_a_function_named_as_an_initializer_fills_the_tensor_it_is_given() -> None:
    # rlkit's `fanin_init(tensor)` is an initializer as `nn.init`'s are: filling its argument
    # is its job. The same body under a name that says nothing of the kind changes its
    # caller's tensor.
    assert _messages(FANIN.format(name="fanin_init"), "RC102") == []
    [changed] = _messages(FANIN.format(name="fanin_bound"), "RC102")
    assert "uniform_" in changed


REWEIGHT = """
import torch
import torch.nn.functional as F


class Reweight(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.head = torch.nn.Linear(4, 2)
        self.alpha = torch.ones(n, n)

    def update(self, feats, ys):
        losses = [F.cross_entropy(self.head(feats[i]), ys[i]) * self.alpha[0, i]{taken} for i in range(len(feats))]
        total = sum(losses)
        for i in range(len(losses)):
            self.alpha[0, i] *= (0.1 * losses[i].data).exp()
        total.backward()
"""


def test_a_weight_saved_through_data_and_then_updated_is_said_to_give_a_silent_wrong_gradient() -> None:
    # DomainBed's TRM: `.data` has its own version counter, so backward does not raise; the
    # gradient silently uses the updated weight. Saved as itself, backward raises.
    [silent] = _messages(REWEIGHT.format(taken=".data.detach()"), "RC201")
    assert "nothing raises" in silent and "silently" in silent and "will raise" not in silent
    [loud] = _messages(REWEIGHT.format(taken=".detach()"), "RC201")
    assert "will raise" in loud


def test_an_entry_is_not_a_tensor_only_in_the_arm_where_its_type_test_failed() -> None:
    # SplaTAM's viz scripts convert `torch.tensor(all_params[k])` only under
    # `if not isinstance(all_params[k], torch.Tensor):`; past that `if`, and in the arm where the
    # test held, the entry is what it was before.
    code = """
    import torch
    def load(raw):
        params = {k: torch.tensor(raw[k]).float() for k in raw}
        for k in list(params):
            if not isinstance(params[k], torch.Tensor):
                params[k] = torch.tensor(params[k]).float()
        return params
    def after_the_test(x: torch.Tensor):
        d = {"a": x}
        if not isinstance(d["a"], torch.Tensor):
            d["a"] = torch.as_tensor(d["a"])
        return torch.tensor(d["a"])
    """
    text = textwrap.dedent(code).lstrip("\n")
    findings = review_file(FileJob("m.py", text, None, ("RC301",))).findings
    assert [f.line for f in findings] == [12]


def test_the_values_of_a_reduction_along_a_dimension_keep_the_graph_and_its_indices_do_not() -> None:
    # `x.max(1)` is (values, indices), `x.max()` one tensor, `x.max(y)` the elementwise
    # maximum: only the values (and the two tensors) stay attached.
    code = """
    import torch
    from torch import nn
    def show(x):
        net = nn.Linear(4, 3)
        pred = net(x)
        a = pred.max(1)[1].numpy()
        b = torch.max(pred, dim=1).indices.numpy()
        c = pred.max(1)[0].numpy()
        d = pred.max().numpy()
        e = torch.max(pred, pred * 2).numpy()
        f = pred.max(dim=1).values.numpy()
        return a, b, c, d, e, f
    """
    text = textwrap.dedent(code).lstrip("\n")
    findings = review_file(FileJob("m.py", text, None, ("RC321",))).findings
    assert [f.line for f in findings] == [8, 9, 10, 11]


def test_a_write_into_an_alias_of_a_name_and_of_the_objects_array_is_told_once() -> None:
    # LTSF-Linear's Pyraformer dataset: `seq_y_mark` shares the stored covariates and the
    # window `seq_x_mark` returned beside it; one write, one finding (the name read again).
    code = """
    import torch
    class Windows:
        def __init__(self, path, seq_len: int, pred_len: int):
            self.all_data, self.covariates = load(path)
            self.all_data = torch.from_numpy(self.all_data)
            self.covariates = torch.from_numpy(self.covariates)
            self.seq_len, self.pred_len = seq_len, pred_len
        def __getitem__(self, index):
            seq_idx = index % self.all_data.size(0)
            s_begin = index * 24
            s_end = s_begin + self.seq_len
            r_begin = s_end - self.pred_len
            r_end = r_begin + self.seq_len
            seq_x = self.all_data[seq_idx, s_begin:s_end].clone()
            seq_x_mark = self.covariates[s_begin:s_end]
            seq_x_mark[:, -1] = int(seq_idx)
            seq_y_mark = self.covariates[r_begin:r_end]
            seq_y_mark[:, -1] = int(seq_idx)
            return seq_x, seq_x_mark, seq_y_mark
    """
    text = textwrap.dedent(code).lstrip("\n")
    findings = review_file(example_job("m.py", text, None, ("RC105",))).findings
    assert [(f.line, "seq_x_mark" in f.message) for f in findings] == [(16, True), (18, True)]


LSA = """
import torch
import torch.nn as nn
import torch.nn.functional as F
class LSA(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.score = nn.Linear(dim, 1)
        self.cumulative = None
    def init_attention(self, keys: torch.Tensor):
        self.cumulative = torch.zeros(keys.size(0), keys.size(1), device=keys.device)
    def forward(self, keys: torch.Tensor, t: int):
        {start}
        scores = F.softmax(self.score(keys + self.cumulative.unsqueeze(-1)).squeeze(-1), dim=1)
        self.cumulative = self.cumulative + scores
        return scores
"""


def test_a_sum_on_self_started_afresh_for_each_sequence_keeps_one_sequences_graph() -> None:
    # Real-Time-Voice-Cloning's location-sensitive attention: the decoder passes its step
    # number, and step 0 starts the cumulative weights again, so the sum holds one decoding's
    # graph, which that decoding's backward needs.
    assert _messages(LSA.format(start="if t == 0: self.init_attention(keys)"), "RC251") == []
    assert _messages(LSA.format(start="if t == 0:\n            self.cumulative = torch.zeros_like(keys[..., 0])"), "RC251") == []
    # Started only while it is unset, it is started once, and every later call adds to it.
    [once] = _messages(LSA.format(start="if self.cumulative is None: self.init_attention(keys)"), "RC251")
    assert "on every call (it lives on `self`)" in once
    # A step number that starts nothing leaves the sum growing as before.
    assert len(_messages(LSA.format(start="if t == 0: print(t)"), "RC251")) == 1


CONVERTER = """
import numpy
import torch
{other}


def paddle_to_torch(layer, module):
    arrays = {{}}
    for param in layer.named_parameters():
        arrays[param[0]] = param[1].numpy()
    for name, param in module.named_parameters():
        param.data = torch.from_numpy(numpy.transpose(arrays[name]))
"""


def test_a_layer_beside_another_framework_with_torchs_method_names_is_not_taken_for_a_module() -> None:
    # PytorchOCR's padiff converters: `layer` is a Paddle layer, whose parameters' `.numpy()`
    # is how Paddle hands out their values; only the import says which framework it is.
    assert _messages(CONVERTER.format(other="import paddle"), "RC321") == []
    assert _messages(CONVERTER.format(other="from paddle import nn as pnn"), "RC321") == []
    # In a file of torch alone, `named_parameters()` is a module's and `.numpy()` raises.
    [raises] = _messages(CONVERTER.format(other=""), "RC321")
    assert "`param[1]` requires grad" in raises


SPARSE_TO_TORCH = """
import numpy as np
import torch
def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    {convert}
    indices = torch.from_numpy(np.vstack((coo.row, coo.col)).astype(np.int64))
    values = torch.Tensor(coo.data)
    return torch.sparse_coo_tensor(indices, values, torch.Size(coo.shape))
"""


def test_what_a_sparse_matrix_method_returns_is_a_matrix_whose_data_is_an_array() -> None:
    # hgcn's helper: `sparse_mx.tocoo()` is SciPy's, so `.data` is the matrix's values, an
    # ndarray that `torch.Tensor(...)` copies into a new tensor, not an alias of a tensor.
    assert _messages(SPARSE_TO_TORCH.format(convert="coo = sparse_mx.tocoo()"), "RC302") == []
    assert _messages(SPARSE_TO_TORCH.format(convert="coo = sparse_mx = sparse_mx.tocsr().tocoo()"), "RC302") == []
    # A tensor's own sparse conversion keeps `.data` a tensor's, which the constructor aliases.
    [alias] = _messages(SPARSE_TO_TORCH.format(convert="coo = sparse_mx.to_sparse_coo().coalesce()"), "RC302")
    assert "does not copy" in alias


LEAPFROG = """
import torch
from .utils import copy_or_set_


def leapfrog(p: torch.Tensor, r: torch.Tensor, epsilon: float, retract):
    r.add_(epsilon * p.grad)
    p_new, r_new = retract(p, r * epsilon, r)
    {write}
    r.copy_(r_new)
"""


def _change_messages(base: str, new: str, rule: str) -> list[str]:
    old_text, new_text = (textwrap.dedent(t).lstrip("\n") for t in (base, new))
    return [f.message for f in review_file(example_job("m.py", new_text, old_text, (rule,))).findings]


def test_a_base_that_wrote_the_argument_through_an_in_place_helper_already_wrote_it() -> None:
    # geoopt's "remove unsafe copy or set": `copy_or_set_(p, p_)` became `p.copy_(p_)`. The
    # helper's trailing underscore is torch's in-place convention: the base wrote `p` too.
    base = LEAPFROG.format(write="copy_or_set_(p, p_new)")
    assert _change_messages(base, LEAPFROG.format(write="p.copy_(p_new)"), "RC112") == []
    # A helper without the underscore says nothing of writing: the change's write is new.
    [new_write] = _change_messages(LEAPFROG.format(write="keep(p, p_new)"), LEAPFROG.format(write="p.copy_(p_new)"), "RC112")
    assert "write into its argument `p`" in new_write


RECORD = """
{imports}


class PPO:
    def record_transition(self, states, rewards, truncated, timestep):
        # see torch.optim.lr_scheduler for the schedulers
        values = self.value(states)
        {bootstrap}
        self.memory.add_samples(states=states, rewards=rewards, values=values)
"""


def test_a_file_of_another_array_framework_that_names_torch_only_in_words_is_not_reviewed_as_torch() -> None:
    # skrl's JAX agents: `rewards += gamma * values * truncated` builds a new JAX array, and
    # the file says "torch" only in a comment. The torch agent beside it writes the caller's
    # tensor with the same line.
    before = RECORD.format(imports="{imports}", bootstrap="pass")
    after = RECORD.format(imports="{imports}", bootstrap="rewards += 0.99 * values * truncated")
    for jax_imports in ("import jax\nimport jax.numpy as jnp", "import tensorflow as tf"):
        assert _change_messages(before.format(imports=jax_imports), after.format(imports=jax_imports), "RC112") == []
    [torch_write] = _change_messages(before.format(imports="import torch"), after.format(imports="import torch"), "RC112")
    assert "write into its argument `rewards`" in torch_write


def test_two_rules_proposing_one_edit_to_one_line_give_one_finding() -> None:
    # torchattacks' APGD: `x_adv[fl] = x_best[fl].clone()` is a slice assignment of a clone
    # (RC348) and a clone of a fresh index (RC341); both would rewrite the line to
    # `x_adv[fl] = x_best[fl]`, and the review says it once.
    code = """
    import numpy as np
    import torch
    def restore(x_adv: torch.Tensor, x_best: torch.Tensor, grad: torch.Tensor, grad_best: torch.Tensor, improved: np.ndarray):
        fl = np.where(improved)
        x_adv[fl] = x_best[fl].clone()
        grad[fl] = grad_best[fl].clone()
        return x_adv, grad
    """
    text = textwrap.dedent(code).lstrip("\n")
    alone = {rule: [f.line for f in review_file(example_job("m.py", text, None, (rule,))).findings] for rule in ("RC341", "RC348")}
    assert alone == {"RC341": [5, 6], "RC348": [5, 6]}
    both = review_file(example_job("m.py", text, None, ("RC341", "RC348"))).findings
    assert [(f.line, f.rule) for f in both] == [(5, "RC348"), (6, "RC348")]


def test_a_list_made_anew_in_the_arm_that_splits_each_batch_lives_one_optimizer_step() -> None:
    # hysts' pytorch_image_classification before the refactor: the chunk loop and its
    # `outputs = []` sit in the `else:` arm of the step, and the optimizer steps after it.
    code = """
    import torch
    def train(model, criterion, optimizer, loader, n_split: int, whole: bool):
        for data, targets in loader:
            optimizer.zero_grad()
            if whole:
                outputs = model(data)
                criterion(outputs, targets).backward()
            else:
                outputs = []
                for data_chunk, target_chunk in zip(data.chunk(n_split), targets.chunk(n_split)):
                    output_chunk = model(data_chunk)
                    outputs.append(output_chunk)
                    criterion(output_chunk, target_chunk).backward()
                outputs = torch.cat(outputs)
            optimizer.step()
            print((outputs.argmax(1) == targets).float().mean().item())
    """
    assert _messages(code, "RC252") == []
    # Kept across the steps instead, the chunks' outputs pile up step after step.
    kept = code.replace("        for data, targets in loader:", "        history = []\n        for data, targets in loader:")
    kept = kept.replace("outputs.append(output_chunk)", "outputs.append(output_chunk)\n                    history.append(output_chunk)")
    assert len(_messages(kept, "RC252")) == 1


def test_a_copy_construct_of_a_detached_tensor_is_fixed_with_one_detach() -> None:
    code = """
    import torch
    from torch import nn
    class ThetaModel(nn.Module):
        def __init__(self, theta: torch.Tensor):
            super().__init__()
            self.theta = nn.Parameter(torch.tensor(theta.detach(), requires_grad=True))
    """
    [finding] = review_file(FileJob("m.py", textwrap.dedent(code).lstrip("\n"), None, ("RC301",))).findings
    assert finding.suggestion is not None
    assert "theta.detach().clone().requires_grad_(True)" in finding.suggestion.replacement
    assert "detach().detach()" not in finding.suggestion.replacement


QUANTILES = """
from typing import List, Optional, Union

import torch


class QuantileTensor:
    def __init__(self, base: torch.Tensor, tau: torch.Tensor) -> None:
        self.base, self.tau = base, tau

    def quantiles(self, tau: {annotation}) -> "QuantileTensor":
        new = []
        for tau_i in tau:
            ind = min(int(torch.bucketize(tau_i, self.tau)), self.tau.numel() - 1)
            new.append(torch.select(self.base, 0, ind))
        return QuantileTensor(torch.stack(new), torch.tensor(tau))
"""


def test_a_parameter_annotated_to_take_lists_too_is_left_to_torch_tensor() -> None:
    # pytorch_retrieve's `quantiles(tau: Union[List[float], torch.Tensor])`: for a list,
    # `torch.tensor(tau)` is the call to make, and `.detach().clone()` would raise.
    assert _messages(QUANTILES.format(annotation="Union[List[float], torch.Tensor]"), "RC301") == []
    assert _messages(QUANTILES.format(annotation="List[float] | torch.Tensor"), "RC301") == []
    # A tensor, however it is spelled, is still copy-constructed.
    for annotation in ("torch.Tensor", '"torch.Tensor"', "Optional[torch.Tensor]"):
        [found] = _messages(QUANTILES.format(annotation=annotation), "RC301")
        assert "on the tensor `tau`" in found, annotation


def test_a_state_dict_written_through_is_copied_tensor_by_tensor() -> None:
    # A dict has no `.clone()`: the fix that makes the binding a copy must copy the tensors it holds.
    source = """
    import torch


    def vector_to_state_dict(vec, model):
        state_dict = model.state_dict()
        pointer = 0
        for name, param in state_dict.items():
            num = param.numel()
            state_dict[name].copy_(vec[pointer : pointer + num].view_as(param))
            pointer += num
        return state_dict
    """
    text = textwrap.dedent(source).lstrip("\n")
    [finding] = review_file(FileJob("m.py", text, None, ("RC102",))).findings
    assert finding.suggestion is not None
    assert finding.suggestion.replacement.strip() == "state_dict = {k: v.clone() for k, v in model.state_dict().items()}"


IHVP = """
import torch


def influence(hess_inv: torch.Tensor, full_gradient: torch.Tensor, labels):
    scores = []
    for label in labels:
        start, stop = label * 8, label * 8 + 8
        hess_inv_delete = hess_inv.clone()
        hess_inv_delete = torch.cat([hess_inv_delete[:, :start], hess_inv_delete[:, stop:]], dim=1)
        grad = torch.cat([full_gradient[:start], full_gradient[stop:]])
        scores.append((hess_inv_delete @ grad).sum().item())
    return scores


def lissa(hvp, vec: torch.Tensor, repeat: int, depth: int, scale: float):
    ihvp = 0.0
    for r in range(repeat):
        h_est = vec.clone()
        for t in range(depth):
            h_est = vec + h_est - hvp(h_est) / scale
        ihvp = ihvp + h_est / scale
    return ihvp
"""


def test_a_per_iteration_copy_nothing_writes_is_said_to_be_needless() -> None:
    # Only read (sliced into `torch.cat`), the copy is not needed at all: refilling a buffer
    # would be the wrong advice. Handed to a callback that might write into it, it may be.
    read_only, handed = _messages(IHVP, "RC344")
    assert "`hess_inv_delete = hess_inv` reads the same values without copying" in read_only and "empty_like" not in read_only
    assert "Allocate once before the loop (`h_est = torch.empty_like(vec)`)" in handed


def test_a_needless_copy_of_a_tensor_of_unknown_storage_is_said_so_unless_the_source_is_written() -> None:
    code = """
    import torch


    def unwritten(load_hessian, labels):
        hess_inv = load_hessian()
        out = []
        for label in labels:
            h = hess_inv.clone()
            out.append(torch.cat([h[:label], h[label + 1:]]).sum().item())
        return out


    def written(load_hessian, labels):
        hess_inv = load_hessian()
        out = []
        for label in labels:
            h = hess_inv.clone()
            hess_inv[label] = 0
            out.append((h - hess_inv).sum().item())
        return out
    """
    needless, snapshot = _messages(code, "RC344")
    assert "`h = hess_inv` reads the same values without copying" in needless
    assert "reads the same values" not in snapshot



FROZEN_COPY = """
import copy
import torch
from torch import nn


class Tuned(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.output = copy.deepcopy(model)
        {freeze}

    def rescale(self, factor: float):
        for p in self.output.parameters():
            p.mul_(factor)
"""
FREEZE_ALL = "for p in self.output.parameters():\n            p.requires_grad = False"


def test_a_write_into_parameters_the_constructor_froze_is_reported_only_when_a_part_is_unfrozen() -> None:
    # Every parameter frozen by a loop in `__init__`: the in-place write is legal.
    assert _messages(FROZEN_COPY.format(freeze=FREEZE_ALL), "RC202") == []
    # The head turned back on: its parameters are leaves that require grad, and `mul_` raises.
    unfreeze = "\n        for p in self.output.fc.parameters():\n            p.requires_grad = True"
    [leaf] = _messages(FROZEN_COPY.format(freeze=FREEZE_ALL + unfreeze), "RC202")
    assert "`p.mul_(factor)`" in leaf and "leaf tensor that requires grad" in leaf
    # A freezing loop that skips some parameters freezes no module.
    skipping = "for name, p in self.output.named_parameters():\n            if 'fc' in name:\n                continue\n            p.requires_grad = False"
    assert len(_messages(FROZEN_COPY.format(freeze=skipping), "RC202")) == 1


TRIAL_STEPS = """
import numpy as np
import torch
import torch.nn.functional as F


def train(model, optimizer, loader, evaluate):
    for data, target in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        gradients = [param.grad.clone() for param in model.parameters()]
        params = model.state_dict()
        losses = []
        for lr in np.linspace(0.1, 0.5, 10):
            with torch.no_grad():
                for {names} in {iterable}:
                    param -= lr * gradient
                losses.append(evaluate(model))
                for param, gradient in zip(params.values(), gradients):
                    param += lr * gradient
        {after}
"""


def test_a_state_dict_written_through_its_own_entries_is_a_handle_not_a_snapshot() -> None:
    # CDP-SGD tries each learning rate by writing the step into the model through the dict's
    # entries and taking it back: the references are the point, and a copy would break it.
    assert _messages(TRIAL_STEPS.format(names="param, gradient", iterable="zip(params.values(), gradients)", after="pass"), "RC151") == []
    assert _messages(TRIAL_STEPS.format(names="i, (param, gradient)", iterable="enumerate(zip(params.values(), gradients))", after="pass"), "RC151") == []
    # Written through the model's own parameters instead, the dict read afterwards is stale.
    stale = TRIAL_STEPS.format(names="param, gradient", iterable="zip(model.parameters(), gradients)", after="best = params")
    [message] = _messages(stale.replace("best = params", "torch.save(params, 'best.pt')"), "RC151")
    assert "is not a snapshot" in message


UNIVERSAL_PERTURBATION = """
import torch
import torch.nn.functional as F


def universal_perturbation(model, loader, n, alpha: float, bound: float, epochs: int):
    for epoch in range(epochs):
        {outer}
        for x, y in loader:
            {top}
            loss = F.cross_entropy(model(x + n), y)
            model.zero_grad()
            loss.backward()
            n = n - alpha * n.grad.sign()
            n = n.clamp(-bound, bound)
    return n.detach()
"""


def test_a_perturbation_cut_at_the_top_of_each_pass_keeps_one_step_of_graph() -> None:
    # `n = n.data.requires_grad_()` starts every pass from a fresh leaf (a universal adversarial
    # perturbation's step): the update's graph never reaches the next step.
    assert _messages(UNIVERSAL_PERTURBATION.format(outer="", top="n = n.data.requires_grad_()"), "RC251") == []
    assert _messages(UNIVERSAL_PERTURBATION.format(outer="", top="n = n.detach().requires_grad_(True)"), "RC251") == []
    # Cut once per epoch only, the steps of an epoch chain their graphs.
    per_epoch = UNIVERSAL_PERTURBATION.format(outer="n = n.data.requires_grad_()", top="")
    assert len(_messages(per_epoch, "RC251")) == 2


ABLATION = """
import torch


def ablation_accuracy(model, target: str, idx: int, evaluate, loader):
    weights = model.state_dict()
    kept = weights[target][idx, ...].clone().detach()
    weights[target][idx, ...] = 0
    accuracy = evaluate(model, loader)
    weights[target][idx, ...] = {restore}
    return accuracy
"""


def test_a_filter_zeroed_and_put_back_from_its_own_copy_leaves_the_model_as_it_was() -> None:
    # Focused-Flip's `test_handcrafted_acc`: zero one filter, measure, put the saved copy back.
    assert _messages(ABLATION.format(restore="kept"), "RC102") == []
    # Put back something else, the caller's model is changed.
    [changed] = _messages(ABLATION.format(restore="kept * 2"), "RC102")
    assert "writes in place into the argument `model`" in changed


HOOK_EDIT = """
import torch


def replace_component(model_comp: torch.Tensor, {second}, new_model_comp: torch.Tensor):
    if isinstance(model_comp, torch.Tensor):
        model_comp[:] = new_model_comp
    return new_model_comp
"""


def test_a_transformerlens_hook_edits_its_activation_by_design() -> None:
    # TransformerLens calls a hook as `fn(activation, hook=point)`: editing the activation in
    # place is one of the two ways it documents (self-healing steering vectors' hooks).
    assert _messages(HOOK_EDIT.format(second="hook"), "RC102") == []
    [written] = _messages(HOOK_EDIT.format(second="point"), "RC102")
    assert "writes in place into the argument `model_comp`" in written


INJECT = """
import torch


class Attack:
    def inject(self, model, candidates: dict, loader):
        for name, mask in candidates.items():
            weights = model.state_dict()
            for i in range(mask.size(0)):
                kernel = weights[name][i, ...].clone().detach()
                weights[name][i, ...] = mask[i] * kernel.flip(-1) + (1 - mask[i]) * weights[name][i, ...]
            {load}
        return self.measure(model, loader)
"""


def test_a_function_that_loads_the_weights_it_wrote_back_into_the_model_changes_it_on_purpose() -> None:
    # Focused-Flip's `inject_handcrafted_filters`: it writes filters into the state dict and
    # loads it into the model itself, whose change is the attack.
    assert _messages(INJECT.format(load="model.load_state_dict(weights)"), "RC102") == []
    [written] = _messages(INJECT.format(load="pass"), "RC102")
    assert "writes in place into the argument `model`" in written


GRADIENT_BATCHES = """
import torch


def log_prob_and_grad(w: torch.Tensor, batch_size: int):
    log_p_list, grad_list = [], []
    for i in range(0, w.shape[0], batch_size):
        w_batch = w[i:i + batch_size]
        w_batch.requires_grad_(True)
        log_p = -(w_batch ** 2).sum(dim=1)
        (grad,) = torch.autograd.grad(log_p.sum(), w_batch{retain})
        log_p_list.append(log_p.to(w.dtype))
        grad_list.append(grad)
    final_log_p = torch.cat(log_p_list, dim=0)
    return final_log_p, torch.cat(grad_list)
"""


def test_a_converted_value_whose_graph_autograd_grad_ran_through_keeps_only_nodes() -> None:
    # mean_field_langevin's MALA batches: `torch.autograd.grad` frees the saved activations as
    # `backward()` does, and `.to(dtype)` of the log-probability stores that same graph.
    [freed] = _messages(GRADIENT_BATCHES.format(retain=""), "RC252")
    assert "graph nodes alive (the backward pass at line 10" in freed and "whole graph" not in freed
    [kept] = _messages(GRADIENT_BATCHES.format(retain=", retain_graph=True"), "RC252")
    assert "whole graph alive" in kept


BATCHED_STEP = """
import torch


class Witch:
    def batched_step(self, poison_delta: torch.Tensor, example, victim):
        inputs, labels, ids = example
        delta_slice = poison_delta[ids].detach().requires_grad_()
        loss, prediction = victim.compute(inputs + delta_slice, labels)
        loss.backward()
        delta_slice = delta_slice - self.tau * delta_slice.grad.sign()
        poison_delta[ids] = delta_slice.detach()
        return {result}
"""


def test_a_step_that_returns_only_numbers_updates_what_it_is_handed_on_purpose() -> None:
    # Witches' Brew's `_batched_step`: it writes the caller's poison perturbation and reports
    # `loss.item(), prediction.item()`, numbers about the step, as a bare `loss.item()` would.
    assert _messages(BATCHED_STEP.format(result="loss.item(), prediction.item()"), "RC102") == []
    [written] = _messages(BATCHED_STEP.format(result="loss, prediction"), "RC102")
    assert "writes in place into the argument `poison_delta`" in written


SEED = """
import torch
from torch import Tensor

GRID = 8
BATCH = 4


def new_seed(batch=1):
    if not isinstance(batch, Tensor):
        seed = torch.zeros(batch, 4, GRID, GRID)
        seed[:, 3, GRID // 2, GRID // 2] = 1
        return seed
    batch[:, :, :, :] = 0
    batch[:, 3, GRID // 2, GRID // 2] = 1
    return batch


def train(model, pool, steps: int):
    {first}
    for _ in range(steps):
        batch = new_seed(batch)
        batch = model(batch)
    print({kept})
    return batch
"""


def test_a_number_constant_passed_for_a_tensor_argument_is_not_a_tensor_the_caller_keeps() -> None:
    # MonashDeepNeuron's growing automaton: `new_seed(BATCH_SIZE)` builds a batch from a size;
    # only `new_seed(batch)`, rebound at once, hands it a tensor to reset.
    assert _messages(SEED.format(first="batch = new_seed(BATCH)", kept="BATCH"), "RC102") == []
    # A tensor the caller reads again after handing it over is changed behind its back.
    [reset] = _messages(SEED.format(first="batch = new_seed(pool)", kept="pool.mean()"), "RC102")
    assert "writes in place into the argument `batch`" in reset


TOKENIZER = """
from collections import deque

import torch


class Tokenizer:
    def encode(self, pairs, n: int):
        seq = deque()
        attention = torch.zeros(n, n, dtype=torch.bool)
        start = self._encode_sequence(pairs, seq, attention)
        return torch.tensor(seq), attention, start

    def _encode_sequence(self, pairs, seq: deque, attention: torch.Tensor) -> int:
        first = len(seq)
        children = deque()
        for pair in pairs:
            indices, _ = self._encode_pair(pair, seq, attention)
            children.extend(indices)
        {own_write}
        return first

    def _encode_pair(self, pair, seq: deque, attention: torch.Tensor) -> tuple[deque, int]:
        start = len(seq)
        for item in pair:
            self._encode_item(item, seq, attention)
        end = len(seq) - 1
        attention[start][end] = True
        attention[end][start] = True
        return deque([start, end]), end

    def _encode_item(self, item, seq: deque, attention: torch.Tensor) -> int:
        seq.append(item)
        attention[len(seq) - 1][len(seq) - 1] = True
        return len(seq) - 1
"""


def test_a_helper_filling_a_buffer_its_caller_fills_too_does_its_part_of_the_job() -> None:
    # arc-test-time-adaptation's tokenizer: each level sets its part of the attention matrix
    # the level above writes into as well and hands on; the buffer is filled by the chain.
    assert _messages(TOKENIZER.format(own_write="attention[first][len(seq) - 1] = True"), "RC102") == []
    # A caller that only hands its own argument on does not say it is a buffer to fill.
    [helper] = _messages(TOKENIZER.format(own_write="print(attention.sum())"), "RC102")
    assert "writes in place into the argument `attention`" in helper and "_encode_pair" in helper


WEIGHTED = """
import torch


def combine(batches, normalize: bool):
    out = []
    {before}
    for preds in batches:
        if normalize:
            tmp = torch.cat(preds, dim=0)
            tmp_weight = torch.tensor(tmp_weight)
            tmp_weight = torch.softmax(tmp_weight, dim=0)
            out.append(tmp.T @ tmp_weight)
    return out
"""


def test_a_name_bound_only_later_in_the_loop_is_no_tensor_on_the_first_pass() -> None:
    # single-image-test-time-adaptation: `tmp_weight` is bound nowhere before the loop, so the
    # first pass raises NameError; the tensor a later line binds is never what it converts.
    assert _messages(WEIGHTED.format(before="pass"), "RC301") == []
    # The same helper defined inside another function (the original's `get_score`).
    nested = "def run(batches):\n" + "\n".join("    " + line for line in WEIGHTED.format(before="pass").splitlines()) + "\n    return combine(batches, True)\n"
    assert _messages(nested, "RC301") == []
    [copied] = _messages(WEIGHTED.format(before="tmp_weight = torch.ones(3)"), "RC301")
    assert "on the tensor `tmp_weight`" in copied


OPEN_SET = """
import numpy as np
import torch
import torch.nn.functional as F


def evaluate(G, C1, loader, threshold: float, unk: int):
    hits = 0
    for img_t, label_t in loader:
        {move}
        feat, _ = G(img_t)
        out_t = F.softmax(C1(feat), dim=1)
        pred = out_t.data.max(1)[1]
        pred_cls = pred.cpu().numpy()
        pred = pred.cpu().numpy()
        pred[np.where(out_t.data.cpu().numpy().max(1) < threshold)[0]] = unk
        hits += int((pred_cls == label_t.numpy()).sum()) + int((pred == label_t.numpy()).sum())
    return hits
"""


def test_what_networks_handed_in_return_for_a_gpu_input_is_on_the_gpu() -> None:
    # Domain-adaptation-under-label-noise's open-set evaluation: the batch is moved with
    # `.cuda()` and run through the networks it is handed, so each `.cpu()` copies and the
    # two arrays are separate.
    assert _messages(OPEN_SET.format(move="img_t = img_t.cuda()"), "RC105") == []
    # Where the batch may be on the CPU, `.cpu()` returns the tensor itself: the arrays share.
    [shared] = _messages(OPEN_SET.format(move="img_t = img_t.float()"), "RC105")
    assert "shares its buffer with `pred_cls`" in shared


def test_a_copy_construct_of_a_copy_already_made_is_fixed_with_that_one_copy() -> None:
    # LLM-ISR: `torch.tensor(log_seqs.clone().detach())` makes a copy and then a second one;
    # the fix keeps one, outside the graph, instead of adding a third.
    code = """
    import torch
    def flat(log_seqs: torch.Tensor) -> torch.Tensor:
        index = torch.tensor(log_seqs.clone().detach()).view(-1)
        return index[index != 0]
    """
    [finding] = review_file(FileJob("m.py", textwrap.dedent(code).lstrip("\n"), None, ("RC301",))).findings
    assert finding.suggestion is not None
    assert "index = log_seqs.detach().clone().view(-1)" in finding.suggestion.replacement


THINNING = """
import torch
import torch.nn as nn


class Hawkes(nn.Module):
    def __init__(self, beta: torch.Tensor, sampler):
        super().__init__()
        self.beta = nn.Parameter(beta)
        self.sampler = sampler

    def step(self, decay_state: torch.Tensor, active: torch.Tensor):
        work = decay_state.clone()
        seeking = active.clone()
        while seeking.any():
            idx = {indices}
            dt = torch.rand(idx.shape[0], 1, 1)
            candidate = {operand} * torch.exp(-self.beta.unsqueeze(0) * dt)
            accepted = self.sampler.accept(candidate.sum(dim=2)) > 0
            work[idx[~accepted]] *= torch.exp(-self.beta.unsqueeze(0))
            seeking[idx[accepted]] = False
        return work
"""


def test_rows_taken_with_the_indices_of_a_mask_are_a_copy_autograd_saves() -> None:
    # Learning-point-processes' Hawkes thinning: `work[idx]`, with `idx` from
    # `nonzero(as_tuple=True)` or `torch.where(mask)`, is a copy; writing into `work` later
    # leaves what `*` saved untouched, and the backward runs (checked with torch).
    for indices in ("torch.nonzero(seeking, as_tuple=True)[0]", "torch.where(seeking)[0]", "seeking.nonzero(as_tuple=True)[0]"):
        assert _messages(THINNING.format(indices=indices, operand="work[idx]"), "RC201") == [], indices
    # A row taken with an integer is a view: the write changes what was saved.
    [saved] = _messages(THINNING.format(indices="torch.where(seeking)[0]", operand="work[0]"), "RC201")
    assert "modifies in place a tensor that autograd saved" in saved
