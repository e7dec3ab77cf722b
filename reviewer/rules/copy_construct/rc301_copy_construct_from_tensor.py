"""RC301 copy-construct-from-tensor."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import Call, FunctionFlow
from review_copies.analysis.guesses import UsageEvidence, usage_evidence
from review_copies.analysis.parameters import annotated_to_admit_others
from review_copies.analysis.queries.aliasing import last_bind
from review_copies.analysis.queries.callers import position_of
from review_copies.analysis.queries.loops import unbound_on_the_first_pass
from review_copies.analysis.queries.members import A_FUNCTION, classes_assigned
from review_copies.analysis.rewrite import chain, clean_args, kwarg, method
from review_copies.analysis.semantics.callables import OUTPUT_ORIGIN
from review_copies.analysis.signature import signature_of
from review_copies.analysis.syntax import call_method_name, code_of, is_name
from review_copies.analysis.values import Kind, Tri, Value
from review_copies.index.arrays import callers_pass_arrays
from review_copies.index.classes import plain_class
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_VALID = (
    Valid(
        """
        import torch
        def meta(dataset, fields, episode: torch.Tensor):
            out = {}
            for field in fields:
                value = dataset.meta_buffer.data[field][episode.item()]
                out[field] = torch.tensor(value)
            return out
        """,
        "nothing says `dataset.meta_buffer` is a tensor: its `.data` is a memory-mapped replay buffer's arrays (pi-zero's meta buffer)",
    ),
    Valid(
        """
        import torch
        from torch import nn, tensor
        from transformers import AutoProcessor
        class Policy(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)
                self.action_tokenizer = AutoProcessor.from_pretrained("physical-intelligence/fast", trust_remote_code=True)
            def forward(self, actions: torch.Tensor):
                ids = self.action_tokenizer(actions)
                return self.proj(actions), [tensor(i) for i in ids]
        """,
        "a transformers processor is not a module: it returns lists of token ids (pi-zero's discretized actions)",
    ),
    Valid(
        """
        import scipy.sparse as sp
        import torch
        def adj2edge(adj: sp.csr.csr_matrix):
            row, col = adj.nonzero()
            data = adj.data
            edge_index = torch.stack([torch.tensor(row, dtype=torch.long), torch.tensor(col, dtype=torch.long)], dim=0)
            edge_attr = torch.tensor(data, dtype=torch.float)
            return edge_index, edge_attr
        """,
        "`adj` is annotated as a SciPy matrix: its `.data` is a NumPy array, which `torch.tensor` copies as it should (CogDL)",
    ),
    Valid(
        """
        import torch
        class STDPParameters:
            def __init__(self, eta: torch.Tensor = torch.as_tensor(1e-3), algorithm: str = "additive", mu: torch.Tensor = 0.0):
                self.eta = eta
                if algorithm == "additive":
                    self.mu = torch.tensor(0.0)
                else:
                    self.mu = torch.tensor(mu)
                self.update = lambda w: self.eta * torch.pow(1.0 - w, self.mu)
        """,
        "`mu: torch.Tensor = 0.0`: the default is a plain number, so `mu` may be one, and `mu.detach()` would raise on it (norse's STDP parameters)",
    ),
    Valid(
        """
        import numpy as np
        import torch
        def load_scene(path):
            params = dict(np.load(path, allow_pickle=True))
            params = {k: torch.tensor(params[k]).float() for k in params}
            for k in list(params):
                if not isinstance(params[k], torch.Tensor):
                    params[k] = torch.tensor(params[k]).float()
            return params
        """,
        "the entry is converted only where `isinstance(params[k], torch.Tensor)` failed: it is not a tensor there (SplaTAM's viz_scripts)",
    ),
    Valid(
        """
        import numpy as np
        import torch
        import xatlas
        def texture_indices(mesh_v, mesh_pos_idx):
            vmapping, indices, uvs = xatlas.parametrize(mesh_v.detach().cpu().numpy(), mesh_pos_idx.detach().cpu().numpy())
            indices_int64 = indices.astype(np.uint64, casting="same_kind").view(np.int64)
            return torch.tensor(indices_int64, dtype=torch.int64, device=mesh_v.device)
        """,
        "`astype` is a NumPy method (a tensor has none): `indices_int64` is an array, and `.view(np.int64)` reinterprets it",
    ),
    Valid(
        """
        from typing import List
        import numpy as np
        import torch
        def overlap(w2c_curr: torch.Tensor, w2c_hist: torch.Tensor, device=None) -> float:
            w2c_curr = torch.tensor(w2c_curr, device=device)
            w2c_hist = torch.tensor(w2c_hist, device=device)
            return float((torch.linalg.inv(w2c_curr) @ w2c_hist).trace())
        def select(w2c_list: List[np.ndarray], current: int, device=None) -> int:
            scores = [overlap(w2c_list[current], w2c_list[i], device=device) for i in range(current)]
            return int(np.argmax(scores))
        """,
        "the annotation says `torch.Tensor`, but the one caller passes items of a `List[np.ndarray]`",
    ),
    Valid(
        """
        import torch
        def kmeans(x, k, max_it=32):
            x, k = torch.tensor(x, dtype=torch.float), min(len(x), k)
            d = x.unique()
            dists, y = torch.abs_(x.unsqueeze(-1) - d).min(-1)
            return d[:k], y
        """,
        "`x, k = torch.tensor(x), ...` rebinds `x`: the tensor methods after it say what the new value is, not what the caller passed",
    ),
    Valid(
        """
        import torch
        def f(values: list[float]):
            return torch.tensor(values)
        """,
        "a list, not a tensor",
    ),
    Valid(
        """
        import torch
        def f(x: torch.Tensor):
            return x.detach().clone()
        """
    ),
    Valid(
        """
        import numpy as np
        import torch
        def f():
            a = np.zeros(3)
            return torch.tensor(a)
        """,
        "a NumPy array: torch.tensor is the right way to copy it",
    ),
    Valid(
        """
        import torch
        def f(x):
            return torch.tensor(x)
        """,
        "nothing says x is a tensor",
    ),
    Valid(
        """
        import numpy as np
        import torch
        class ToArray:
            def __call__(self, img):
                return np.asarray(img)
        class ToFloat:
            def __call__(self, img):
                return torch.tensor(img, dtype=torch.float32)
        steps = [ToArray(), ToFloat()]
        def run(img):
            for step in steps:
                img = step(img)
            return img
        """,
        "the step before it in the pipeline hands over a NumPy array",
    ),
    Valid(
        """
        import torch
        class ToTensor:
            def __call__(self, img):
                return torch.as_tensor(img)
        class ToFloat:
            def __call__(self, img):
                return torch.tensor(img, dtype=torch.float32)
        steps = [ToTensor(), ToFloat()]
        """,
        "a list of steps that nothing runs as a pipeline says nothing about their inputs",
    ),
    Valid(
        """
        import torch
        def answer_weights(samples):
            for sample in samples:
                if not hasattr(sample, "weight"):
                    sample.weight = torch.tensor([0.2])
                else:
                    sample.weight = torch.tensor(sample.weight)
            return torch.cat([s.weight for s in samples])
        """,
        "each iteration has a new `sample`: the tensor the previous one was given says nothing about this one's list",
    ),
    Valid(
        """
        import numpy as np
        import torch
        def scale_shift(q: torch.Tensor):
            return torch.tensor(q[:, -8:].cpu().numpy().view(np.float32).astype(np.float16).view(np.uint8))
        """,
        "after `.numpy()` the chain is NumPy's: `astype` and `view(dtype)` return arrays",
    ),
    Valid(
        """
        import torch
        def features(x, y, as_tensors=False):
            if as_tensors:
                x = x.clone().detach().float()
                y = y.clone().detach().long()
            else:
                x = torch.tensor(x, dtype=torch.float)
                y = torch.tensor(y, dtype=torch.long)
            return x, y
        """,
        "the flag decides what the arguments are: the arm that clones gets tensors, the one that constructs gets arrays",
    ),
    Valid(
        """
        import torch
        from torch import Tensor
        def normalized(weights) -> Tensor:
            if isinstance(weights, (Tensor, list)):
                return torch.tensor(weights) / sum(weights)
            raise TypeError
        """,
        "`isinstance(weights, (Tensor, list))` lets a list through too: `weights.detach().clone()` would break it",
    ),
    Valid(
        """
        import torch
        import torchvision
        def cifar(root):
            train = torchvision.datasets.CIFAR10(root, True, download=True)
            return torch.tensor(train.data).permute(0, 3, 1, 2).float()
        """,
        "a dataset's `.data` is whatever the dataset keeps there: CIFAR10's is a NumPy array",
    ),
    Valid(
        """
        import weakref
        import torch
        class PointsSync:
            def __init__(self, layer):
                self._layer = weakref.ref(layer)
            def points(self) -> torch.Tensor:
                if (layer := self._layer()) is None:
                    return torch.empty(0, 2)
                return torch.tensor(layer.data).flip(dims=(1,))
        """,
        "nothing but the name says `layer.data` is a tensor: a napari layer keeps its points there as a NumPy array",
    ),
    Valid(
        """
        from typing import List, Union
        import torch
        class QuantileTensor:
            def __init__(self, base: torch.Tensor, tau: torch.Tensor) -> None:
                self.base, self.tau = base, tau
            def quantiles(self, tau: Union[List[float], torch.Tensor]) -> "QuantileTensor":
                new = []
                for tau_i in tau:
                    ind = min(int(torch.bucketize(tau_i, self.tau)), self.tau.numel() - 1)
                    new.append(torch.select(self.base, 0, ind))
                return QuantileTensor(torch.stack(new), torch.tensor(tau))
        """,
        "the annotation lets a list of floats in too: `tau.detach().clone()` would break it (pytorch_retrieve)",
    ),
    Valid(
        """
        import numpy as np
        import torch
        def frequency_grid(n: int) -> np.ndarray:
            return np.linspace(0.0, 16000.0, n)
        def transition(source_freqs: torch.Tensor) -> torch.Tensor:
            return torch.tensor(source_freqs, dtype=torch.float32)
        def stage(n: int) -> torch.Tensor:
            return transition(frequency_grid(n))
        """,
        "the annotation says `torch.Tensor`, but the one caller passes what a function annotated `-> np.ndarray` returns (dualdiffusion)",
    ),
    Valid(
        """
        import torch
        class BezierSampler(torch.nn.Module):
            def __init__(self, order: int, points: int):
                super().__init__()
                self.order, self.points = order, points
                self.bezier_coeff = self.make_coefficients()
            def make_coefficients(self):
                coeff = lambda ts: [[t ** k * (1 - t) ** (self.order - k) for k in range(self.order + 1)] for t in ts]
                return coeff
            def bernstein_matrix(self) -> torch.Tensor:
                return torch.tensor(self.bezier_coeff(torch.linspace(0, 1, self.points)))
        """,
        "`self.bezier_coeff` is the lambda a method made, not a submodule: it returns lists (pytorch-auto-drive)",
    ),
)


class CopyConstructFromTensor(Rule):
    """
    ## What it does
    Finds `torch.tensor(t)` and `t.new_tensor(u)` applied to something that already is a
    tensor.

    ## Why is this bad?
    `torch.tensor` always copies its data, and for a tensor argument it also silently
    detaches the copy from the autograd graph: gradients stop there without an error.
    PyTorch warns "To copy construct from a tensor, it is recommended to use
    sourceTensor.detach().clone()" on every call, and the intent (a copy? an alias? a
    graph cut?) is hidden from the reader.

    ## Example
    ```python
    def snapshot(x: torch.Tensor):
        return torch.tensor(x, dtype=torch.float64)
    ```

    ## Use instead
    ```python
    def snapshot(x: torch.Tensor):
        return x.detach().to(dtype=torch.float64, copy=True)
    ```
    `t.detach().clone()` when no dtype or device is given; `torch.as_tensor(t)` when no
    copy is wanted at all.

    ## Fix safety
    Safe: the fix computes the same values, with the same dtype, device and
    `requires_grad`, without the warning. It is not offered with `pin_memory=True`.
    """

    code = "RC301"
    name = "copy-construct-from-tensor"
    category = Category.COPY_CONSTRUCT
    severity = Severity.WARNING
    prefilter = ("tensor",)
    recipes = ("warning",)

    VALID = _VALID

    INVALID = (
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                y = torch.tensor(x.data.clone(), requires_grad=False)
                return y * 2
            """,
            line=3,
            fix="""
            import torch
            def f(x: torch.Tensor):
                y = x.data.detach().clone()
                return y * 2
            """,
            note="one copy, not a clone of the clone (3DDFA's loss)",
        ),
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                y = torch.tensor(x)
                return y * 2
            """,
            line=3,
            fix="""
            import torch
            def f(x: torch.Tensor):
                y = x.detach().clone()
                return y * 2
            """,
        ),
        Invalid(
            """
            import torch as T
            def f():
                w = T.randn(3, requires_grad=True)
                return T.tensor(w, dtype=T.float64, device="cpu")
            """,
            line=4,
            fix="""
            import torch as T
            def f():
                w = T.randn(3, requires_grad=True)
                return w.detach().to(dtype=T.float64, device="cpu", copy=True)
            """,
        ),
        Invalid(
            """
            from torch import tensor, zeros
            def f():
                base = zeros(4)
                return tensor(base[1:], requires_grad=True)
            """,
            line=4,
            fix="""
            from torch import tensor, zeros
            def f():
                base = zeros(4)
                return base[1:].detach().clone().requires_grad_(True)
            """,
        ),
        Invalid(
            """
            import torch
            def f(x: torch.Tensor):
                return x.new_tensor(x + 1)
            """,
            line=3,
            fix="""
            import torch
            def f(x: torch.Tensor):
                return (x + 1).detach().to(x, copy=True)
            """,
            note="new_tensor takes the receiver's dtype and device: .to(x) keeps that",
        ),
        Invalid(
            """
            import torch
            from torchvision import transforms
            class Scale:
                def __call__(self, img):
                    return torch.tensor(img) / 255.0
            pipeline = transforms.Compose([transforms.PILToTensor(), Scale()])
            """,
            line=5,
            fix="""
            import torch
            from torchvision import transforms
            class Scale:
                def __call__(self, img):
                    return img.detach().clone() / 255.0
            pipeline = transforms.Compose([transforms.PILToTensor(), Scale()])
            """,
            note="Compose hands each step the output of the step before it",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        for event in flow.of(Call):
            source = self._source(event)
            if source is None:
                continue
            arg_node, value = source
            if _callers_pass_arrays(flow, arg_node, value):
                continue  # annotated `torch.Tensor`, but every caller hands it a NumPy array
            if annotated_to_admit_others(flow, arg_node, value):
                continue  # `tau: Union[List[float], torch.Tensor]`: for a list, `torch.tensor` is the call to make
            if _output_of_a_plain_object(flow, value):
                continue  # `self.anchors(sizes)` in a module: a helper object's arrays, not a submodule's output
            if _data_of_an_unknown_object(flow, _bound_from(flow, event, arg_node)):
                continue  # `torch.tensor(layer.data)`: a napari layer's points, a dataset's array
            if isinstance(arg_node, cst.Name) and unbound_on_the_first_pass(flow, arg_node.value, event):
                continue  # bound only by a later line of the loop: the first pass raises NameError
            what = f"`{code_of(arg_node)}`"
            grad_note = ""
            if value.grad is Tri.YES:
                grad_note = f" {what} requires grad, so gradients silently stop at the copy."
            elif value.grad is Tri.MAYBE:
                grad_note = f" If {what} requires grad, gradients silently stop at the copy."
            call = "torch.tensor(...)" if event.qualnames else "new_tensor(...)"
            # Say where the tensor came from when another callable returned it (a module call,
            # the step before in a pipeline): that is why the argument is known to be a tensor.
            why = f" ({value.origin})" if value.origin.startswith(OUTPUT_ORIGIN) else ""
            message = (
                f"`{call}` on the tensor {what}{why} makes a detached copy and triggers PyTorch's "
                f"copy-construct warning.{grad_note} Say what is meant: `.detach().clone()` for a "
                "copy, `torch.as_tensor(...)` if no copy is needed."
            )
            yield Hit(event.node, message, _fix(event, arg_node))

    def _source(self, event: Call) -> tuple[cst.BaseExpression, Value] | None:
        call = event.call
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) != 1 or any(a.star for a in call.args):
            return None
        if not (event.is_any(("torch.tensor",)) or (event.method == "new_tensor" and event.receiver is not None and event.receiver.is_tensor)) or not event.args[0].is_tensor:
            return None
        return positional[0].value, event.args[0]


def _callers_pass_arrays(flow: FunctionFlow, arg: cst.BaseExpression, value: Value) -> bool:
    """The argument is the function's parameter as passed, and every call of the function
    (of a module's instances, for `forward`) in the repository passes a NumPy array for it."""
    scope = flow.scope
    if not isinstance(arg, cst.Name) or flow.index is None or scope is None or not isinstance(scope.node, cst.FunctionDef):
        return False
    name = arg.value
    if not any(roots.is_argument(r, name) for r in value.roots):
        return False
    position = position_of(scope, name)
    signature = signature_of(scope.node, scope.takes_self)
    # A module's `forward` is reached through its instances' calls (`self.encoder(graph, x)`).
    cls = scope.class_node.name.value if scope.name in ("forward", "__call__") and scope.class_node is not None else None
    ask = (lambda: flow.index.instance_callers_pass_arrays(cls, position, name)) if cls else (lambda: callers_pass_arrays(flow.index, scope.name, position, name, signature))
    return bool(flow.file.once(("callers pass arrays", scope.qualname, name), ask))


def _bound_from(flow: FunctionFlow, event: Call, arg: cst.BaseExpression) -> cst.BaseExpression:
    """What `arg` was taken from, through its last binding and the subscripts taken
    (`meta_data = buffer.data[field][i, j]` gives `buffer.data`)."""
    bind = last_bind(flow, arg.value, event.index, event) if isinstance(arg, cst.Name) else None
    arg = bind.expr if bind is not None and bind.expr is not None else arg
    while isinstance(arg, cst.Subscript):
        arg = arg.value
    return arg


def _data_of_an_unknown_object(flow: FunctionFlow, arg: cst.BaseExpression) -> bool:
    """`x.data` or `x.grad` where nothing but the attribute's name says `x` is a tensor (no
    `x.numpy()`, `x.size(-1)` in the function): napari layers, datasets, SciPy matrices and
    simulators keep NumPy arrays under the same names, and for those `torch.tensor` is the
    copy to make."""
    if not (isinstance(arg, cst.Attribute) and arg.attr.value in ("data", "grad") and flow.value(arg.value).kind is Kind.UNKNOWN):
        return False
    evidence = usage_evidence(code_of(flow.scope.node)) if flow.scope is not None else UsageEvidence()
    return not evidence.used_as_tensor(code_of(arg.value), ignoring=frozenset(("data", "grad")))


def _output_of_a_plain_object(flow: FunctionFlow, value: Value) -> bool:
    """The value is only taken for a tensor because an `nn.Module` method calls `self.x(...)`
    as if `self.x` were a submodule, while every assignment to `self.x` in the class builds
    an instance of a repository class that derives from `object` alone (an anchor generator
    whose `__call__` returns NumPy arrays)."""
    cls = flow.scope.class_node if flow.scope is not None else None
    index = flow.index
    if cls is None or index is None:
        return False
    for event in flow.of(Call):
        func = event.call.func
        if event.method is not None or not event.result.roots & value.roots or not isinstance(func, cst.Attribute) or not is_name(func.value, "self"):
            continue
        built = classes_assigned(cls, func.attr.value)
        if built and all(name == A_FUNCTION or flow.file.once(("plain class", name), lambda name=name: plain_class(index, name)) for name in built):
            return True
    return False


def _fix(event: Call, arg: cst.BaseExpression) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    call = event.call
    keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
    if "pin_memory" in keywords and not is_name(keywords["pin_memory"].value, "False"):
        return None
    if set(keywords) - {"dtype", "device", "requires_grad", "pin_memory"}:
        return None
    conversion = [a for a in call.args if a.keyword is not None and a.keyword.value in ("dtype", "device")]
    if call_method_name(arg) == "clone" and not arg.args:
        arg = arg.func.value  # `torch.tensor(x.data.clone())`: one copy is the point, not a clone of the clone
    elif call_method_name(arg) == "detach" and not arg.args and call_method_name(arg.func.value) == "clone" and not arg.func.value.args:
        arg = arg.func.value.func.value  # `torch.tensor(x.clone().detach())`: `x.detach().clone()`, not a third copy
    ends_detached = call_method_name(arg) == "detach" and not arg.args
    detached = arg if ends_detached else chain(arg, "detach")  # `torch.tensor(theta.detach())`: detached once is enough
    if event.method == "new_tensor" and conversion and "device" not in keywords:
        return None
    if event.method == "new_tensor" and not conversion:
        # new_tensor gives the result the receiver's dtype and device.
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        if not isinstance(receiver, (cst.Name, cst.Attribute)):
            return None
        conversion = [cst.Arg(receiver)]
    if conversion:
        copy = method(detached, "to", clean_args([*conversion, kwarg("copy", cst.Name("True"))]))
    else:
        copy = method(detached, "clone")
    requires = keywords.get("requires_grad")
    if requires is not None and not is_name(requires.value, "False"):
        copy = method(copy, "requires_grad_", [cst.Arg(requires.value)])
    return call, copy
