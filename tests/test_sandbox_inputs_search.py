"""The input search in the probe (sandbox.inputs, sandbox.child.search): each kind of
candidate, on code that only runs with that kind of value, through the warm worker (this
process never imports torch: children it forks would count its memory as theirs)."""

from __future__ import annotations

from typing import Any

from review_copies.model.findings import Category
from review_copies.sandbox import recipes as recipe_book
from review_copies.sandbox.protocol import ProbeRequest, VariantRun, decode, encode
from review_copies.sandbox.verify import subjects, verdict
from tests.sandbox_helpers import finding, worker


def probe(code: str, line: int, category: str, fix: str | None = None, fix_lines: tuple[int, int] | None = None,
          recipes: tuple[str, ...] = ()) -> tuple[verdict.Decision, dict[str, Any]]:
    f, text = finding(code, line, category, fix, fix_lines)
    subject = subjects.build(f, text)
    chosen = recipe_book.recipes_for(Category(category).value, recipes)
    answer = worker().run(ProbeRequest(device="cpu", recipes=chosen, subject=subject))
    assert answer.ok and answer.result is not None, answer
    return verdict.decide(answer.result, chosen, subject.fixed is not None), encode(answer.result.search)


def test_a_shape_unpacked_into_four_names_is_a_4d_tensor() -> None:
    d, s = probe("""
    import torch
    def crop_center(frames, size, gain):
        _, _, h, w = frames.shape
        top, left = (h - size) // 2, (w - size) // 2
        center = frames[:, :, top:top + size, left:left + size]
        center.mul_(gain)
        return center
    """, 6, "alias-mutation", recipes=("input-mutation",))
    assert s["ran"] and s["inputs"]["frames"] == "float (8, 4, 6, 6)"
    assert d.status == verdict.CONFIRMED and "input `frames` was modified" in d.evidence


def test_broadcast_indexing_and_channels_pick_the_image_layout() -> None:
    d, s = probe("""
    import torch
    def normalize(images, mean, std):
        images.sub_(mean[:, None, None]).div_(std[:, None, None])
        return images
    """, 3, "alias-mutation", recipes=("input-mutation",))
    assert s["inputs"]["mean"] == "float (4,)" and s["inputs"]["images"] == "float (8, 4, 6, 6)"
    assert d.status == verdict.CONFIRMED


def test_an_index_and_sizes_are_integers_also_for_the_objects_constructor() -> None:
    d, s = probe("""
    import torch
    class Rollout:
        def __init__(self, steps, obs_dim):
            self.obs = torch.zeros(steps, obs_dim)
            self.rewards = torch.zeros(steps)

        def insert(self, t, obs, reward):
            self.obs[t] = obs.clone()
            self.rewards[t] = reward
    """, 8, "redundant-copy", "self.obs[t] = obs", recipes=("copy-bytes",))
    assert s["ran"] and s["inputs"]["t"] == "1" and s["inputs"]["init:steps"] == "4" and s["inputs"]["obs"] == "float (4,)"
    assert d.status == verdict.CONFIRMED, d.evidence


def test_labels_counted_by_bincount_are_class_ids() -> None:
    d, s = probe("""
    import torch
    def class_weights(labels, n_classes):
        counts = torch.bincount(labels, minlength=n_classes).float()
        weights = counts.clone()
        return weights / weights.sum()
    """, 4, "redundant-copy", "weights = counts", recipes=("copy-bytes",))
    assert s["tries"] == 1 and s["inputs"]["labels"] == "class-id (8,)" and s["inputs"]["n_classes"] == "4"
    assert d.status == verdict.CONFIRMED, d.evidence


def test_a_directory_argument_is_inside_the_probes_working_dir() -> None:
    d, s = probe("""
    import numpy as np
    import torch
    def export_weights(model: torch.nn.Module, out_dir):
        for name, layer in model.named_modules():
            if isinstance(layer, torch.nn.Linear):
                np.save(f"{out_dir}/{name or 'root'}.npy", layer.weight.numpy())
    """, 6, "numpy-bridge", "        np.save(f\"{out_dir}/{name or 'root'}.npy\", layer.weight.detach().numpy())", recipes=("raises",))
    assert s["inputs"]["out_dir"] == "dir"
    assert d.status == verdict.CONFIRMED and "the fix ran" in d.evidence, d.evidence


TSNE = """
import torch
import torch.nn.functional as F
from torch import nn

class Net(nn.Module):
    def __init__(self, dim=8, hidden=16, classes=3):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.encoder(x))

def train_epoch(model, loader, opt):
    embeddings = []
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        embeddings.append(model.encoder(x))
    return torch.cat(embeddings)
"""


def test_a_model_with_the_submodule_the_code_uses_is_built_from_the_file() -> None:
    d, s = probe(TSNE, 21, "graph-retention", "embeddings.append(model.encoder(x).detach())", recipes=("retention",))
    assert s["inputs"]["model"] == "Net(sizes 4)"
    assert s["inputs"]["loader"] == "loader of 2" and s["inputs"]["loader[*][1]"] == "class-id (8,)"
    assert d.status == verdict.CONFIRMED, d.evidence


PIPELINE = """
import torch

def make_batch(n):
    images = torch.randint(0, 256, (n, 3, 8, 8)){cast}
    return {{"image": images}}

def prepare(batch):
    x = batch["image"].float()
    x.div_(255.0)
    return x, batch["image"]
"""


def test_the_files_own_factory_builds_the_argument() -> None:
    fix = 'x = batch["image"].float().clone()'
    d, s = probe(PIPELINE.format(cast=".float()"), 8, "alias-mutation", fix, (7, 7), recipes=("input-mutation",))
    assert s["inputs"]["batch"] == "factory make_batch"
    assert d.status == verdict.CONFIRMED and "input `batch['image']` was modified" in d.evidence
    # The same code on the uint8 images the factory really makes: `.float()` copies, so the
    # write never reaches the argument. No run set up the bug's precondition (a write into
    # the argument's memory): that is no witness against the finding, which stays.
    d, _ = probe(PIPELINE.format(cast=".to(torch.uint8)"), 8, "alias-mutation", fix, (7, 7), recipes=("input-mutation",))
    assert d.status == verdict.INCONCLUSIVE and "no in-place write reached an input's memory" in d.evidence


def test_string_keys_make_a_dict_of_those_keys() -> None:
    d, s = probe("""
    import torch
    def brighten(batch):
        pixels = batch["pixels"]
        pixels.mul_(2)
        return pixels
    """, 4, "alias-mutation", recipes=("input-mutation",))
    assert s["inputs"]["batch"] == "dict pixels"
    assert d.status == verdict.CONFIRMED and "input `batch['pixels']` was modified" in d.evidence


def test_init_itself_runs_on_a_fresh_object_with_integer_sizes() -> None:
    d, s = probe("""
    import math
    import torch
    from torch import nn
    class ScaledLinear(nn.Module):
        def __init__(self, fan_in, fan_out, scale=1.0):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(fan_out, fan_in))
            self.weight.uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
    """, 8, "inplace-autograd", "with torch.no_grad():\n    self.weight.uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))",
        recipes=("leaf-inplace",))
    assert s["inputs"]["fan_in"] == "4" and s["inputs"]["fan_out"] == "4"
    assert d.status == verdict.CONFIRMED and "leaf Variable" in d.evidence


AUC = """
import numpy as np
import torch

def rank_auc(scores, labels):
    order = np.argsort(scores)
    ranks = np.empty_like(order, dtype=float)
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    return float(ranks[pos].sum())

def evaluate_auc(model, x, y):
    scores = torch.softmax(model(x), dim=1)[:, 1].numpy()
    return rank_auc(scores, y.numpy())
"""


def test_the_findings_own_error_counts_as_running_and_the_fix_finishes_the_search() -> None:
    d, s = probe(AUC, 12, "numpy-bridge", "scores = torch.softmax(model(x), dim=1)[:, 1].detach().numpy()", recipes=("raises",))
    # The original stops at `.numpy()` whatever y is; y must be 1-D labels for the fix to finish.
    assert s["inputs"]["y"] == "class-id (8,)" and 1 < s["tries"] <= s["limit"] + s["fix_limit"] + 1
    assert d.status == verdict.CONFIRMED and "Can't call numpy()" in d.evidence, d.evidence


def test_the_search_is_bounded_and_the_furthest_error_is_the_evidence() -> None:
    d, s = probe("""
    import torch
    def f(x, y):
        z = x * 2
        z.add_(1)
        raise ValueError("never runs")
    """, 4, "alias-mutation", "z = z + 1", recipes=("input-mutation",))
    assert not s["ran"] and s["tries"] <= s["limit"] == 12
    assert d.status == verdict.INCONCLUSIVE and "never runs" in d.evidence


def test_a_model_factory_is_run_forward_for_the_autograd_checks() -> None:
    d, s = probe("""
    from torch import nn
    def make_mlp(dim, hidden, out, p=0.1):
        return nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Dropout(p, inplace=True), nn.Linear(hidden, out))
    """, 3, "inplace-autograd", "return nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), nn.Dropout(p), nn.Linear(hidden, out))",
        recipes=("backward",))
    assert s["inputs"]["out"] == "4"
    assert d.status == verdict.CONFIRMED and "output 0 of Tanh" in d.evidence, d.evidence


def test_a_runtime_device_gets_a_stand_in_so_cpu_alone_does_not_refute() -> None:
    d, _ = probe("""
    import numpy as np
    def validate(model, loader, device):
        preds = []
        for x, y in loader:
            logits = model(x.to(device))
            preds.append(logits.detach().numpy())
        return np.concatenate(preds)
    """, 6, "numpy-bridge", "preds.append(logits.detach().cpu().numpy())", recipes=("raises",))
    assert d.status == verdict.INCONCLUSIVE and "meta device" in d.evidence, d.evidence


def test_a_decorated_function_is_watched_where_it_is_written() -> None:
    d, _ = probe("""
    import torch
    @torch.no_grad()
    def evaluate(model, loader):
        all_scores, all_preds = [], []
        for x, _ in loader:
            logits = model(x)
            scores = logits.detach()
            scores.sigmoid_()
            all_scores.append(scores)
            all_preds.append(logits > 0)
        return torch.cat(all_scores), torch.cat(all_preds)
    """, 8, "alias-mutation", "scores = logits.detach().clone()", (7, 7), recipes=("alias", "input-mutation"))
    assert d.status == verdict.CONFIRMED and "shares memory with `logits`" in d.evidence, d.evidence


def test_models_are_paired_with_their_optimizers() -> None:
    d, s = probe("""
    import torch
    import torch.nn.functional as F
    def train_step(G, D, opt_g, opt_d, real, z):
        fake = G(z)
        d_loss = F.softplus(-D(real)).mean() + F.softplus(D(fake.detach())).mean()
        g_loss = F.softplus(-D(fake)).mean()
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        return d_loss.item(), g_loss.item()
    """, 9, "inplace-autograd", recipes=("backward",))
    assert s["inputs"]["opt_g"] == "optimizer" and s["inputs"]["real"].startswith("fits")
    assert d.status == verdict.CONFIRMED and "modified by an inplace operation" in d.evidence, d.evidence


def test_an_optimizer_has_the_state_of_one_in_the_middle_of_training() -> None:
    d, s = probe("""
    import copy
    import torch
    def guarded_step(model, optimizer, loss_fn, batch):
        opt_state = optimizer.state_dict()
        optimizer.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        optimizer.step()
        if not torch.isfinite(loss):
            optimizer.load_state_dict(opt_state)
        return loss.item()
    """, 4, "stale-snapshot", "opt_state = copy.deepcopy(optimizer.state_dict())", recipes=("snapshot",))
    assert s["inputs"]["loss_fn"] == "loss_closure"
    assert d.status == verdict.CONFIRMED and "momentum_buffer" in d.evidence, d.evidence


def test_saved_tensors_overwritten_through_data_are_silent_even_if_a_later_step_bumps_them() -> None:
    d, _ = probe("""
    import torch
    from torch import nn
    def critic_step(critic: nn.Module, opt, real, fake, clip=0.01):
        loss = critic(fake).mean() - critic(real).mean()
        opt.zero_grad()
        for p in critic.parameters():
            p.data.clamp_(-clip, clip)
        loss.backward()
        opt.step()
        return loss.item()
    """, 7, "inplace-autograd", recipes=("silent-grad",))
    assert d.status == verdict.CONFIRMED and "without a version bump" in d.evidence, d.evidence


def test_state_a_module_keeps_in_a_list_is_retention_across_calls() -> None:
    d, _ = probe("""
    import torch
    from torch import nn
    class SelfAttention(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.maps = []

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
            self.maps.append(attn)
            return attn @ v
    """, 12, "graph-retention", "self.maps.append(attn.detach())", recipes=("retention",))
    assert d.status == verdict.CONFIRMED and "`self.maps`" in d.evidence, d.evidence


def test_an_input_difference_from_removing_the_write_on_the_findings_line_is_the_fix() -> None:
    def side(ok: bool, lines: list[int], on_line: bool) -> dict[str, Any]:
        return {"ok": ok, "mutated": [{"name": "x", "lines": lines, "on_line": on_line}]}

    cmp = {"comparable": True, "outputs": [], "final_inputs": [{"path": "x", "what": "values", "max_abs_diff": 0.5}]}
    removed = [{"variant": "grad", "original": side(True, [15, 16], True), "fixed": side(True, [15], False), "compare": cmp}]
    assert verdict.fix_break(tuple(decode(VariantRun, r) for r in removed)) is None
    kept = [{"variant": "grad", "original": side(True, [15, 16], True), "fixed": side(True, [15, 16], True), "compare": cmp}]
    assert verdict.fix_break(tuple(decode(VariantRun, r) for r in kept)) == ("inputs", "the fix changes what the inputs hold afterwards: `x` differs (max abs diff 0.5)")


def test_a_slice_bound_is_an_integer_even_inside_arithmetic() -> None:
    d, s = probe("""
    import torch
    class Windows:
        def __init__(self, series, window):
            self.series = series
            self.window = window

        def __getitem__(self, idx):
            w = self.series[idx:idx + self.window]
            w -= w.mean()
            return w
    """, 9, "alias-mutation", "w = w - w.mean()", recipes=("input-mutation",))
    assert s["tries"] == 1 and s["inputs"]["idx"] == "1" and s["inputs"]["init:window"] == "1"
    assert d.status == verdict.CONFIRMED and "input `self.series` was modified" in d.evidence


def test_token_ids_fit_the_embedding_of_the_files_language_model() -> None:
    d, s = probe("""
    import torch.nn.functional as F
    from torch import nn
    class LM(nn.Module):
        def __init__(self, vocab, dim):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.out = nn.Linear(dim, vocab)

        def forward(self, ids):
            return self.out(self.embed(ids))

    def lm_step(model, ids, optimizer, history):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history.append(loss)
        return loss.item()
    """, 18, "graph-retention", "history.append(loss.item())", recipes=("retention",))
    assert s["inputs"]["model"] == "LM(sizes 4)" and s["inputs"]["ids"] == "token-id (8, 5)"
    assert d.status == verdict.CONFIRMED and "`history`" in d.evidence, d.evidence


def test_a_tensor_saved_through_data_and_then_written_is_a_silent_gradient_not_a_refutation() -> None:
    # Nothing raises (`.data` has its own version counter), but the gradient is computed with
    # the new weight: RC201's backward check must not take the clean run for a witness.
    d, _ = probe("""
    import torch
    from torch import nn
    def reweighted_loss(head: nn.Module, x: torch.Tensor, eta: float = 0.1):
        alpha = torch.ones(4)
        loss = (head(x) * alpha.data).sum()
        alpha.mul_(eta * loss.data.exp())
        loss.backward()
        return alpha
    """, 6, "inplace-autograd", "alpha = alpha * (eta * loss.data.exp())", recipes=("backward",))
    assert d.status != verdict.REFUTED, d.evidence
    assert "without a version bump" in d.evidence, d.evidence
