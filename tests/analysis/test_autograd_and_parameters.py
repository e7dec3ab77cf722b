"""What autograd saves and what parameters hold: the facts the autograd and retention rules
stand on, and where each parameter's kind comes from."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.analyze import FileAnalysis
from review_copies.analysis.events import Write
from review_copies.analysis.parse import parse
from review_copies.analysis.queries.aliasing import alias_pairs
from review_copies.analysis.queries.autograd import reaches_a_backward, saved_before
from review_copies.analysis.queries.callers import caller_keeps_argument, returns_argument
from review_copies.analysis.queries.intent import is_mutating_function
from review_copies.analysis.queries.loops import training_loop
from review_copies.analysis.values import Device, Kind, Tri
from tests.analysis.helpers import bound, flow, flows


def test_sigmoid_saves_its_output_and_the_write_after_it_finds_the_save() -> None:
    f = flow("""
    import torch
    def f(x: torch.Tensor):
        x.requires_grad_()
        y = torch.sigmoid(x)
        y.mul_(2)
        return y
    """)
    (saved,) = f.saved
    assert saved.op == "`sigmoid`" and saved.roots == bound(f, "y")[0].value.roots
    (write,) = f.of(Write)
    assert saved_before(f, write) is saved



def test_what_only_a_comparison_or_an_argsort_reads_of_a_saved_tensor_reaches_no_backward() -> None:
    # TorchSeg's OHEM loss: the softmax output is masked in place and then only ranked and
    # compared to pick which pixels count; the loss is taken on the logits. A comparison's
    # or an argsort's result has no grad_fn, so the labels it shapes carry no graph back to
    # the softmax. Returning the probabilities would carry it.
    source = """
    import torch
    import torch.nn.functional as F
    def f(pred, target, thresh: float):
        prob = F.softmax(pred, dim=1)
        prob.masked_fill_(target.eq(255), 1)
        order = prob.flatten().argsort()
        keep = prob.flatten()[order[0]] > thresh
        target = target * keep.long()
        return F.cross_entropy(pred, target){extra}
    """
    quiet = flow(source.format(extra=""))
    (saved,) = [s for s in quiet.saved if s.op == "`softmax`"]
    assert not reaches_a_backward(quiet, saved)
    kept = flow(source.format(extra=", prob"))
    (saved,) = [s for s in kept.saved if s.op == "`softmax`"]
    assert reaches_a_backward(kept, saved)

def test_a_product_saves_each_operand_for_the_other() -> None:
    f = flow("""
    import torch
    def f():
        w = torch.randn(3, requires_grad=True)
        x = torch.randn(3)
        y = x * w
    """)
    saved_roots = {r for s in f.saved for r in s.roots}
    assert bound(f, "x")[0].value.roots <= saved_roots
    assert bound(f, "y")[0].value.graph == frozenset(s.index for s in f.saved)


def test_nothing_is_saved_under_no_grad() -> None:
    f = flow("""
    import torch
    def f():
        w = torch.randn(3, requires_grad=True)
        with torch.no_grad():
            y = torch.sigmoid(w) * w
    """)
    assert f.saved == []


def test_a_backward_in_between_frees_what_was_saved() -> None:
    f = flow("""
    import torch
    def f():
        w = torch.randn(3, requires_grad=True)
        y = torch.exp(w)
        y.sum().backward()
        y.add_(1)
    """)
    (write,) = f.of(Write)
    assert saved_before(f, write) is None


def test_a_parameter_s_kind_comes_from_its_annotation_default_and_uses() -> None:
    f = flow("""
    import torch
    from torch import nn
    def f(a: torch.Tensor, b: nn.Module, c: int, d=0.1, e=None, model=None, x=None, opt=None, loss=None):
        model(x)
        x.sum(dim=1)
        loss.backward()
        opt.zero_grad()
        opt.step()
    """)
    kinds = {name: value.kind for name, value in f.params.items()}
    assert kinds["a"] is Kind.TENSOR and kinds["b"] is Kind.MODULE and kinds["c"] is Kind.OTHER
    assert kinds["d"] is Kind.UNKNOWN and kinds["e"] is Kind.UNKNOWN
    assert kinds["model"] is Kind.MODULE and kinds["x"] is Kind.TENSOR and kinds["opt"] is Kind.OPTIMIZER
    assert f.params["loss"].kind is Kind.TENSOR and f.params["loss"].grad is Tri.YES  # backward() is called on it
    assert f.params["a"].roots == frozenset((roots.argument("a"),))
    assert f.params["model"].roots == frozenset((roots.parameters("model"),))


def test_a_docstring_says_what_an_argument_is_and_is_no_code() -> None:
    f = flow('''
    import torch
    def f(model, im_gpu, masks, algo, boxes=None):
        """Plot masks.

        Args:
            model (nn.Module): the network
            im_gpu (tensor): img is in cuda, shape: [3, h, w]
            masks (torch.Tensor, optional): predicted masks
            algo (Algo instance): the algorithm to train
            boxes (np.ndarray): one box per row
        """
        im_gpu = im_gpu.to(masks.device)
        return algo.log_info(model(im_gpu))
    ''')
    kinds = {name: value.kind for name, value in f.params.items()}
    assert kinds["model"] is Kind.MODULE and kinds["im_gpu"] is Kind.TENSOR and kinds["masks"] is Kind.TENSOR
    assert kinds["boxes"] is Kind.NDARRAY
    # `algo (Algo instance): ...` is prose: no type the analysis knows, and not a call of `algo`.
    assert kinds["algo"] is Kind.UNKNOWN
    g = flow('''
    import numpy as np
    def g(feats, i):
        """Args:
            feats (torch.Tensor): real features
        """
        if isinstance(feats[i], np.ndarray):
            return feats[i]
    ''', "g")
    assert g.params["feats"].kind is Kind.UNKNOWN  # the code tests what it holds: the docstring yields


def test_forward_s_first_input_is_a_tensor() -> None:
    f = flow("""
    import torch
    class Net(torch.nn.Module):
        def forward(self, x, mask=None):
            return x
    """, "Net.forward")
    assert f.is_forward and f.params["x"].kind is Kind.TENSOR and f.params["mask"].kind is Kind.UNKNOWN


def test_isinstance_narrows_each_arm() -> None:
    f = flow("""
    import torch
    def f(v):
        if isinstance(v, torch.Tensor):
            a = v
        else:
            b = v
    """)
    assert bound(f, "a")[0].value.kind is Kind.TENSOR
    assert bound(f, "b")[0].value.kind is Kind.OTHER


def test_what_is_not_a_tensor_is_on_no_device() -> None:
    # A crowd counter's visualisation (PET): the threshold comes out of the model's outputs,
    # on the GPU if it is a tensor, and is made a float when it is one; compared with a map
    # already moved to the CPU, it gives a CPU mask whatever it was.
    f = flow("""
    import torch
    def f(model, samples, device):
        outputs = model(samples.to(device))
        threshold = outputs.get("threshold", 0.5)
        if torch.is_tensor(threshold):
            threshold = float(threshold.cpu().item())
        split = outputs["map"][0].detach().cpu() > threshold
    """)
    assert bound(f, "threshold")[0].value.device is Device.MAYBE_CUDA
    assert bound(f, "split")[0].value.device is Device.CPU


def test_methods_see_the_attributes_init_sets() -> None:
    fs = flows("""
    import torch
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.register_buffer("scale", torch.ones(2))

        def forward(self, x):
            h = self.fc(x)
            return h * self.scale
    """)
    f = fs["Net.forward"]
    assert bound(f, "h")[0].value.attached  # a Linear owns parameters
    assert f.final_state["self.scale"].is_tensor and f.final_state["self.scale"].grad is Tri.NO


def test_module_constants_reach_every_function() -> None:
    parsed = parse("example.py", 'import torch\nDEVICE = torch.device("cuda")\nEPS = 1e-6\ndef f():\n    return torch.zeros(2, device=DEVICE)\n')
    analysis = FileAnalysis(parsed)
    constants = analysis.constants()
    assert constants["DEVICE"].kind is Kind.DEVICE and constants["EPS"].kind is Kind.SCALAR
    scope = next(s for s in parsed.scopes if s.name == "f")
    (ret,) = [e for e in analysis.function(scope).events if type(e).__name__ == "Return"]
    assert ret.value.device.may_be_gpu


def test_a_pipeline_step_receives_the_tensor_the_step_before_returns() -> None:
    parsed = parse("example.py", """import torch
from torchvision import transforms
class Scale:
    def __call__(self, img):
        img.mul_(2)
        return img
pipeline = transforms.Compose([transforms.ToTensor(), Scale()])
""")
    inputs = FileAnalysis(parsed).pipeline_inputs()
    assert "Scale" in inputs and inputs["Scale"].startswith("the output of `transforms.ToTensor(...)`")


def test_the_queries_rules_ask() -> None:
    fs = flows("""
    import torch
    def normalize(x: torch.Tensor):
        y = x.view(-1)
        y -= y.mean()
        return x

    def reset_(buf: torch.Tensor):
        buf.zero_()

    def caller(images: torch.Tensor):
        out = normalize(images)
        return images + out

    def train(model, loader, opt):
        for x in loader:
            model(x).sum().backward()
            opt.step()
    """)
    normalize = fs["normalize"]
    (write,) = normalize.of(Write)
    assert [p.holder for p in alias_pairs(normalize, write)] == ["x"]
    assert returns_argument(normalize, "x") and caller_keeps_argument(normalize, "x")
    assert is_mutating_function(fs["reset_"]) and not is_mutating_function(normalize)
    train = fs["train"]
    assert training_loop(train, next(iter(train.loops.values())))


def test_the_walk_is_the_same_whatever_the_hash_seed(tmp_path) -> None:
    import os
    import subprocess
    import sys

    script = (
        "from tests.analysis.helpers import flow\n"
        "f = flow('''\\nimport torch\\ndef f(x: torch.Tensor, m):\\n    y = m(x)\\n    for i in range(3):\\n        y = y * x\\n    return y\\n''')\n"
        "print([(type(e).__name__, e.line, sorted(getattr(e, 'value', None).roots) if hasattr(e, 'value') else None) for e in f.events])\n"
    )
    outs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        outs.add(done.stdout)
    assert len(outs) == 1


def test_a_syntax_node_the_walk_does_not_model_is_unknown() -> None:
    f = flow("""
    def f():
        x = ...
        return x
    """)
    assert bound(f, "x")[0].value.kind is Kind.UNKNOWN
    assert isinstance(bound(f, "x")[0].expr, cst.Ellipsis)


def test_a_buffer_cleared_first_is_an_output_however_the_zero_is_spelled() -> None:
    from review_copies.analysis.queries.intent import reset_before_use

    for zero in ("0", "0.0", "0x0", "0b0", "0_0", "0e0"):
        source = f"def f(buf, x):\n    if buf is None:\n        return x\n    buf *= {zero}\n    buf += x\n    return buf.sum() + x.sum()\n"
        assert reset_before_use(flow(source), "buf"), zero
    assert not reset_before_use(flow("def f(buf, x):\n    y = buf * 2\n    buf *= 0\n    return y\n"), "buf")


def test_a_parameter_annotated_with_a_scipy_class_is_no_tensor_whatever_its_name() -> None:
    f = flow(
        """
        import scipy.sparse as sp
        import torch
        def f(adj: sp.csr.csr_matrix, adj_t: torch.Tensor):
            return adj.data, adj_t
        """
    )
    assert f.params["adj"].kind is Kind.OTHER and f.params["adj_t"].kind is Kind.TENSOR


def test_a_parameter_annotated_callable_is_no_module_whatever_its_name() -> None:
    # A metric that takes `model: Callable` is handed a predict wrapper (under no_grad, on
    # arrays) as often as a module: what the call returns is not known to hold a graph.
    f = flow(
        """
        from collections.abc import Callable as Fn
        from typing import Callable
        import numpy as np
        def f(series: np.ndarray, model: Callable, net: Callable[[np.ndarray], np.ndarray], critic: Fn, policy):
            policy(series)
            return model(series), net(series), critic(series)
        """
    )
    kinds = {name: value.kind for name, value in f.params.items()}
    assert kinds["model"] is Kind.OTHER and kinds["net"] is Kind.OTHER and kinds["critic"] is Kind.OTHER
    assert kinds["policy"] is Kind.MODULE


def test_a_model_called_on_arrays_only_is_a_predict_function_not_a_forward() -> None:
    # Explainers built for any classifier call `model(x_np)` on NumPy arrays when the model
    # is not a torch one: no module takes an ndarray, so nothing says a graph comes back.
    f = flow(
        """
        import numpy as np
        import torch
        def f(model, x: torch.Tensor):
            x_np = x.detach().cpu().numpy()
            scores = model(x_np.reshape(1, -1))
            logits = model(x)
            n = len(x_np)
            return scores, logits, n
        """
    )
    assert bound(f, "scores")[0].value.kind is Kind.UNKNOWN
    assert bound(f, "n")[0].value.kind is Kind.SCALAR  # a builtin over an array is still what it was
    assert bound(f, "logits")[0].value.kind is Kind.TENSOR and bound(f, "logits")[0].value.grad is Tri.YES
