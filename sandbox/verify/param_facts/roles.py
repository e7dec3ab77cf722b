"""What each use of a parameter says about the value a caller passes: a tensor of some
rank, a size, an axis, class ids, a path, a module it feeds... Read by the input
synthesis in the probe process; nothing here runs the code."""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from review_copies.analysis.guesses import MODULE_RECEIVER_NAME
from review_copies.analysis.syntax import dotted, last
from review_copies.sandbox.verify.param_facts.table import FactTable

# Methods that give back the same value (for the facts: same shape, same keys), so that
# `x = batch["image"].float()` makes the uses of `x` facts about `batch["image"]`.
SAME_VALUE_METHODS = frozenset(
    "float double half bfloat16 long int bool to cuda cpu detach clone contiguous requires_grad_ type type_as".split()
)
CONVERSIONS = frozenset(("as_tensor", "tensor", "asarray", "array", "from_numpy", "Tensor", "FloatTensor", "LongTensor"))

_MODULE_METHODS = frozenset(
    "parameters named_parameters named_modules modules children named_children eval train get_parameter get_submodule "
    "buffers named_buffers apply register_buffer register_forward_hook register_forward_pre_hook register_full_backward_hook".split()
)
_OPTIMIZER_METHODS = frozenset(("step", "add_param_group"))
_OPTIMIZER_ATTRS = frozenset(("param_groups", "defaults"))
_DICT_METHODS = frozenset(("items", "keys", "get", "setdefault", "popitem"))
_SPARSE_METHODS = frozenset(("coalesce", "indices", "_indices", "_values", "to_dense", "is_coalesced", "sparse_dim", "dense_dim"))
_NDARRAY_METHODS = frozenset(("astype", "tobytes", "tofile", "ravel", "setflags"))
_NDARRAY_ATTRS = frozenset(("flags", "strides", "nbytes", "itemsize"))
_TENSOR_ATTRS = frozenset(("grad", "data", "T", "mT", "H", "grad_fn", "is_leaf", "requires_grad", "device", "dtype", "layout", "is_cuda"))

# Callables whose positional integer arguments are sizes (layers, factories).
_LAYERS = frozenset(
    "Linear Bilinear LazyLinear Embedding EmbeddingBag Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d "
    "LayerNorm BatchNorm1d BatchNorm2d BatchNorm3d InstanceNorm1d InstanceNorm2d GroupNorm LSTM GRU RNN LSTMCell GRUCell "
    "RNNCell MultiheadAttention TransformerEncoderLayer TransformerDecoderLayer Transformer RMSNorm PixelShuffle".split()
)
_FACTORIES = frozenset("empty zeros ones randn rand full eye".split())
_SIZE_METHODS = frozenset("view reshape expand repeat new_zeros new_ones new_empty new_full unflatten tile narrow".split())
_SIZE_KEYWORDS = frozenset(
    "in_features out_features num_embeddings embedding_dim hidden_size input_size embed_dim d_model dim_feedforward "
    "in_channels out_channels normalized_shape num_features minlength num_classes num_layers size".split()
)
_HEADS_KEYWORDS = frozenset(("num_heads", "nhead", "heads", "n_heads"))
_AXIS_KEYWORDS = frozenset(("dim", "axis", "start_dim", "end_dim"))
_LONG_TARGET = frozenset(("cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss", "multi_margin_loss"))
_PROB_TARGET = frozenset(("binary_cross_entropy", "BCELoss"))
_FLOAT_TARGET = frozenset(
    "mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy_with_logits kl_div MSELoss L1Loss SmoothL1Loss BCEWithLogitsLoss".split()
)
_LONG_ARG0 = frozenset(("bincount", "one_hot", "embedding"))
_PATH_ARG0 = frozenset(
    "open load loadtxt savetxt save savez savez_compressed exists isfile isdir basename dirname splitext getsize "
    "Path PurePath remove unlink imread imwrite save_image copy copyfile".split()
)
_DIR_ARG0 = frozenset(("join", "makedirs", "mkdir", "listdir", "scandir", "walk", "rmtree"))
_SPARSE_ARG0 = frozenset(("spmm", "sparse_mm"))


class Walker(Protocol):
    """What the role readers need of the walk: the facts, the path a node stands for, and
    a way into a same-file function the value is passed to."""

    facts: FactTable
    functions: dict[str, cst.FunctionDef]
    depth: int

    def path(self, node: cst.BaseExpression) -> str | None: ...

    def into(self, path: str, fn: cst.FunctionDef, pos: int | None, kw: str | None) -> None: ...


def int_value(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.evaluated_value)
    return None


def string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def use(walker: Walker, path: str, node: cst.BaseExpression, parents: tuple[cst.CSTNode, ...]) -> None:
    if not parents:
        return
    parent = parents[-1]
    if isinstance(parent, cst.BinaryOperation):
        # A bound of a slice, even inside arithmetic (`x[i:i + self.window]`), is an int.
        for outer in reversed(parents[:-1]):
            if isinstance(outer, cst.Slice):
                walker.facts.add(path, "roles", "index")
                break
            if not isinstance(outer, (cst.BinaryOperation, cst.UnaryOperation)):
                break
    grand = parents[-2] if len(parents) >= 2 else None
    add = walker.facts.add
    if isinstance(parent, cst.Attribute) and parent.value is node:
        if walker.path(parent) is not None:
            return  # `self.x` standing for a constructor parameter: its own use
        attr = parent.attr.value
        if isinstance(grand, cst.Call) and grand.func is parent:
            _method(walker, path, attr, grand, parents[:-2])
        else:
            _attribute(walker, path, attr, parents)
        return
    if isinstance(parent, cst.Subscript) and parent.value is node:
        if walker.path(parent) is not None:
            index = parent.slice[0].slice
            assert isinstance(index, cst.Index)
            if string_value(index.value) is not None:
                add(path, "keys", string_value(index.value))
                add(path, "roles", "dict")
            else:
                add(path, "items", (int_value(index.value) or 0) + 1)
                add(path, "roles", "indexed")
            return
        _tensor_index(walker, path, parent)
        return
    if isinstance(parent, (cst.Index, cst.SubscriptElement, cst.Slice)):
        add(path, "roles", "index")
        return
    if isinstance(parent, cst.Call) and parent.func is node:
        _called(walker, path, parent)
        return
    if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
        _argument(walker, path, parent, grand, parents[:-2])
        return
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
        comparison = parent if isinstance(parent, cst.Comparison) else grand
        if isinstance(comparison, cst.Comparison):
            _compared(walker, path, node, comparison, parents)
        return
    if isinstance(parent, cst.BinaryOperation):
        if isinstance(parent.operator, (cst.FloorDivide, cst.Modulo)):
            add(path, "roles", "number")
        other = parent.right if parent.left is node else parent.left
        if isinstance(parent.operator, cst.Divide) and isinstance(other, (cst.SimpleString, cst.FormattedString)) and parent.left is node:
            add(path, "roles", "dir")
        if isinstance(parent.operator, cst.MatrixMultiply):
            add(path, "roles", "tensor")
        return
    if isinstance(parent, cst.FormattedStringExpression) and isinstance(grand, cst.FormattedString):
        parts = list(grand.parts)
        i = next((k for k, p in enumerate(parts) if p is parent), -1)
        after = parts[i + 1] if 0 <= i < len(parts) - 1 else None
        if isinstance(after, cst.FormattedStringText) and after.value.startswith(("/", "\\")):
            add(path, "roles", "dir")
        else:
            add(path, "roles", "string")
        return
    if isinstance(parent, cst.AugAssign) and parent.target is node:
        add(path, "roles", "written")
        return

def _attribute(walker: Walker, path: str, attr: str, parents: tuple[cst.CSTNode, ...]) -> None:
    add = walker.facts.add
    parent = parents[-1]
    grand = parents[-2] if len(parents) >= 2 else None
    if attr == "shape":
        add(path, "roles", "tensor")
        if isinstance(grand, cst.Subscript) and grand.value is parent and len(grand.slice) == 1 and isinstance(grand.slice[0].slice, cst.Index):
            k = int_value(grand.slice[0].slice.value)
            if k is not None:
                add(path, "min_rank", k + 1 if k >= 0 else -k)
        return
    if attr in _TENSOR_ATTRS:
        add(path, "roles", "tensor")
        if attr == "grad":
            add(path, "roles", "grad")
        return
    if attr in _OPTIMIZER_ATTRS:
        add(path, "roles", "optimizer")
        return
    if attr in _NDARRAY_ATTRS:
        add(path, "roles", "ndarray")
        return
    add(path, "attrs", attr)

def _method(walker: Walker, path: str, name: str, call: cst.Call, parents: tuple[cst.CSTNode, ...]) -> None:
    add = walker.facts.add
    add(path, "methods", name)
    args = [a for a in call.args if a.keyword is None and a.star == ""]
    if name in _MODULE_METHODS:
        add(path, "roles", "module")
    elif name in _OPTIMIZER_METHODS:
        add(path, "roles", "stepper")
    elif name in _DICT_METHODS:
        add(path, "roles", "dict")
    elif name in _SPARSE_METHODS:
        add(path, "roles", "sparse")
    elif name in _NDARRAY_METHODS:
        add(path, "roles", "ndarray")
    elif name == "size" and args:
        k = int_value(args[0].value)
        if k is not None:
            add(path, "min_rank", k + 1 if k >= 0 else -k)
        add(path, "roles", "tensor")
    elif name == "transpose" and len(args) >= 3:  # NumPy's axes order
        add(path, "rank", len(args))
    elif name == "permute" and args:
        add(path, "rank", len(args))
        add(path, "roles", "tensor")
    elif name in ("transpose", "swapaxes") and len(args) == 2:
        ks = [int_value(a.value) for a in args]
        add(path, "min_rank", max((k + 1 if k >= 0 else -k) for k in ks if k is not None) if any(k is not None for k in ks) else 2)
        add(path, "roles", "tensor")
    elif name == "numpy" or name == "unique" or name == "tolist" or (name.endswith("_") and not name.endswith("__")):
        add(path, "roles", "tensor")
    if name == "state_dict" or name == "load_state_dict" or name == "zero_grad":
        add(path, "roles", "stateful")

def _tensor_index(walker: Walker, path: str, sub: cst.Subscript) -> None:
    add = walker.facts.add
    elements = [e.slice for e in sub.slice]
    if any(isinstance(e, cst.Index) and isinstance(e.value, cst.Ellipsis) for e in elements):
        add(path, "roles", "tensor")
        return
    real = [e for e in elements if not (isinstance(e, cst.Index) and isinstance(e.value, cst.Name) and e.value.value == "None")]
    if len(real) < len(elements):
        add(path, "rank", len(real))  # `mean[:, None, None]`: exactly as many dims as non-None entries
    if any(isinstance(e, cst.Slice) for e in elements) or len(elements) > 1:
        add(path, "min_rank", len(real))
        add(path, "roles", "tensor")

def _called(walker: Walker, path: str, call: cst.Call) -> None:
    add = walker.facts.add
    add(path, "roles", "called")
    args = [a for a in call.args if a.keyword is None and a.star == ""]
    add(path, "arity", len(args))
    if args:
        first = walker.path(args[0].value)
        if first is not None and first != path:
            add(path, "first_arg", first)
    for a in args:
        p = walker.path(a.value)
        if p is not None:
            add(p, "feeds", path)

def _argument(walker: Walker, path: str, arg: cst.Arg, call: cst.Call, parents: tuple[cst.CSTNode, ...]) -> None:
    add = walker.facts.add
    callee = dotted(call.func)
    short = last(callee)
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    pos = next((i for i, a in enumerate(positional) if a is arg), None)
    kw = arg.keyword.value if arg.keyword is not None else None
    receiver = walker.path(call.func.value) if isinstance(call.func, cst.Attribute) else None
    if kw in _AXIS_KEYWORDS and short not in _LAYERS:
        add(path, "roles", "axis")
        return
    if kw in _HEADS_KEYWORDS:
        add(path, "roles", "heads")
        return
    if kw in _SIZE_KEYWORDS or kw in ("k", "n"):
        add(path, "roles", "size")
        return
    if short in _LAYERS:
        if (short == "MultiheadAttention" and pos == 1) or (short in ("TransformerEncoderLayer", "TransformerDecoderLayer") and pos == 1):
            add(path, "roles", "heads")
        elif pos is not None:
            add(path, "roles", "size")
        return
    if short in _FACTORIES and pos is not None:
        add(path, "roles", "shape" if len(positional) == 1 and short != "full" else "size")
        return
    if short == "randint" and pos is not None:
        add(path, "roles", "shape" if pos == len(positional) - 1 and len(positional) >= 2 else "size")
        return
    if short == "range":
        add(path, "roles", "count")
        return
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in _SIZE_METHODS and pos is not None:
        add(path, "roles", "size")
        return
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("topk", "kthvalue", "chunk", "split") and pos == 0:
        add(path, "roles", "size")
        return
    target_pos = 1 if pos == 1 or kw == "target" else None
    if target_pos is not None and (short in _LONG_TARGET):
        add(path, "roles", "long")
        return
    if target_pos is not None and short in _PROB_TARGET:
        add(path, "roles", "prob")
        return
    if target_pos is not None and short in _FLOAT_TARGET:
        add(path, "roles", "float_target")
        return
    if pos == 0 and short in _LONG_ARG0 and callee != "nn.Embedding":
        add(path, "roles", "long")
        return
    if pos == 0 and short == "from_numpy":
        add(path, "roles", "ndarray")
        return
    if callee.startswith(("np.", "numpy.")) and short not in _PATH_ARG0 | _DIR_ARG0:
        add(path, "roles", "numeric")
        return
    if (pos == 0 or kw in ("file", "f", "fname", "path")) and short in _PATH_ARG0 and not (short == "load" and callee.startswith("torch.") and pos != 0):
        if short == "save" and callee.startswith("torch."):
            return
        add(path, "roles", "path")
        return
    if short == "save" and callee.startswith("torch.") and (pos == 1 or kw == "f"):
        add(path, "roles", "path")
        return
    if pos == 0 and short in _DIR_ARG0 and ("path" in callee or callee.startswith(("os.", "shutil."))):
        add(path, "roles", "dir")
        return
    if pos == 0 and (short in _SPARSE_ARG0 or callee in ("torch.sparse.mm", "torch.sparse.sum", "torch.sparse.softmax")):
        add(path, "roles", "sparse")
        return
    if callee in ("float", "int", "round") or callee.startswith("math."):
        add(path, "roles", "number")
        return
    if callee == "len":
        add(path, "roles", "sized")
        return
    if receiver is not None and receiver != path:
        root = receiver.split("[")[0]
        if root == "self" or MODULE_RECEIVER_NAME.search(root):
            assert isinstance(call.func, cst.Attribute)
            add(path, "feeds", f"{receiver}.{call.func.attr.value}")
        return
    if isinstance(call.func, cst.Name) and call.func.value in walker.functions and walker.depth < 1:
        walker.into(path, walker.functions[call.func.value], pos, kw)
        return
    if short in ("linear", "conv1d", "conv2d", "layer_norm") and pos == 0:
        add(path, "roles", "tensor")

def _compared(walker: Walker, path: str, node: cst.BaseExpression, comparison: cst.Comparison, parents: tuple[cst.CSTNode, ...]) -> None:
    add = walker.facts.add
    others = [comparison.left, *(t.comparator for t in comparison.comparisons)]
    others = [o for o in others if o is not node]
    for other in others:
        if isinstance(other, cst.Call) and last(dotted(other.func)) in ("argmax", "argmin"):
            add(path, "roles", "long")
            return
        if isinstance(other, cst.Name) and other.value == "None":
            return
    if any(isinstance(p, (cst.If, cst.While, cst.IfExp)) for p in parents):
        add(path, "roles", "number")


