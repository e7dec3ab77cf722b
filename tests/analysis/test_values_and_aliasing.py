"""What the model says a name holds, and which names share memory: each test is a few lines
of code and what the analysis must know about them."""

from __future__ import annotations

from review_copies.analysis import roots
from review_copies.analysis.events import Accumulate, Bind, Call, Write
from review_copies.analysis.queries.callers import callers_expect_the_write, passed
from review_copies.analysis.values import Device, Kind, Tri
from tests.analysis.helpers import bound, flow, flows


def test_a_factory_makes_a_fresh_cpu_tensor_that_needs_no_grad() -> None:
    f = flow("""
    import torch
    def f():
        t = torch.zeros(3)
    """)
    (b,) = bound(f, "t")
    assert b.value.kind is Kind.TENSOR and b.value.grad is Tri.NO and b.value.device is Device.CPU
    assert b.value.dtype == "float32" and len(b.value.roots) == 1 and not b.value.leaf


def test_requires_grad_true_makes_a_leaf_attached_to_the_graph() -> None:
    f = flow("""
    import torch
    def f():
        w = torch.randn(3, requires_grad=True)
        y = w * 2
    """)
    (w,) = bound(f, "w")
    (y,) = bound(f, "y")
    assert w.value.leaf and w.value.attached
    assert y.value.attached and not y.value.leaf and y.value.roots.isdisjoint(w.value.roots)


def test_a_plain_assignment_is_the_same_storage() -> None:
    f = flow("""
    import torch
    def f():
        a = torch.ones(2)
        b = a
    """)
    assert bound(f, "b")[0].value.roots == bound(f, "a")[0].value.roots


def test_views_detach_and_data_share_memory_and_say_how() -> None:
    f = flow("""
    import torch
    def f(i: torch.Tensor):
        a = torch.ones(2, 3)
        v = a.view(3, 2)
        d = a.detach()
        r = a.reshape(6)
        s = a[0]
        m = a[[0, 1]]
        t = a[i]
        rows = torch.arange(2).to("cpu")
        k = a[torch.tensor([0, 1])]
        n = a[rows, i]
        p = a[torch.randperm(2)[:1]]
        for row in rows:
            q = a[row]
    """)
    a = bound(f, "a")[0].value
    views = {name: bound(f, name)[0].value for name in "vdrsmkn"}
    assert views["v"].roots == a.roots and views["v"].via == "view" and views["v"].certain
    assert views["d"].roots == a.roots and views["d"].via == "detach" and views["d"].grad is Tri.NO
    assert views["r"].roots == a.roots and not views["r"].certain  # reshape may copy
    assert views["s"].roots == a.roots  # basic indexing is a view
    assert views["m"].roots.isdisjoint(a.roots)  # advanced indexing copies
    # A tensor index may be a 0-d integer (a view) or not (a copy): the model says "maybe".
    t = bound(f, "t")[0].value
    assert t.roots == a.roots and not t.certain
    # ...unless it is known to have a dimension (a list made a tensor, `arange`, moved or not):
    # then it is advanced indexing, a copy (torch 2.13: `a[torch.tensor([0, 1])]` is new memory).
    assert views["k"].roots.isdisjoint(a.roots)
    assert views["n"].roots.isdisjoint(a.roots)
    assert bound(f, "p")[0].value.roots.isdisjoint(a.roots)  # a slice of one keeps its dimension
    q = bound(f, "q")[0].value  # an item of one may be 0-d: a view again
    assert q.roots == a.roots and not q.certain


def test_clone_and_deepcopy_make_new_storage() -> None:
    f = flow("""
    import copy
    import torch
    def f(model):
        a = torch.ones(2)
        c = a.clone()
        s = copy.deepcopy(model.state_dict())
    """)
    assert bound(f, "c")[0].value.roots.isdisjoint(bound(f, "a")[0].value.roots)
    s = bound(f, "s")[0].value
    assert s.kind is Kind.STATE_DICT and s.element is not None and not s.element.roots & {roots.parameters("model")}


def test_a_conversion_to_what_the_tensor_already_is_returns_it() -> None:
    f = flow("""
    import torch
    def f():
        a = torch.zeros(2)
        same = a.float()
        other = a.double()
        moved = a.to("cuda")
    """)
    a = bound(f, "a")[0].value
    assert bound(f, "same")[0].value.roots == a.roots and bound(f, "same")[0].value.via == "to"
    assert bound(f, "other")[0].value.roots.isdisjoint(a.roots)
    moved = bound(f, "moved")[0].value
    assert moved.roots.isdisjoint(a.roots) and moved.device is Device.CUDA


def test_numpy_and_from_numpy_share_memory() -> None:
    f = flow("""
    import numpy as np
    import torch
    def f():
        a = torch.zeros(2)
        n = a.numpy()
        b = torch.from_numpy(np.ones(3))
    """)
    n = bound(f, "n")[0].value
    assert n.kind is Kind.NDARRAY and n.roots == bound(f, "a")[0].value.roots and n.via == "numpy"
    assert bound(f, "b")[0].value.via == "from_numpy"


def test_state_dict_and_parameters_hold_the_live_tensors() -> None:
    f = flow("""
    def f(model):
        sd = model.state_dict()
        ps = list(model.parameters())
    """)
    sd = bound(f, "sd")[0].value
    assert sd.kind is Kind.STATE_DICT and sd.roots == frozenset((roots.parameters("model"),))
    ps = bound(f, "ps")[0].value
    assert ps.kind is Kind.PARAMETER_LIST and ps.element is not None and ps.element.leaf


def test_an_in_place_write_is_recorded_with_its_target() -> None:
    f = flow("""
    import torch
    def f(x: torch.Tensor):
        y = x.view(-1)
        y.add_(1)
        y[0] = 2
        y += 3
    """)
    writes = list(f.of(Write))
    assert [w.op for w in writes] == [".add_()", "[...] =", "+="]
    assert all(roots.argument("x") in w.target.roots for w in writes)


def test_out_and_inplace_keyword_writes_are_recorded() -> None:
    f = flow("""
    import torch
    import torch.nn.functional as F
    def f(x: torch.Tensor, buf: torch.Tensor):
        torch.add(x, 1, out=buf)
        F.relu(x, inplace=True)
    """)
    assert [w.op for w in f.of(Write)] == ["out=", "relu(inplace=True)"]


def test_an_import_alias_of_torch_is_resolved() -> None:
    f = flow("""
    import torch as T
    from torch import zeros
    def f():
        a = T.ones(2)
        b = zeros(2)
    """)
    assert bound(f, "a")[0].value.is_tensor and bound(f, "b")[0].value.is_tensor
    assert {q for c in f.of(Call) for q in c.qualnames} >= {"torch.ones", "torch.zeros"}


def test_a_local_name_shadows_an_import() -> None:
    f = flow("""
    import torch
    def f(torch):
        a = torch.ones(2)
    """)
    assert bound(f, "a")[0].value.kind is Kind.UNKNOWN


def test_the_binding_events_follow_the_code_in_order() -> None:
    f = flow("""
    import torch
    def f():
        a = torch.ones(1)
        a = a + 1
    """)
    binds = [e for e in f.of(Bind) if e.name == "a"]
    assert [b.line for b in binds] == [3, 4] and binds[0].index < binds[1].index


def test_torch_where_gives_int64_indices_alone_and_the_values_dtype_with_three_arguments() -> None:
    f = flow(
        """
        import torch
        def f(n):
            a = torch.ones(n, n)
            edges = torch.stack(list(torch.where(a >= 0)))
            rows = torch.where(a >= 0)[0]
            kept = torch.where(a >= 0, a, 0.0)
            return edges, rows, kept
        """
    )
    assert [bound(f, name)[0].value.dtype for name in ("edges", "rows", "kept")] == ["int64", "int64", "float32"]


def test_a_submodule_call_is_attached_and_a_wrappers_predict_is_unknown() -> None:
    f = flow("""
    import torch
    from torch import nn
    def f(reranker: nn.Module, x: torch.Tensor, pairs: list):
        feats = reranker.encoder(x)
        scores = reranker.predict(pairs)
    """)
    assert bound(f, "feats")[0].value.grad is Tri.YES
    assert bound(f, "scores")[0].value.grad is not Tri.YES and bound(f, "scores")[0].value.kind is Kind.UNKNOWN


def test_entries_of_a_dict_comprehension_of_clones_are_separate_memory() -> None:
    f = flow("""
    import torch
    def f(parts: dict):
        d = {k: v.clone() for k, v in parts.items()}
        t = d["t"]
        valid = d["valid"]
        again = d["t"]
    """)
    t, valid, again = (bound(f, n)[0].value for n in ("t", "valid", "again"))
    assert not roots.overlaps(t.roots, valid.roots)
    assert roots.overlaps(t.roots, again.roots)


def test_a_file_helper_that_returns_numpy_gives_an_array() -> None:
    f = flow("""
    import torch
    def _to_numpy(t):
        return t.cpu().detach().numpy()
    def _maybe_numpy(t):
        if t is None:
            return None
        return t.numpy()
    def f(model, x):
        a = _to_numpy(x)
        b = _maybe_numpy(x)
        out = model(a.reshape(1, -1))
    """)
    assert bound(f, "a")[0].value.kind is Kind.NDARRAY
    assert bound(f, "b")[0].value.kind is Kind.UNKNOWN  # one of its returns is None
    # A predict function over the array, not a module's forward pass (glacier's reimplementation).
    assert bound(f, "out")[0].value.kind is Kind.UNKNOWN


def test_a_dataloaders_batches_do_not_require_grad() -> None:
    f = flow("""
    import torch
    from torch.utils.data import DataLoader
    def f(dl: DataLoader, ds, items):
        x, y = next(iter(dl))
        for i, (a, b) in enumerate(DataLoader(ds, batch_size=8)):
            pass
        first = next(iter(items))
    """)
    assert bound(f, "x")[0].value.grad is Tri.NO and bound(f, "a")[0].value.grad is Tri.NO
    assert bound(f, "first")[0].value.grad is Tri.MAYBE  # not a loader: nothing known


def test_from_pretrained_through_an_instance_builds_a_module() -> None:
    f = flow("""
    import torch
    from torch import nn
    class Classifier(nn.Module):
        def __init__(self, vocab_size, dim):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, dim)
        def load_glove(self, weights):
            self.embedding = self.embedding.from_pretrained(torch.FloatTensor(weights), freeze=True)
    """, "Classifier.load_glove")
    # Hypernet-image-captioning: a new module, not a submodule's forward pass kept on `self`.
    assert not list(f.of(Accumulate))
    assert [b.value.kind for b in bound(f, "self.embedding")] == [Kind.MODULE]


def test_an_autograd_function_forward_is_called_through_apply_with_its_context_first() -> None:
    f = flows("""
    import torch
    class Nce(torch.autograd.Function):
        @staticmethod
        def forward(self, x, memory, idx, y):
            idx.select(1, 0).copy_(y)
            return memory[idx.view(-1)].exp()
    class NceAverage(torch.nn.Module):
        def forward(self, x, y):
            idx = torch.randint(0, self.memory.size(0), (x.size(0), 5))
            return Nce.apply(x, self.memory, idx, y)
    """)["Nce.forward"]
    (site,) = passed(f, "idx")
    assert getattr(site[1], "value", None) == "idx"
    # (the caller drew the index for this call and never reads it again)
    assert callers_expect_the_write(f, "idx")
