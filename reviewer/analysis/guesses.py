"""Every guess the analysis makes from how code is spelled, in one place.

Where the dataflow cannot know what a value is (an argument with no annotation, a function
whose purpose only its name states), these word lists and patterns decide. Each says which
rules rely on it, so that a rule's "Known problems" can name the guesses it trusts.
Everything else in the analysis follows what the code does, not what it is called.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from review_copies.analysis.semantics import api
from review_copies.analysis.values import Kind

# ---------------------------------------------------------------- parameters
# The interpreter (analysis.parameters): what an unannotated parameter holds.

# Numbers, not tensors: `lr`, `eps`, `total += loss.item()` (every rule through the dataflow).
SCALAR_NAME = re.compile(r"^(lr|eps|alpha|beta|gamma|momentum|scale|factor|weight_decay|decay|temperature|tau|total|count|n|k|step|steps|epoch|i|j|t)$")
# Counts and sizes, numbers in every codebase (`in_channels`, `hidden_size`, `num_heads`):
# `in_channels += base_chn` rebinds a number (RC112 leaves such a parameter alone when
# nothing else says what it holds).
COUNT_NAME = re.compile(r"^(num|n)_[a-z]\w*$|^\w*_(channels|chans|chn|dim|size)$|^(in|out|hidden)_features$|^(channels|dim|width|height)$")
# Names that are called like modules in training code (`model(x)`, `net(x)`, `D(fake)`).
MODEL_NAME = re.compile(r"^(model|net|network|module|encoder|decoder|backbone|critic|generator|discriminator|policy|actor|G|D|teacher|student|classifier)(_\w+)?$|(_model|_net)$")
OPTIMIZER_NAME = re.compile(r"(^|_)(opt|optim|optimizer|optimiser)(_|\d|$)", re.I)


@dataclass
class UsageEvidence:
    """How each name of a function is used: its methods, attributes, whether it is called."""

    methods: dict[str, set[str]] = field(default_factory=dict)
    attributes: dict[str, set[str]] = field(default_factory=dict)
    backward: set[str] = field(default_factory=set)
    called: set[str] = field(default_factory=set)
    # Names used the way only tensors are: `x.sum(dim=1)`, `x.amax(keepdim=True)`, `x.size(-1)`.
    torch_style: set[str] = field(default_factory=set)
    # Names handed to `torch.from_numpy(...)`, which takes nothing but a NumPy array.
    arrays: set[str] = field(default_factory=set)
    # What a docstring's argument list says a name is (`model (nn.Module): ...`).
    documented: dict[str, Kind] = field(default_factory=dict)

    def kind_of(self, name: str) -> Kind:
        if name in self.documented:
            return self.documented[name]
        methods = self.methods.get(name, set())
        attrs = self.attributes.get(name, set())
        if methods & api.SPARSE_MATRIX_METHODS:
            return Kind.OTHER  # `sparse_mx.tocoo()`: a SciPy matrix, whose `.data` is an ndarray
        if methods & (api.MODULE_ONLY_METHODS - {"state_dict", "load_state_dict"}):
            return Kind.MODULE
        if name in self.called and methods & {"state_dict", "load_state_dict", "to", "cuda", "zero_grad"}:
            return Kind.MODULE
        if "step" in methods and ("zero_grad" in methods or "param_groups" in attrs or OPTIMIZER_NAME.search(name)):
            return Kind.OPTIMIZER
        if self.used_as_tensor(name):
            return Kind.TENSOR
        if name in self.arrays:
            return Kind.NDARRAY
        if name in self.called and MODEL_NAME.search(name) and not methods & {"append", "items", "keys", "get"}:
            return Kind.MODULE
        return Kind.UNKNOWN

    def used_as_tensor(self, name: str, ignoring: frozenset[str] = frozenset()) -> bool:
        """Used as only a tensor is: a tensor-only method, attribute (besides `ignoring`) or
        keyword (`x.numpy()`, `x.grad_fn`, `x.sum(dim=1)`). `accelerator.backward(loss)`
        beside `accelerator.wait_for_everyone()`: an object with a method of torch.Tensor's
        name and methods a tensor does not have is no tensor."""
        methods = self.methods.get(name, set())
        attrs = self.attributes.get(name, set()) - ignoring
        tensor_like = methods & api.TENSOR_ONLY_METHODS or attrs & api.TENSOR_ONLY_ATTRIBUTES - {"dtype"} or name in self.torch_style
        return bool(tensor_like) and not methods - _tensor_methods()


@functools.cache
def _tensor_methods() -> frozenset[str]:
    return api.tensor_methods()


_METHOD_CALL = re.compile(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\s*\(")
_ATTRIBUTE = re.compile(r"\b([A-Za-z_]\w*)\.([A-Za-z_]\w*)\b(?!\s*\()")
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
COMMENT = re.compile(r"#[^\n]*")
_ASSIGNED = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)", re.M)
# `x, k = torch.tensor(x), min(len(x), k)`: a tuple target rebinds each of its names.
_ASSIGNED_TUPLE = re.compile(r"^[ \t]*\(?[ \t]*((?:[A-Za-z_]\w*[ \t]*,[ \t]*)+[A-Za-z_]\w*)[ \t]*,?[ \t]*\)?[ \t]*=(?!=)", re.M)
_TORCH_KWARGS = re.compile(r"\b(dim|keepdim)\s*=")
_KEYWORDS = frozenset("def class if elif while for return with and or not in is lambda yield assert print super".split())


def usage_evidence(source: str, parameters: frozenset[str] = frozenset()) -> UsageEvidence:
    """What each name is used as, read off the function's text with regular expressions (a
    libcst visitor per function costs as much as the rest of the analysis). For the names in
    `parameters`, only uses up to the end of the statement that first rebinds them count:
    after `obs = torch.FloatTensor(obs)`, `obs.unsqueeze(0)` says what the new value is, not
    what the caller passed."""
    text = COMMENT.sub("", _TRIPLE_QUOTED.sub(_blank_lines, source))
    cut = _rebound_at(text, parameters) if parameters else {}
    # A docstring's word yields to the code's own test of what a name holds (`isinstance(
    # feats[i], np.ndarray)` under `feats (torch.Tensor): ...`).
    documented = {name: kind for name, kind in _documented(source).items() if not re.search(rf"isinstance\(\s*{name}\b", text)}
    evidence = UsageEvidence(documented=documented)
    called_on: dict[str, set[str]] = {}
    for match in _METHOD_CALL.finditer(text):
        name, method = match.group(1), match.group(2)
        called_on.setdefault(name, set()).add(method)
        if method == "backward":
            evidence.backward.add(name)  # backpropagated under that name, whatever it holds then
        if match.start() > cut.get(name, len(text)):
            continue
        evidence.methods.setdefault(name, set()).add(method)
        args = _call_arguments(text, match.end())
        if _TORCH_KWARGS.search(args) or (method == "size" and args.strip()) or method in ("dim", "numel"):
            evidence.torch_style.add(name)
    # `accelerator.backward(loss)` (Accelerate, Fabric, a DeepSpeed engine): the object that
    # also has `wait_for_everyone()` or `step()` backpropagates what it is handed, not itself.
    evidence.backward = {name for name in evidence.backward if not called_on[name] - _tensor_methods()}
    for match in _ATTRIBUTE.finditer(text):
        if match.start() > cut.get(match.group(1), len(text)):
            continue
        evidence.attributes.setdefault(match.group(1), set()).add(match.group(2))
    for match in _CALLED.finditer(text):
        if match.group(1) not in _KEYWORDS:
            evidence.called.add(match.group(1))
    for match in _FROM_NUMPY.finditer(text):
        if match.start() <= cut.get(match.group(1), len(text)):
            evidence.arrays.add(match.group(1))
    return evidence


# Docstrings are prose: "im_gpu (tensor): the image" is not a call of `im_gpu`. Stripped
# before comments, whose `#` is often inside one ("# of boxes"); the lines are kept.
_TRIPLE_QUOTED = re.compile(r"(\"\"\"|''')[\s\S]*?\1")


def _blank_lines(match: re.Match[str]) -> str:
    return "\n" * match.group(0).count("\n")


# A Google-style argument line, `name (type): what it is`, and the types it can name.
_DOC_ARGUMENT = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]*\(([^()\n]*)\)[ \t]*:", re.M)
_DOC_OPTIONAL = re.compile(r"(,\s*optional|\s+or\s+None|\s*\|\s*None|Optional\[|\])", re.I)
_DOC_KINDS = (
    (re.compile(r"^(torch\.)?(nn\.)?Module$"), Kind.MODULE),
    (re.compile(r"^(torch\.)?(optim\.)?Optimizer$"), Kind.OPTIMIZER),
    (re.compile(r"^(np|numpy)\.(nd)?array$"), Kind.NDARRAY),
    (re.compile(r"^((torch\.)?(Float|Long|Bool|Int|Byte|Half|Double|cuda\.Float)?Tensor|tensor)$"), Kind.TENSOR),
)


def _documented(source: str) -> dict[str, Kind]:
    """The kinds a docstring's argument list states outright (`im_gpu (tensor): ...`,
    `model (nn.Module): ...`); a type it cannot read says nothing."""
    found: dict[str, Kind] = {}
    for block in _TRIPLE_QUOTED.finditer(source):
        for match in _DOC_ARGUMENT.finditer(block.group(0)):
            spelled = _DOC_OPTIONAL.sub("", match.group(2)).strip()
            kind = next((k for pattern, k in _DOC_KINDS if pattern.match(spelled)), None)
            if kind is not None:
                found.setdefault(match.group(1), kind)
    return found


_FROM_NUMPY = re.compile(r"\bfrom_numpy\(\s*([A-Za-z_]\w*)\s*\)")


_BACKWARD = re.compile(r"\b([A-Za-z_]\w*)\.backward\s*\(")


def backward_reaches(lines: Sequence[str], name: str, bound_at: int, until: int | None = None) -> bool:
    """Whether `name.backward(...)` is called on the value bound at line `bound_at` (1-based):
    at or after it and before the next statement that rebinds the name (`name = ...`, `for
    ... name ... in`). In `for out in expected: ...; out = model(x); out.backward()`, the
    loop's `out` is the test's data, not what backward runs on."""
    rebinding = re.compile(rf"^\s*(?:{re.escape(name)}\s*(?::[^=\n]*)?=(?!=)|for\b[^\n]*\b{re.escape(name)}\b[^\n]*\bin\b)")
    for number in range(bound_at, min(len(lines), until or len(lines)) + 1):
        text = lines[number - 1]
        if number > bound_at and rebinding.search(text):
            return False
        if any(m.group(1) == name for m in _BACKWARD.finditer(text)):
            return True
    return False


def _rebound_at(text: str, names: frozenset[str]) -> dict[str, int]:
    """Where the statement that first assigns each of `names` ends (`name = ...` at the start
    of a line; its value may run over several lines inside brackets)."""
    out: dict[str, int] = {}
    signature = text.find("(", text.find("def "))
    body = _statement_end(text, signature + 1) if signature >= 0 else 0  # `lr=0.1,` in a long signature is a default
    for match in _ASSIGNED.finditer(text, body):
        name = match.group(1)
        if name in names and name not in out:
            out[name] = _statement_end(text, match.end())
    for match in _ASSIGNED_TUPLE.finditer(text, body):
        end = _statement_end(text, match.end())
        for name in (n.strip() for n in match.group(1).split(",")):
            if name in names and end < out.get(name, len(text) + 1):
                out[name] = end
    return out


def _statement_end(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "\n" and depth <= 0:
            return i
    return len(text)


def _call_arguments(text: str, start: int, limit: int = 400) -> str:
    """The text inside the parentheses that open just before `start`."""
    depth = 1
    for i in range(start, min(len(text), start + limit)):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return text[start : start + limit]


# ------------------------------------------------------------------ intent
# analysis.queries.intent: functions whose job is to write into their arguments
# (RC102 inplace-on-argument, RC101-RC106 through `deliberate_write`).

# Parameters a function is expected to write into.
OUTPUT_PARAMETER_NAMES = frozenset(
    "out output outputs buf buffer buffers dst dest destination result results acc accumulator accum target_buffer cache state memory".split()
)
# Words in a parameter's name that say it is written into: outputs, buffers, caches, running state.
STATE_WORDS = ("out", "buf", "cache", "state", "mem", "past", "acc", "dst", "dest", "result", "target_", "scratch", "workspace", "storage", "running", "copy_to", "into")
# Functions whose job is to mutate their arguments.
MUTATING_FUNCTION_PREFIXES = tuple(
    "init _init reset _reset update _update apply fill zero clip clamp copy load set_ _set inplace mutate add_to accumulate".split()
)
# Functions whose name says they write into an argument: `foo_out`, `_out_impl`, `set_to_one`, `fill_x`.
WRITER_NAME = re.compile(r"(^|_)(out|set|fill|write|store|assign|copy|inplace|mutate|put)(_|$)", re.I)
# Decorators of op implementations (custom ops, library impls), which mutate as their schema says.
OP_REGISTRATION_WORDS = ("custom_op", "impl", "register", "library", "override", "implements")

# ------------------------------------------------------------------- loops
# analysis.queries.loops.training_loop (RC251 and RC252 through it): a loop over a data
# loader counts as a training or evaluation loop even without a backward in it.
# (`steps` and `epoch` as words of a name: `train_steps`, not `num_timesteps`.)
TRAINING_ITERABLE = re.compile(r"(loader|dataloader|batches|batch_iter|data_iter|dataset|(?<![a-z])epoch|(?<![a-z])steps)", re.I)

# A data pipeline's object (analysis.semantics.methods): its `state_dict()` is a position in
# the data (a sampler's index, a loader's worker state), not a module's tensors (RC151).
DATA_PIPELINE_NAME = re.compile(r"(loader|sampler|dataset|data_iter|iterator)$", re.I)
# A learning-rate scheduler: its state_dict() holds counters and lists of rates, no tensor.
SCHEDULER_NAME = re.compile(r"(scheduler|sched)$", re.I)

# A `forward` that also takes the labels transforms a data batch (MixUp, CutMix), not the
# activations of a layer before it (RC204 inplace-on-forward-input).
LABEL_PARAMETER = re.compile(r"^(labels?|targets?|y|y_true|gt|gt_labels)$")

# A name for token ids or indices (`input_ids`, `text_ids`, `idx`, `tokens`): integer
# already, so `.long()` of it changes nothing (RC342 leaves `ids.clone().long()`, where the
# clone is then the one copy). Labels are not among them: float soft labels are common.
INTEGER_NAME = re.compile(r"(^|_)(ids?|idx|idxs|indices|index|tokens?|perm|perms|permutation)$", re.I)

# --------------------------------------------------------------- snapshots
# A name that says its value is kept as a copy to compare with or restore later:
# RC151 state-dict-snapshot (when no later change is seen in a loop) and RC152
# parameters-snapshot fire only on such names.
SNAPSHOT_NAME = re.compile(r"(best|init|initial|orig|original|prev|previous|old|before|saved|snapshot|snap|backup|start|ref|reference|last|frozen|copy|ckpt|checkpoint|pre)", re.I)
# A module kept as a separate copy of another (RC156 module-alias-snapshot): `target = model`.
MODULE_COPY_NAME = re.compile(r"(target|ema|teacher|frozen|best|snapshot|shadow|backup|momentum_|average|averaged|swa)", re.I)

# ---------------------------------------------------------- redundant copies
# Arguments that hold a model's output (RC343 clone-then-detach: `out.clone().detach()` of
# such an argument may be attached, so the order matters).
OUTPUT_NAME = re.compile(r"(^|_)(out|output|outputs|logits|pred|preds|prediction|student|emb|embedding|features|hidden|activations?)(_|$)", re.I)
# A dense copy kept as a backup (RC347 densify-to-copy): `backup = sparse.to_dense()`.
BACKUP_NAME = re.compile(r"(backup|snapshot|saved|orig|original|copy|init|initial|before|prev)", re.I)

# ------------------------------------------------------------- sandbox inputs
# sandbox.verify.param_facts: what the reviewed file offers to build a subject's inputs
# from. (The probe process's own table, from a parameter's name to the kinds of value to
# try, is `sandbox/worker/inputs/names.py`: that process imports nothing of the analysis.)

# The file's own functions that make inputs: `make_batch(n)` for a parameter `batch`.
FACTORY_NAME = re.compile(r"^(make|build|create|get|sample|dummy|example|random|fake|synth\w*|load|new)_(\w+)$")
# A receiver whose called attributes are submodules the argument feeds (`model.encoder(x)`).
MODULE_RECEIVER_NAME = re.compile(r"^(model|net|network|module|encoder|decoder|backbone|policy|critic|actor|teacher|student|G|D)$|_(model|net)$|^(model|net)_")
# Base classes that make a class of the file a module, torch's or a framework's.
MODULE_BASE_NAME = re.compile(r"(^|\.)(Module|Sequential|ModuleList|ModuleDict|Linear|Conv\dd|Embedding|LightningModule|\w+Module)$")
