"""RC151 state-dict-snapshot."""

from __future__ import annotations

import re
from collections.abc import Iterator

from review_copies.analysis.events import Bind, FunctionFlow, Write
from review_copies.analysis.guesses import SNAPSHOT_NAME
from review_copies.analysis.syntax import short_code
from review_copies.analysis.values import Kind
from review_copies.model.findings import Category, Severity
from review_copies.rules.base import Hit, Invalid, Rule, Valid
from review_copies.rules.stale_snapshot.helpers import (
    an_iterator,
    beside_a_written_handle,
    changes_after,
    deepcopy_fix,
    entry_replaced,
    handed_to_a_fresh_owner,
    never_read_again,
    owner_of,
    read_after,
    rebound_to_copies,
    remedy,
    replaced_in_this_call,
    replaced_on_first_pass,
    state_dict_refs,
    written_name,
    written_through_elsewhere,
    written_through_entries,
)

_VALID = (
    Valid(
        """
        import torch
        def run(net, optimizer, loader, runs: int, resume: str):
            for _ in range(runs):
                if resume:
                    state_dict = net.state_dict()
                    for k, v in torch.load(resume).items():
                        if k in state_dict:
                            state_dict[k] = v
                    net.load_state_dict(state_dict)
                for x in loader:
                    net(x).sum().backward()
                    optimizer.step()
        """,
        "each run reads `state_dict` only after taking it anew, in a loop of its own the training is not in (a hyperspectral model zoo's resume)",
    ),
    Valid(
        """
        import copy
        import torch
        def federate(global_model, nets, rounds, freqs, local_train):
            for round in range(rounds):
                global_model.eval()
                global_w = global_model.state_dict()
                for net in nets:
                    net.load_state_dict(global_w)
                local_train(nets, global_model=global_model)
                for net_id, net in enumerate(nets):
                    net_para = net.state_dict()
                    if net_id == 0:
                        for key in net_para:
                            global_w[key] = net_para[key] * freqs[net_id]
                    else:
                        for key in net_para:
                            global_w[key] += net_para[key] * freqs[net_id]
                global_model.load_state_dict(global_w)
            return copy.deepcopy(global_model)
        """,
        "FedAvg's first pass sets every entry of `global_w` anew before any pass reads one: the sums never see the tensors the state dict referenced (MOON)",
    ),
    Valid(
        """
        import torch
        class Ema:
            def __init__(self, source, target, decay=0.9999):
                self.decay = decay
                self.source_dict = source.state_dict()
                self.target_dict = target.state_dict()
                with torch.no_grad():
                    for key in self.source_dict:
                        self.target_dict[key].data.copy_(self.source_dict[key].data)
            def update(self):
                with torch.no_grad():
                    for key in self.source_dict:
                        self.target_dict[key].data.copy_(self.target_dict[key].data * self.decay + self.source_dict[key].data * (1 - self.decay))
        """,
        "kept beside `target_dict`, which `update` writes through: live handles, read for the current weights (BigGAN-PyTorch's `ema`)",
    ),
    Valid(
        """
        import torch
        class Ema:
            def __init__(self, source, target):
                self.source, self.target = source, target
                self.source_dict = source.state_dict()
        """,
        "kept, and read by no code in the repository: nothing can see its values change (StudioGAN's `Ema`)",
    ),
    Valid(
        """
        import torch
        def average_checkpoints(load, paths):
            first = load(paths[0])
            merged = first.state_dict()
            del first
            for i, path in enumerate(paths[1:], start=2):
                other = load(path).state_dict()
                for key in merged.keys():
                    target = merged[key]
                    target.mul_((i - 1) / i).add_(other[key], alpha=1.0 / i)
            return merged
        """,
        "the first checkpoint's tensors are the running average, updated through the dict's own entries",
    ),
    Valid(
        """
        import torch
        def train(model, loader, epochs: int, path: str):
            optimizer = torch.optim.Adam(model.parameters())
            lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
                weights = model.state_dict()
                torch.save({"model": weights, "epoch": epoch}, path)
                lr_scheduler.step()
        """,
        "a learning-rate scheduler's `step()` changes the optimizer's rates, not the weights saved just before",
    ),
    Valid(
        """
        import torch
        def finetune(model, optimizer, paths, batches):
            for path in paths:
                if path.endswith(".pt"):
                    own = model.state_dict()
                    own.update(torch.load(path))
                    model.load_state_dict(own)
                model(batches).sum().backward()
                optimizer.step()
        """,
        "`own` is taken anew just before each read, in its arm: the next checkpoint's merge sees the new one, not the stepped one",
    ),
    Valid(
        """
        import copy
        import torch
        class EMA:
            def __init__(self, model, device=torch.device("cpu")):
                self.model = model
                if hasattr(model, "get_ema_model"):
                    self.ema_model = copy.deepcopy(model.get_ema_model())
                    self.cur_state_dict = model.get_ema_model().state_dict()
                else:
                    self.ema_model = copy.deepcopy(model)
                    self.cur_state_dict = model.state_dict()
                self.cur_state_dict = {k: v.clone().to(device) for k, v in self.cur_state_dict.items()}
        """,
        "the references are replaced by clones of them in the same call: the copies are what the object keeps",
    ),
    Valid(
        """
        import torch
        from torch import nn
        def ema_warmup(ema_net: nn.Module, net: nn.Module):
            states_ema = ema_net.state_dict()
            for k, v in net.state_dict().items():
                states_ema[k].data.copy_(v.data)
            ema_net.load_state_dict(states_ema)
        """,
        "the EMA writes through the dict itself: its references to the live tensors are the point",
    ),
    Valid(
        """
        import torch
        from torch import nn
        class Quantizer:
            def __init__(self, model: nn.Module):
                self.new_state_dict = model.state_dict()
            def quantized(self, fqn: str, q: torch.Tensor):
                self.new_state_dict.pop(fqn + ".weight")
                self.new_state_dict[fqn + ".qweight"] = q
        """,
        "the object edits the dict it keeps (GPTQ builds the quantized state dict on the model's): a working dict, not a snapshot",
    ),
    Valid(
        """
        from torch.utils.data import DataLoader
        class PreparedLoader:
            def __init__(self, dataset, batch_sampler):
                self.base_dataloader = DataLoader(dataset, batch_sampler=batch_sampler)
                if hasattr(self.base_dataloader, "state_dict"):
                    self.dl_state_dict = self.base_dataloader.state_dict()
        """,
        "a data loader's state dict says where the data stands: no tensor of a model is in it",
    ),
    Valid(
        """
        import torch
        def sparsify(m: torch.nn.Linear, m2: torch.nn.Linear):
            state_dict = m.state_dict()
            state_dict["weight"] = (state_dict["weight"].abs() > 0.5).float()
            m.load_state_dict(state_dict)
            m2.load_state_dict(state_dict)
        """,
        "loading the dict into the module it came from copies each live tensor onto itself: nothing in it changes",
    ),
    Valid(
        """
        import torch
        from torch import nn
        def weight_of(name: str, state, module: nn.Module, grad: bool = False):
            return module.get_parameter(name).grad if grad else state[name]
        def convert(src: nn.Module, dst: nn.Module):
            ref_state = src.state_dict()
            for name, p in dst.named_parameters():
                w = weight_of(name=name, state=ref_state, module=src)
                with torch.no_grad():
                    p.copy_(w)
        """,
        "the helper only looks into the state dict (the repository index says so): nothing changes it",
    ),
    Valid(
        """
        import copy
        import torch
        def fit(model, loader, optimizer, epochs: int):
            best, best_state = float("inf"), None
            for _ in range(epochs):
                for x, y in loader:
                    loss = (model(x) - y).pow(2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                if loss.item() < best:
                    best, best_state = loss.item(), copy.deepcopy(model.state_dict())
            return best_state
        """
    ),
    Valid(
        """
        import torch
        def save(model, path: str):
            torch.save(model.state_dict(), path)
        """,
        "used at once",
    ),
    Valid(
        """
        import torch
        def load_pretrained(model, other):
            sd = model.state_dict()
            with torch.no_grad():
                for k, v in other.items():
                    sd[k].copy_(v)
            return model
        """,
        "writing into the live weights through the state_dict is the point",
    ),
    Valid(
        """
        from copy import copy
        import torch
        class Scheduler:
            def state_dict(self):
                destination = {}
                for name in self._state_attrs:
                    val = getattr(self, name)
                    if hasattr(val, "state_dict"):
                        val = val.state_dict()
                    destination[name] = copy(val)
                return destination
        """,
        "`hasattr` only looks at the object: nothing changes the state_dict before it is stored",
    ),
    Valid(
        """
        import torch
        def load_metrics(state, metrics):
            for name, value in state.items():
                if name == "algorithms" and isinstance(value, list):
                    value = dict(value)
                for metric_name in metrics:
                    saved = value[metric_name].state_dict()
                    metrics[metric_name].load_state_dict(saved)
        """,
        "`dict(value)` builds a new dict from its argument and changes nothing",
    ),
    Valid(
        """
        import torch
        def test_resumes(dataset):
            next(dataset)
            checkpoint = dataset.state_dict()
            expected = [next(dataset), next(dataset)]
            dataset.load_state_dict(checkpoint)
            assert [next(dataset), next(dataset)] == expected
        """,
        "`next(dataset)`: an iterator's state_dict is its position, not a module's live tensors",
    ),
    Valid(
        """
        import copy
        import torch
        from torch import nn
        class AveragedModel(nn.Module):
            def __init__(self, model: nn.Module):
                super().__init__()
                self.module = copy.deepcopy(model)
                self.avg_parameters = self.module.state_dict()
            def update_parameters(self, model: nn.Module):
                for k, p_avg in self.avg_parameters.items():
                    p_avg.data.copy_(model.state_dict()[k].data)
        """,
        "a handle on the live tensors kept so that another method writes the averages through it",
    ),
    Valid(
        """
        import torch
        class Fish:
            def __init__(self, network):
                self.network = network
                self.optimizer_inner_state = None

            def create_clone(self):
                self.network_inner = type(self.network)()
                self.optimizer_inner = torch.optim.Adam(self.network_inner.parameters())
                if self.optimizer_inner_state is not None:
                    self.optimizer_inner.load_state_dict(self.optimizer_inner_state)

            def update(self, batches):
                self.create_clone()
                for x, y in batches:
                    loss = torch.nn.functional.cross_entropy(self.network_inner(x), y)
                    self.optimizer_inner.zero_grad()
                    loss.backward()
                    self.optimizer_inner.step()
                self.optimizer_inner_state = self.optimizer_inner.state_dict()
        """,
        "the state is only ever loaded into the inner optimizer built anew: the optimizer it came from never steps again",
    ),
    Valid(
        """
        import torch
        class ConversionTests:
            def test_roundtrip(self):
                model_hf = self.get_reference_model()
                original_state_dict = model_hf.state_dict()
                hf_to_te_fn = self.get_hf_to_te_converter()
                te_to_hf_fn = self.get_te_to_hf_converter()
                model_te = hf_to_te_fn(model_hf)
                converted_state_dict = te_to_hf_fn(model_te).state_dict()
                for key in original_state_dict:
                    torch.testing.assert_close(original_state_dict[key], converted_state_dict[key])
        """,
        "a converter builds the converted model and returns it (bionemo's roundtrip tests): nothing changes the original's tensors",
    ),
    Valid(
        """
        import torch
        class PolicyWorker:
            def prepare_weights_for_ipc(self):
                self._held_state_dict_reference = self.model.state_dict()
                return [(name, t.numel() * t.element_size()) for name, t in self._held_state_dict_reference.items()]

            def ipc_handles(self, keys):
                return {k: self._held_state_dict_reference[k].to(torch.bfloat16) for k in keys}

            def train(self, batch):
                self.model(batch).sum().backward()
                self.optimizer.step()
        """,
        "the attribute is named a reference: it keeps the live weights on purpose, to stream the current ones (NeMo-RL)",
    ),
    Valid(
        """
        import torch
        def train(model, loader, optimizer, rank: int, world: int):
            ema = model.state_dict()
            ema = type(ema)([(k, ema[k].data.clone()) for k in list(ema.keys())[rank::world]])
            for x in loader:
                model(x).sum().backward()
                optimizer.step()
                for k, v in ema.items():
                    v.copy_(0.999 * v + 0.001 * model.state_dict()[k])
            return ema
        """,
        "the name is bound again at once to clones of the entries (VGen's EMA): what training later reads is the copy",
    ),
    Valid(
        """
        import math
        import torch
        from torch import nn
        class InstantLoRA(nn.Module):
            def __init__(self, lora_modules: list):
                super().__init__()
                self.weight_mapping, self.mids = [], []
                for idx, lora_module in enumerate(lora_modules):
                    module_dict = lora_module.state_dict()
                    down_shape = list(module_dict["lora_down.weight"].shape)
                    up_shape = list(module_dict["lora_up.weight"].shape)
                    self.weight_mapping.append([idx, math.prod(down_shape) + math.prod(up_shape)])
                    self.mids.append(InstantLoRAMidModule(idx, lora_module, self, up_shape=up_shape))
        """,
        "taken again at the top of every iteration: the next read sees the next module's dict (ai-toolkit)",
    ),
)


class StateDictSnapshot(Rule):
    """
    ## What it does
    Finds `best = model.state_dict()` (or `optimizer.state_dict()`, or a shallow
    `.copy()` / `dict(...)` of one) kept as a snapshot while training goes on changing the
    model.

    ## Why is this bad?
    `state_dict()` returns references to the live parameter and buffer tensors, not
    copies. Every later optimizer step changes the "snapshot" too, so the best model you
    restore or save at the end is just the last one (torch 2.13: after 3 SGD steps the
    snapshot equals the current weights). A shallow `.copy()` copies the dict, not the
    tensors.

    ## Example
    ```python
    for epoch in range(epochs):
        train_one_epoch(model, optimizer)
        if val_loss(model) < best_loss:
            best_state = model.state_dict()
    model.load_state_dict(best_state)
    ```

    ## Use instead
    ```python
            best_state = copy.deepcopy(model.state_dict())
    ```
    or `{k: v.detach().clone() for k, v in model.state_dict().items()}`.

    ## Fix safety
    Safe: the deep copy holds the values at that moment; the message says when
    `import copy` must be added.

    ## Known problems
    An unknown function named for a conversion (`hf_to_te_fn(model)`, `convert_*`,
    `export_*`) whose result is kept is taken to build a new model and leave the original
    alone; an attribute named `..._reference` is taken to keep the live tensors on purpose.
    """

    code = "RC151"
    name = "state-dict-snapshot"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("state_dict",)
    recipes = ("snapshot",)

    VALID = _VALID

    INVALID = (
        Invalid(
            """
            import torch
            def fit(model, loader, optimizer, epochs: int):
                best, best_state = float("inf"), None
                for _ in range(epochs):
                    for x, y in loader:
                        loss = (model(x) - y).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    if loss.item() < best:
                        best = loss.item()
                        best_state = model.state_dict()
                return best_state
            """,
            line=12,
            fix="""
            import torch
            def fit(model, loader, optimizer, epochs: int):
                best, best_state = float("inf"), None
                for _ in range(epochs):
                    for x, y in loader:
                        loss = (model(x) - y).pow(2).mean()
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    if loss.item() < best:
                        best = loss.item()
                        best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                return best_state
            """,
            note="no `import copy` in the file: the fix copies the tensors itself",
        ),
        Invalid(
            """
            import copy
            import torch
            from torch import nn
            def finetune(model: nn.Module, batches):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                initial = model.state_dict().copy()
                for x, y in batches:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return initial
            """,
            line=6,
            fix="""
            import copy
            import torch
            from torch import nn
            def finetune(model: nn.Module, batches):
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                initial = copy.deepcopy(model.state_dict())
                for x, y in batches:
                    (model(x) - y).pow(2).mean().backward()
                    opt.step()
                return initial
            """,
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        yield from _snapshots(flow)


def _snapshots(flow: FunctionFlow) -> Iterator[Hit]:
    for bind in flow.of(Bind):
        value = bind.value
        if bind.expr is None or not state_dict_refs(value):
            continue
        how = (
            "a shallow copy of a state_dict, whose tensors are still the live ones"
            if value.via == "shallow-copy" or value.kind is Kind.DICT
            else "`state_dict()` returns references to the live tensors, not copies"
        )
        if bind.name.startswith("self."):
            if _REFERENCE_NAME.search(bind.name):
                continue  # `self._held_state_dict_reference`: the name says it keeps the live tensors, not their values
            if written_through_elsewhere(flow, bind.name) or never_read_again(flow, bind.name):
                continue  # a handle on the live tensors another method writes through on purpose, or kept and never read
            if beside_a_written_handle(flow, bind):
                continue  # kept with a handle the class writes through: read for the current values (an EMA)
            if replaced_in_this_call(flow, bind):
                continue  # `self.sd = m.state_dict()` then `self.sd = {k: v.clone() ...}`: the copy is what is kept
            if handed_to_a_fresh_owner(flow, bind):
                continue  # loaded only into the owner built anew: the tensors it references are handed over
            # Kept on the object: training between calls changes it under the snapshot.
            message = (
                f"`{bind.name} = {short_code(bind.expr)}` is not a snapshot: {how}. It is kept on the object while the model "
                f"(or optimizer) goes on changing, so whatever later reads `{bind.name}` gets the current values. {remedy(flow)}."
            )
            yield Hit(bind.node, message, deepcopy_fix(flow, bind.expr) if value.kind is not Kind.DICT else None)
            continue
        owner = owner_of(bind.expr)
        if owner and an_iterator(flow, owner):
            continue
        roots = value.element.roots if value.element is not None and value.element.roots else value.roots
        change = changes_after(flow, bind, roots, owner)
        if change is None or (isinstance(change, Write) and written_name(change.target_node) == bind.name) or written_through_entries(flow, bind.name, change):
            continue  # `states[k].data.copy_(v)`: written through the dict itself, the references are the point
        read = read_after(flow, bind.name, change, roots, bind)
        if read is None or not (bind.loops or SNAPSHOT_NAME.search(bind.name) or isinstance(change, Write)) or entry_replaced(flow, bind.name, change, read):
            continue
        if replaced_on_first_pass(flow, bind.name, read):
            continue  # FedAvg's first pass sets every entry anew: the read sees the sums
        if rebound_to_copies(flow, bind, read):
            continue  # `ema = m.state_dict()`, then `ema = type(ema)((k, ema[k].clone()) ...)`: the read sees the copies
        message = (
            f"`{bind.name} = {short_code(bind.expr)}` is not a snapshot: {how}. `{short_code(change.node)}` at line {change.line} "
            f"changes them, so `{bind.name}` read at line {read.line} holds the new values. {remedy(flow)}."
        )
        fix = deepcopy_fix(flow, bind.expr) if value.kind is not Kind.DICT else None
        yield Hit(bind.node, message, fix, anchors=(read.node,))


# An attribute named a reference to what it holds (NeMo-RL's `_held_sharded_state_dict_reference`,
# kept to stream the current weights to an inference engine): the author says it is not a copy.
_REFERENCE_NAME = re.compile(r"_references?$")
