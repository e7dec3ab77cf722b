"""From a parameter's name or annotation to the kind of value to try first: `loader` for
`train_loader`, `model` for `net`, `int` for `hidden_size`. The probe process's own table
(the static analysis's guesses are in `analysis.guesses`; this process imports none of it)."""

from __future__ import annotations

import inspect
import re
from typing import Any

_NAME_KINDS: tuple[tuple[str, str], ...] = (
    (r"^(self|cls)$", "self"),
    (r"^(model|net|network|module|encoder|decoder|layer|backbone|policy|critic|actor|teacher|student|generator_net|discriminator|G|D)s?$|_(model|net)$|^(model|net)_", "model"),
    (r"^(opt|optim|optimizer|optimiser)$|_(opt|optim|optimizer)$|^(opt|optim|optimizer)_", "optimizer"),
    (r"^(sched|scheduler|lr_scheduler)$", "scheduler"),
    (r"loader$|_batches$|^(batches|dataset|data_iter|iterator|train_data|val_data|data|dl|episodes|observations|trajectories|samples)$|_dl$|_iter$", "loader"),
    (r"^(batch|sample|example|minibatch)$|_batch$", "batch"),
    (r"^(loss_fn|criterion|loss_func|objective|loss_function|compute_loss)$", "criterion"),
    (r"^(loss|losses_t|objective_value|train_loss)$", "loss"),
    (r"^(history|losses|log|logs|records|outputs_list|metrics_list|cache|all_losses|results|preds_list|saved|snapshots)$", "list"),
    (r"^(stats|metrics|meters|state|store|registry|logs_dict|summary|config|cfg)$", "dict"),
    (r"^(mask|masks|attention_mask|keep|valid)$|_mask$", "mask"),
    (r"^(ids|input_ids|token_ids|tokens|src|tgt|text_ids|seq_ids)$", "tokens"),
    (r"^(index|indices|idx|perm|order)$|_idx$|_ids$", "index"),
    (r"^(i|j|pos|position|step_idx|slot|epoch|step|global_step|iteration|it|batch_idx|rank|seed)$|_id$", "position"),
    (r"^(y|target|targets|label|labels|gt|truth)$|^y_", "target"),
    (r"^(arr|array|ndarray|np_\w+|\w+_np|buffer_np)$", "ndarray"),
    (r"^(device|dev)$", "device"),
    (r"^dtype$", "dtype"),
    (r"^(params|parameters|weights_list|tensors|xs|inputs_list)$", "tensor_list"),
    (r"^(lr|learning_rate|alpha|beta|scale|factor|temperature|tau|gamma|weight_decay|decay|threshold|thr|thresh|clip|max_norm|p|rate|margin)$", "float"),
    (r"^(lam|lambda_|gain|ratio|dropout|sigma|noise|smoothing|coef|eps_\w+|\w+_weight|\w+_coef)$", "float"),
    (r"^(metric|score|reward|acc|accuracy|value|val_metric|val_score|current)$", "number"),
    (r"^(eps|epsilon|tol)$", "eps"),
    (r"^(momentum)$", "momentum"),
    (r"^(dim|axis)$", "dim"),
    (r"^(heads|num_heads|n_heads|nhead)$", "heads"),
    (r"^(epochs|num_epochs|steps|num_steps|iters|iterations|n_iter|n_steps|repeats|times|n_frames|num_frames|depth|layers|n_layers|num_layers)$", "count"),
    (r"^(shape|size_tuple|\w+_shape|shape_\w+)$", "shape"),
    (r"^(n|k|num|size|batch_size|hidden|hidden_size|in_features|out_features|channels|width|features|out|vocab|fan_in|fan_out|num_\w+|n_\w+|\w+_size|\w+_dim|dim_\w+|d_model)$", "int"),
    (r"^(training|train|is_training)$", "true"),
    (r"^(inplace|verbose|debug|flag|normalize|detach|copy)$", "false"),
    (r"^(reduction)$", "reduction"),
    (r"^(dir|directory|out_dir|folder|root|output_dir|save_dir|log_dir|ckpt_dir|checkpoint_dir|\w+_dir)$", "dir"),
    (r"^(path|file|filename|fname|checkpoint|ckpt|out_path|save_path|\w+_path|\w+_file)$", "path"),
    (r"^(name|key|mode|prefix|tag|split|phase)$", "string"),
    (r"^(reader|fn|func|f|callback|hook|transform|closure|producer|sampler|get_batch|next_batch|source)$", "callable"),
    (r"^(w|weight|weights|param|theta|bias|b)$", "param"),
)

_ANNOTATION_KINDS: tuple[tuple[str, str], ...] = (
    (r"Optimizer", "optimizer"),
    (r"DataLoader|Iterable\[|Iterator\[", "loader"),
    (r"(^|\.)Module\b|Sequential|Linear", "model"),
    (r"ndarray", "ndarray"),
    (r"list\[.*Tensor|List\[.*Tensor|Sequence\[.*Tensor", "tensor_list"),
    (r"Tensor", "tensor"),
    (r"^(int)$", "int"),
    (r"^(float)$", "float"),
    (r"^(bool)$", "false"),
    (r"^(str)$", "string"),
    (r"Path|PathLike", "path"),
    (r"device", "device"),
    (r"dtype", "dtype"),
    (r"^(list|List)", "list"),
    (r"^(dict|Dict)", "dict"),
    (r"Callable", "callable"),
)

# Compiled at import, in the warm worker, not again in every probe.
_NAME_PATTERNS = tuple((re.compile(p), k) for p, k in _NAME_KINDS)
_ANNOTATION_PATTERNS = tuple((re.compile(p), k) for p, k in _ANNOTATION_KINDS)
_OPTIONAL = re.compile(r"\s*\|\s*None|Optional\[(.*)\]")
SIZE_NAME = re.compile(
    r"^(dim|d|hidden|hidden_size|hidden_dim|size|in_features|out_features|features|channels|width|vocab|vocab_size|classes|n_classes|num_classes"
    r"|fan_in|fan_out|out|embed_dim|d_model|\w+_dim|dim_\w+|\w+_size|num_features|in_channels|out_channels|n_embd|n_experts|num_experts|num_labels|n_labels)$"
)


def annotation_text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) or repr(annotation)
    return _OPTIONAL.sub(r"\1", str(text))


def kind_of(name: str, annotation: Any) -> str:
    text = annotation_text(annotation)
    if text:
        for pattern, kind in _ANNOTATION_PATTERNS:
            if pattern.search(text):
                if kind == "tensor":
                    break  # the name says more about which tensor
                return kind
    return name_kind(name)


def name_kind(name: str) -> str:
    for pattern, kind in _NAME_PATTERNS:
        if pattern.search(name):
            return kind
    return "tensor"


