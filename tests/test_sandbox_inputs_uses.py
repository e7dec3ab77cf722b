"""What the code does with each parameter (sandbox.uses): the hints input synthesis builds
candidates from. Torch-free: libcst only."""

from __future__ import annotations

import textwrap
from typing import Any

import libcst as cst

from review_copies.model.findings import Category, Finding, Severity
from review_copies.sandbox.verify import param_facts, subjects


def _describe(code: str, name: str, cls: str | None = None) -> dict[str, Any]:
    module = cst.parse_module(textwrap.dedent(code))
    if cls is None:
        fn = next(s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == name)
        return param_facts.subject_facts(module, fn, None)
    klass = next(s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == cls)
    fn = next(s for s in klass.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name)
    return param_facts.subject_facts(module, fn, klass)


def _roles(facts: dict[str, Any], path: str) -> set[str]:
    return set(facts["params"].get(path, {}).get("roles", []))


def test_shapes_from_unpacking_permute_and_broadcast_indexing() -> None:
    facts = _describe("""
    def crop(frames, img, mean):
        _, _, h, w = frames.shape
        chw = img.permute(2, 0, 1)
        return chw - mean[:, None, None], h * w
    """, "crop")["params"]
    assert facts["frames"]["rank"] == 4
    assert facts["img"]["rank"] == 3
    assert facts["mean"]["rank"] == 1


def test_integers_from_ranges_indices_and_layer_sizes() -> None:
    facts = _describe("""
    import torch
    from torch import nn
    def f(steps, t, buf, dim, heads):
        layer = nn.MultiheadAttention(dim, heads)
        for _ in range(steps):
            buf[t] = 0
        return nn.Linear(dim, 1), layer
    """, "f")
    assert "count" in _roles(facts, "steps")
    assert "index" in _roles(facts, "t")
    assert "size" in _roles(facts, "dim")
    assert "heads" in _roles(facts, "heads")


def test_class_ids_from_losses_counts_and_argmax_comparisons() -> None:
    facts = _describe("""
    import torch
    import torch.nn.functional as F
    def f(logits, y, labels, probs, target, seq_targets):
        acc = (logits.argmax(dim=1) == y).float().mean()
        counts = torch.bincount(labels)
        bce = F.binary_cross_entropy(probs, target)
        lm = F.cross_entropy(logits, seq_targets.flatten())
        return acc, counts, bce, lm
    """, "f")
    assert "long" in _roles(facts, "y")
    assert "long" in _roles(facts, "labels")
    assert "prob" in _roles(facts, "target")
    assert "long" in _roles(facts, "seq_targets")


def test_paths_and_directories() -> None:
    facts = _describe("""
    import os
    import numpy as np
    import torch
    def export(model, out_dir, path, root):
        np.save(f"{out_dir}/w.npy", 1)
        torch.save(model.state_dict(), path)
        return os.path.join(root, "x")
    """, "export")
    assert "dir" in _roles(facts, "out_dir")
    assert "path" in _roles(facts, "path")
    assert "dir" in _roles(facts, "root")


def test_loops_dicts_tuples_and_what_values_are_fed_to() -> None:
    facts = _describe("""
    import torch.nn.functional as F
    def fit(model, loader, val_batch, batch, opt):
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
        img = batch["image"].float()
        img.div_(255)
        out = model(val_batch[0])
        opt.step()
        opt.zero_grad()
        return model.encoder(img), out
    """, "fit")["params"]
    assert facts["loader"]["iter"] == 2
    assert facts["loader[*][0]"]["names"] == ["x"] and facts["loader[*][0]"]["feeds"] == ["model"]
    assert "long" in facts["loader[*][1]"]["roles"]
    assert facts["batch"]["keys"] == ["image"] and "div_" in facts["batch['image']"]["methods"]
    assert facts["val_batch"]["items"] == 1 and facts["val_batch[0]"]["feeds"] == ["model"]
    assert "encoder" in facts["model"]["methods"]
    assert {"stepper", "stateful"} <= set(facts["opt"]["roles"])


def test_constructor_parameters_get_the_uses_of_the_attributes_they_are_kept_in() -> None:
    facts = _describe("""
    import torch
    class ToCHW:
        def __init__(self, mean, dim):
            self.mean = torch.as_tensor(mean)
            self.fc = torch.nn.Linear(dim, dim)

        def __call__(self, img):
            centered = img.permute(2, 0, 1) - self.mean[:, None, None]
            return self.fc(img), centered
    """, "__call__", cls="ToCHW")
    assert facts["init"]["mean"]["rank"] == 1
    assert "size" in facts["init"]["dim"]["roles"]
    # An error on `self.fc(...)` may be about `dim`.
    assert "fc" in facts["init"]["dim"]["names"]
    assert facts["params"]["img"]["feeds"] == ["self.fc"]


def test_one_level_into_the_files_own_functions() -> None:
    facts = _describe("""
    def normalize(images, mean):
        return images.sub_(mean[:, None, None])
    def prepare(images):
        return normalize(images, 0.5)
    """, "prepare")["params"]
    assert "sub_" in facts["images"]["methods"]


SCRIPT = """\
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

class Net(Block):
    def __init__(self, dim=8, classes=3):
        super().__init__(dim)
        self.encoder = Block(dim)
        self.head = nn.Linear(dim, classes)

def make_batch(n):
    return {"image": torch.rand(n, 4)}

def train(model, batch):
    return model.encoder(batch["image"])

net = Net()
"""


def test_the_files_module_classes_and_factories_are_described_and_kept() -> None:
    facts = _describe(SCRIPT, "train")
    assert set(facts["classes"]) == {"Block", "Net"}
    assert facts["classes"]["Block"]["inner"] and not facts["classes"]["Net"]["inner"]
    assert "encoder" in facts["classes"]["Net"]["attrs"]
    assert facts["factories"]["make_batch"]["noun"] == "batch"
    finding = Finding("t.py", 19, 19, Category.ALIAS_MUTATION, "X1", Severity.WARNING, "m")
    side = subjects.build(finding, SCRIPT).original
    kept = side.source.splitlines()
    assert "class Net(Block):" in kept and "def make_batch(n):" in kept
    assert "net = Net()" not in kept  # module-level work is still never kept
    assert side.facts["params"]["model"]["methods"] == ["encoder"]
