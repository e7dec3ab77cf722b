"""RC321 numpy-on-grad-or-gpu-tensor."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.rewrite import chain, method
from review_copies.analysis.syntax import call_method_name, code_of, receiver_of
from review_copies.analysis.values import Device, Tri, Value
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.numpy_bridge.helpers import graph_as_known

_VALID = (
    Valid(
        """
        import numpy as np
        import torch
        def show_feature_map(feature_data):
            upsample = torch.nn.UpsamplingBilinear2d(size=(64, 64))
            feature_data = upsample(torch.sum(feature_data, 2))
            return np.array(feature_data.cpu())
        """,
        "`UpsamplingBilinear2d` owns no parameters: its output needs grad only if its input does, which nothing here says (a hyperspectral model zoo's feature-map plot)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        def generate_music(input_ids, model: nn.Module, max_length: int):
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model.to(device)
            generated = model.generate(input_ids=input_ids.to(device), max_length=max_length)
            return generated.cpu().numpy()
        """,
        "a language model's `generate()` hands back token ids, integers that never require grad, not a forward pass's output (mamba-music-generation)",
    ),
    Valid(
        """
        import torch
        def search(model, x: torch.Tensor, target: int, steps: int):
            x = x.clone().requires_grad_(True)
            opt = torch.optim.Adam([x], lr=0.01)
            for _ in range(steps):
                probs = torch.softmax(model(x), dim=-1)
                loss = -torch.log(probs[0, target])
                opt.zero_grad()
                loss.backward()
                opt.step()
                with torch.no_grad():
                    best = probs.squeeze().cpu().numpy()
            return x.detach(), best
        """,
        "`.numpy()` refuses a tensor that requires grad only while grad mode is on: under `no_grad` it converts (a counterfactual search's best prediction)",
    ),
    Valid(
        """
        import pickle
        import torch
        class Client:
            def __call__(self, **data):
                return pickle.loads(self.sock.recv(1 << 20))
        def act(model: Client, obs: torch.Tensor):
            action = model(image=obs)
            return action[0, :7].cpu().numpy()
        """,
        "`model: Client` is a plain class whose `__call__` unpickles a server's answer, not a module (Xiaomi Robotics' CALVIN client)",
    ),
    Valid(
        """
        import torch
        def expert_bytes(stack: torch.Tensor, absmax_dtype) -> bytes:
            t = stack.contiguous().cpu().to(absmax_dtype)
            return t.view(torch.uint8).numpy().tobytes()
        """,
        "`.to(absmax_dtype)` converts the dtype: the tensor stays where `.cpu()` put it (experts4bit-qlora's test)",
    ),
    Valid(
        """
        import torch
        from accelerate import Accelerator
        def train(model, loader, valid_scores, optimizer):
            accelerator = Accelerator()
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
            for x, y in loader:
                loss = torch.nn.functional.mse_loss(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
            accelerator.wait_for_everyone()
            scores = accelerator.gather(valid_scores)
            return scores.cpu().numpy()
        """,
        "`accelerator.backward(loss)` backpropagates the loss, not the accelerator, which has methods no tensor has "
        "(Music-Source-Separation-Training's validation scores, gathered across processes)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
            def forward(self, x):
                return self.fc(x)
            def inference(self, pred):
                return torch.argmax(pred, -1)
        def evaluate(model, x):
            pred = model(x)
            labels = pred.max(1)[1].cpu().numpy()
            hard = model.inference(pred).cpu().numpy()
            return labels, hard
        """,
        "`max(1)[1]` is the indices of a (values, indices) pair, and `inference` returns `torch.argmax(...)`: integer tensors never require grad (deepsnap's examples)",
    ),
    Valid(
        """
        import numpy as np
        import torch
        def running_mean(signal, n):
            conv = torch.nn.Conv1d(1, 1, kernel_size=2 * n + 1, bias=False)
            conv.weight.requires_grad_(False)
            conv.weight.fill_(1 / (2 * n + 1))
            return conv(torch.from_numpy(signal.astype(np.float32))).squeeze().numpy()
        def smooth(signal):
            conv = torch.nn.Conv1d(1, 1, 3).requires_grad_(False)
            return conv(torch.from_numpy(signal)).numpy()
        """,
        "the module's weight (or the whole module) was frozen first: its output holds no graph (KPConv-PyTorch's plot_convergence.py)",
    ),
    Valid(
        """
        import numpy as np
        import torch
        class StormModel(torch.nn.Module):
            @classmethod
            def _load_invariant(cls, path):
                return torch.from_numpy(np.load(path)).to(dtype=torch.float32)[::2, ::2]
            @classmethod
            def load(cls, path):
                invariants = np.stack([cls._load_invariant(path).numpy()])
                return cls(invariants)
        """,
        "`cls._load_invariant(...)` in a classmethod calls the class's own method, not a submodule's forward pass",
    ),
    Valid(
        """
        import torch
        class Annotator:
            def masks(self, masks, im_gpu, alpha=0.5):
                \"\"\"Plot masks at once.
                Args:
                    im_gpu (tensor): img is in cuda, shape: [3, h, w], range: [0, 1]
                \"\"\"
                if len(masks) == 0:
                    return im_gpu.permute(1, 2, 0).contiguous().cpu().numpy() * 255
                if im_gpu.device != masks.device:
                    im_gpu = im_gpu.to(masks.device)
                return (im_gpu * (1 - masks * alpha)).cpu().numpy()
        """,
        "`im_gpu (tensor): ...` in the docstring is prose, not a call of a model named `im_gpu`",
    ),
    Valid(
        """
        import torch
        def draw(model, x):
            out = model(x)
            return (out * 255).byte().cpu().numpy()
        """,
        "`.byte()` gives an integer tensor, which never requires grad",
    ),
    Valid(
        """
        import pytest
        torch = pytest.importorskip("torch")
        def test_delta(dtype):
            model = torch.nn.Linear(2, 1, bias=False).to(dtype=dtype)
            before = model.state_dict()["weight"].clone()
            return (model.state_dict()["weight"] - before).cpu().to(torch.float32).numpy()
        """,
        "`pytest.importorskip(\"torch\")` imports torch: `torch.float32` is a dtype, and `.cpu()` put the tensor on the CPU",
    ),
    Valid(
        """
        import pytest
        import torch
        @pytest.fixture(name="ctx")
        def _ctx():
            with torch.inference_mode():
                yield object()
        def test_linear(ctx):
            model = torch.nn.Linear(4, 2)
            y = model(torch.ones(1, 4)).numpy()
            assert y.shape == (1, 2)
        """,
        "the test takes a fixture that yields inside `torch.inference_mode()`: its body runs with autograd off",
    ),
    Valid(
        """
        import numpy as np
        import torch
        expected = [[1.0, 1.25], [1.5, 1.75]]
        def test_pool(pool):
            for output in expected:
                want = np.array(output[0])
                x = torch.ones(2, requires_grad=True)
                output = pool(x)
                output.backward(torch.ones_like(output))
                assert np.allclose(output.detach().numpy()[0], want)
        """,
        "the loop's `output` is the expected data; only the name bound later is backpropagated",
    ),
    Valid(
        """
        import torch
        def f(x: torch.Tensor):
            return x.detach().cpu().numpy()
        """
    ),
    Valid(
        """
        import torch
        def f(model, x):
            model.eval()
            with torch.no_grad():
                out = model(x.cpu())
            return out.numpy()
        """,
        "computed under no_grad on the CPU",
    ),
    Valid(
        """
        import torch
        def f():
            t = torch.zeros(3)
            return t.numpy()
        """,
        "a CPU tensor that needs no grad",
    ),
    Valid(
        """
        import torch
        def f(x):
            return x.numpy()
        """,
        "nothing is known about x",
    ),
    Valid(
        """
        import torch
        CPU = torch.device("cpu")
        def fit(features: torch.Tensor, device: torch.device):
            features = features.to(device=device, dtype=torch.float64)
            if device == CPU:
                features = features.numpy()
            return features
        """,
        "converted only in the arm where the run-time device is the CPU",
    ),
    Valid(
        """
        import torch
        def fit(features: torch.Tensor, device):
            features = features.to(device)
            if features.device.type != "cpu":
                raise ValueError("this solver runs on the CPU")
            return features.numpy()
        """,
        "the other devices left the function before the conversion",
    ),
    Valid(
        """
        import torch
        def decode_one_batch(model: torch.nn.Module, feature):
            processed = model.mask_encoder(feature)
            mask = processed * 2
            return mask.cpu().numpy()
        def decode_dataset(model, loader):
            return [decode_one_batch(model, f) for f in loader]
        @torch.no_grad()
        def main(model, loader):
            return decode_dataset(model, loader)
        """,
        "every chain of calls into it starts under no_grad (followed up the calls): the masks carry no graph",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class FeatureNet(nn.Module):
            def __init__(self, requires_grad=False):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                for param in self.parameters():
                    param.requires_grad = requires_grad
            def forward(self, x):
                return [self.conv(x)]
        def activations(batches, model, pca=None):
            scores = []
            for batch in batches:
                pred = model(batch)[0]
                if pca is not None:
                    pred = pca.transform(pred.cpu()[:, :, 0, 0])
                    scores.append(pred)
                else:
                    scores.append(pred[:, :, 0, 0].cpu().numpy())
            return scores
        def statistics(batches, cuda):
            model = FeatureNet()
            if cuda:
                model.cuda()
            return activations(batches, model)
        """,
        "the only caller hands over a module whose constructor turns grad off for all its parameters (pytorch-fid's InceptionV3); "
        "the `pca` arm's `pred` never reaches the `else` arm: the loop binds it anew first",
    ),
    Valid(
        """
        import torch
        def segment(model, frames: torch.Tensor, is_cuda: bool):
            device = "cuda" if is_cuda else "cpu"
            with torch.no_grad():
                masks = torch.zeros(len(frames), 4, device=device)
                if is_cuda:
                    return masks.cpu().numpy()
                else:
                    return masks.numpy()
        """,
        "the device is a GPU exactly when `is_cuda` holds: in the `else` arm of `if is_cuda:` the masks are on the CPU",
    ),
    Valid(
        """
        import copy
        import torch
        def save_samples(G_ema: torch.nn.Module, z: torch.Tensor):
            return G_ema(z).cpu().numpy()
        def training_loop(build, z: torch.Tensor, steps: int):
            G = build().train().requires_grad_(False)
            G_ema = copy.deepcopy(G).eval()
            for step in range(steps):
                G.requires_grad_(True)
                G(z).mean().backward()
                G.requires_grad_(False)
                save_samples(G_ema, z)
        """,
        "the only caller hands over a deep copy of a generator built with grad off, and thaws only the original afterwards (StyleGAN-T's `G_ema`)",
    ),
    Valid(
        """
        import torch
        import torch.nn.functional as F
        def inference(model, image):
            probs = F.softmax(model(image), dim=1)[0]
            return probs.cpu().numpy().argmax(axis=0)
        def main(model, images):
            torch.set_grad_enabled(False)
            model.eval()
            return [inference(model, image) for image in images]
        """,
        "the only caller turns autograd off for the rest of its body before it calls (deeplab-pytorch's demo)",
    ),
    Valid(
        """
        import torch
        from torch import nn
        from torchcrf import CRF
        class Tagger(nn.Module):
            def __init__(self, hidden: int, tags: int):
                super().__init__()
                self.fc = nn.Linear(hidden, tags)
                self.crf = CRF(tags, batch_first=True)
            def forward(self, x):
                return self.fc(x)
            def crf_decode(self, emissions, mask):
                return self.crf.decode(emissions, mask)
        def evaluate(model, x, mask):
            return model.crf_decode(model(x), mask).cpu().numpy()
        """,
        "`crf_decode` hands back what the CRF object's `decode` computes (Viterbi paths), not a submodule's forward output: whether it holds a graph is unknown",
    ),
)


class NumpyOnGradOrGpuTensor(Rule):
    """
    ## What it does
    Finds `.numpy()` (and `np.asarray(t)` / `np.array(t)`) on a tensor that requires grad
    or that may live on a GPU, without `.detach()` / `.cpu()` first.

    ## Why is this bad?
    It fails at run time: on a tensor attached to the graph with "RuntimeError: Can't call
    numpy() on Tensor that requires grad", and on a CUDA tensor with "TypeError: can't
    convert cuda:0 device type tensor to numpy". Code that only ever ran on CPU under
    `no_grad` breaks the day it trains or moves to a GPU. What a function or method that the
    repository defines under `@torch.no_grad()` returns (`actor.select_action(obs)`) carries
    no graph, whatever module it was called on; nor does the output of a module built
    from a repository class whose constructor turns grad off for all its parameters
    (pytorch-fid's `InceptionV3`), here or by every caller that hands it over.

    ## Example
    ```python
    def predict(model, x):
        out = model(x)
        return out.numpy()
    ```

    ## Use instead
    ```python
    def predict(model, x):
        out = model(x)
        return out.detach().cpu().numpy()
    ```

    ## Fix safety
    Safe: `.detach().cpu().numpy()` gives the same array wherever the original works
    (on a CPU tensor `.cpu()` returns the tensor itself, so the array still shares its
    memory, as `.numpy()` did).
    """

    code = "RC321"
    name = "numpy-on-grad-or-gpu-tensor"
    category = Category.NUMPY_BRIDGE
    severity = Severity.ERROR
    prefilter = ("numpy", "asarray", "array(")
    recipes = ("raises",)

    VALID = _VALID

    INVALID = (
        Invalid(
            """
            import torch
            from torch import nn
            def sample(input_ids, model: nn.Module, max_length: int):
                model.cuda()
                generated = model.generate(input_ids=input_ids.cuda(), max_length=max_length)
                return generated.numpy()
            """,
            line=6,
            fix="""
            import torch
            from torch import nn
            def sample(input_ids, model: nn.Module, max_length: int):
                model.cuda()
                generated = model.generate(input_ids=input_ids.cuda(), max_length=max_length)
                return generated.detach().cpu().numpy()
            """,
        ),
        Invalid(
            """
            import torch
            def segment(frames: torch.Tensor, use_gpu: bool):
                device = torch.device("cuda" if use_gpu else "cpu")
                masks = (frames.to(device) > 0).float()
                if use_gpu:
                    print(masks.sum())
                return masks.numpy()
            """,
            line=7,
            fix="""
            import torch
            def segment(frames: torch.Tensor, use_gpu: bool):
                device = torch.device("cuda" if use_gpu else "cpu")
                masks = (frames.to(device) > 0).float()
                if use_gpu:
                    print(masks.sum())
                return masks.detach().cpu().numpy()
            """,
        ),
        Invalid(
            """
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                return (w * 2).numpy()
            """,
            line=4,
            fix="""
            import torch
            def f():
                w = torch.randn(3, requires_grad=True)
                return (w * 2).detach().cpu().numpy()
            """,
        ),
        Invalid(
            """
            import torch
            def f(x: torch.Tensor, device):
                y = x.to(device) * 2
                return y.cpu().numpy() + y.numpy()
            """,
            line=4,
            fix="""
            import torch
            def f(x: torch.Tensor, device):
                y = x.to(device) * 2
                return y.cpu().numpy() + y.detach().cpu().numpy()
            """,
            note="y.cpu().numpy() is fine for the device; y may still require grad, but nothing says so",
        ),
        Invalid(
            """
            import numpy as np
            import torch
            def f():
                layer = torch.nn.Linear(2, 2)
                out = layer(torch.ones(1, 2))
                return np.asarray(out)
            """,
            line=6,
            fix="""
            import numpy as np
            import torch
            def f():
                layer = torch.nn.Linear(2, 2)
                out = layer(torch.ones(1, 2))
                return np.asarray(out.detach().cpu())
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            if event.method == "numpy" and event.receiver is not None and event.receiver.is_tensor:
                if any(a.keyword is not None and a.keyword.value == "force" for a in event.call.args):
                    continue
                value = graph_as_known(flow, event.receiver, receiver_of(event.call), event)
                problem = _problem(value, code_of(receiver_of(event.call)))
                if problem:
                    yield Hit(event.node, problem, (event.node, _fixed_numpy(event.call)), claims=_claims(value))
            elif event.is_any(("numpy.asarray", "numpy.array", "numpy.asanyarray")) and event.args and event.args[0].is_tensor:
                arg = event.call.args[0].value
                value = graph_as_known(flow, event.args[0], arg, event)
                problem = _problem(value, code_of(arg))
                if problem:
                    yield Hit(event.node, problem, (arg, chain(_base(arg), "detach", "cpu")), claims=_claims(value))


def _problem(value: Value, what: str) -> str:
    reasons = []
    if value.grad is Tri.YES:
        origin = f" ({value.origin})" if value.origin and value.origin != f"`{what}`" else ""
        reasons.append(f"`{what}` requires grad{origin}, so the conversion raises \"Can't call numpy() on Tensor that requires grad\"")
    if value.device is Device.CUDA:
        reasons.append(f"`{what}` is on the GPU, where the conversion raises TypeError")
    elif value.device is Device.MAYBE_CUDA:
        reasons.append(f"`{what}` may be on a GPU (it was moved to a device chosen at run time), where the conversion raises TypeError")
    if not reasons:
        return ""
    return "; ".join(reasons) + ". Convert with `.detach().cpu().numpy()`."


def _claims(value: Value) -> frozenset[str]:
    """What the message says: the tensor requires grad, and/or it is (or may be) on a GPU."""
    return frozenset(c for c, held in (("grad", value.grad is Tri.YES), ("gpu", value.device.may_be_gpu)) if held)


def _base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """Strip trailing .cpu() / .detach() calls: they are put back in the canonical order."""
    while isinstance(expr, cst.Call) and call_method_name(expr) in ("cpu", "detach") and not expr.args:
        expr = receiver_of(expr)
    return expr


def _fixed_numpy(call: cst.Call) -> cst.Call:
    return method(chain(_base(receiver_of(call)), "detach", "cpu"), "numpy")
