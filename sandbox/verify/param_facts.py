"""What a function does with each of its parameters, read from its code: the hints that
input synthesis (`sandbox.inputs`) turns into candidate values.

For every parameter, and for the parts of it the code reaches (`batch["image"]`, the
elements of `for x, y in loader`, `val_batch[0]`), the facts are gathered by *path*:

    loader          iterated, elements unpacked into 2 names
    loader[*][0]    the `x` of `for x, y in loader`: fed to `model(...)`
    loader[*][1]    the `y`: the target of `F.cross_entropy` -> class ids
    batch['image']  a tensor whose `.float()` is taken
    frames          `_, _, h, w = frames.shape` -> a 4-D tensor

Facts are roles (`module`, `optimizer`, `long`, `size`, `index`, `path`, `dir`, ...),
the methods and attributes used on the value, string keys, tuple arity, rank, the local
names bound to it (to tell which input an error line is about) and what it is fed to.
A method's class gives the same for its constructor's parameters, through the `self`
attributes they are stored in; the file's module classes and `make_*` factories are
described so that the probe can build inputs from them.

Runs in the reviewer's process: libcst only, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import libcst as cst

Facts = dict[str, Any]

# Methods that give back the same value (for the facts: same shape, same keys), so that
# `x = batch["image"].float()` makes the uses of `x` facts about `batch["image"]`.
_SAME_VALUE_METHODS = frozenset(
    "float double half bfloat16 long int bool to cuda cpu detach clone contiguous requires_grad_ type type_as".split()
)
_CONVERSIONS = frozenset(("as_tensor", "tensor", "asarray", "array", "from_numpy", "Tensor", "FloatTensor", "LongTensor"))

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

# The file's own functions that make inputs: `make_batch(n)` for a parameter `batch`.
FACTORY = re.compile(r"^(make|build|create|get|sample|dummy|example|random|fake|synth\w*|load|new)_(\w+)$")
_MODEL_NAME = re.compile(r"^(model|net|network|module|encoder|decoder|backbone|policy|critic|actor|teacher|student|G|D)$|_(model|net)$|^(model|net)_")
# Calls that give a reshaped or converted view of the value: its role as an argument holds.
_DERIVED_METHODS = _SAME_VALUE_METHODS | frozenset("flatten view reshape squeeze unsqueeze view_as reshape_as t ravel".split())
_MODULE_BASE = re.compile(r"(^|\.)(Module|Sequential|ModuleList|ModuleDict|Linear|Conv\dd|Embedding|LightningModule|\w+Module)$")


def dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _int_value(node: cst.BaseExpression) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return -int(node.expression.evaluated_value)
    return None


def _string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _params(fn: cst.FunctionDef) -> list[cst.Param]:
    p = fn.params
    return [*p.posonly_params, *p.params, *p.kwonly_params]


def param_names(fn: cst.FunctionDef) -> list[str]:
    return [p.name.value for p in _params(fn)]


class _Facts:
    """Facts by path, with the local names bound to each path."""

    def __init__(self) -> None:
        self.by_path: dict[str, Facts] = {}

    def at(self, path: str) -> Facts:
        return self.by_path.setdefault(path, {})

    def add(self, path: str, key: str, value: Any) -> None:
        f = self.at(path)
        if key in ("roles", "methods", "attrs", "keys", "names", "feeds"):
            items = f.setdefault(key, [])
            if value not in items:
                items.append(value)
        elif key in ("min_rank", "items"):
            f[key] = max(int(f.get(key, 0)), int(value))
        else:
            f.setdefault(key, value)

    def merge(self, path: str, other: Facts) -> None:
        for key, value in other.items():
            if key == "names":
                continue
            if isinstance(value, list):
                for v in value:
                    self.add(path, key, v)
            else:
                self.add(path, key, value)

    def to_json(self) -> dict[str, Facts]:
        return {p: {k: (sorted(v) if isinstance(v, list) and k != "names" else v) for k, v in f.items()} for p, f in sorted(self.by_path.items())}


class Analyzer:
    """Walks one function in source order, tracking which local names stand for which
    parameter path, and records every use of such a name."""

    def __init__(self, roots: dict[str, str], functions: dict[str, cst.FunctionDef] | None = None, depth: int = 0) -> None:
        # local name (or `self.attr`) -> path
        self.alias: dict[str, str] = dict(roots)
        self.facts = _Facts()
        for name, path in roots.items():
            self.facts.add(path, "names", name.split(".")[-1])
        self.functions = functions or {}
        self.depth = depth

    # ----------------------------------------------------------------- paths

    def path(self, node: cst.BaseExpression) -> str | None:
        if isinstance(node, cst.Name):
            return self.alias.get(node.value)
        if isinstance(node, cst.Attribute):
            name = dotted(node)
            if name in self.alias:
                return self.alias[name]
            return None
        if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            base = self.path(node.value)
            if base is None:
                return None
            index = node.slice[0].slice.value
            key = _string_value(index)
            if key is not None:
                return f"{base}[{key!r}]"
            number = _int_value(index)
            if number is not None and number >= 0:
                return f"{base}[{number}]"
        return None

    def value_path(self, node: cst.BaseExpression) -> str | None:
        """The path a value stands for when bound to a name: through same-value methods
        and conversions (`batch["x"].float()`, `torch.as_tensor(mean)`)."""
        direct = self.path(node)
        if direct is not None:
            return direct
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in _SAME_VALUE_METHODS:
                return self.value_path(node.func.value)
            if _last(dotted(node.func)) in _CONVERSIONS and node.args:
                return self.value_path(node.args[0].value)
        return None

    def bind(self, target: cst.BaseExpression, path: str | None) -> None:
        """Bind assignment or loop targets; unpacking makes item paths."""
        if isinstance(target, cst.Name):
            if path is None:
                self.alias.pop(target.value, None)
            else:
                self.alias[target.value] = path
                self.facts.add(path, "names", target.value)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
            name = dotted(target)
            if path is None:
                self.alias.pop(name, None)
            else:
                self.alias[name] = path
                self.facts.add(path, "names", target.attr.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            elements = [e for e in target.elements if not isinstance(e, cst.StarredElement)]
            if path is not None:
                self.facts.add(path, "items", len(elements))
                self.facts.add(path, "roles", "tuple")
            for i, element in enumerate(elements):
                self.bind(element.value, f"{path}[{i}]" if path is not None else None)

    # ------------------------------------------------------------------ walk

    def run(self, body: cst.CSTNode) -> _Facts:
        self.walk(body, ())
        return self.facts

    def walk(self, node: cst.CSTNode, parents: tuple[cst.CSTNode, ...]) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and parents:
            return  # nested scopes have their own names
        if isinstance(node, cst.Assign):
            self.walk(node.value, (*parents, node))
            source = self._unpack_source(node.value)
            for t in node.targets:
                if source is not None and isinstance(t.target, (cst.Tuple, cst.List)):
                    self._shape_unpack(source, len(t.target.elements))
                    self.bind(t.target, None)
                else:
                    self.bind(t.target, self.value_path(node.value))
                self.walk(t.target, (*parents, node, t))
            return
        if isinstance(node, cst.AnnAssign) and node.value is not None:
            self.walk(node.value, (*parents, node))
            self.bind(node.target, self.value_path(node.value))
            return
        if isinstance(node, cst.For):
            self.walk(node.iter, (*parents, node))
            self._bind_loop(node.target, node.iter)
            self.walk(node.body, (*parents, node))
            if node.orelse is not None:
                self.walk(node.orelse, (*parents, node))
            return
        if isinstance(node, cst.CompFor):
            self.walk(node.iter, (*parents, node))
            self._bind_loop(node.target, node.iter)
            for cond in node.ifs:
                self.walk(cond, (*parents, node))
            if node.inner_for_in is not None:
                self.walk(node.inner_for_in, (*parents, node))
            return
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            self.walk(node.for_in, (*parents, node))
            self.walk(node.elt, (*parents, node))
            return
        if isinstance(node, cst.DictComp):
            self.walk(node.for_in, (*parents, node))
            self.walk(node.key, (*parents, node))
            self.walk(node.value, (*parents, node))
            return
        if isinstance(node, cst.BaseExpression):
            path = self.path(node)
            if path is not None:
                self.use(path, node, parents)
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in _DERIVED_METHODS:
                base = self.path(node.func.value)
                if base is not None and parents and isinstance(parents[-1], (cst.Arg, cst.Comparison, cst.ComparisonTarget)):
                    self.use(base, node, parents)  # `targets.flatten()` as a loss's target
        for child in node.children:
            self.walk(child, (*parents, node))

    def _unpack_source(self, value: cst.BaseExpression) -> str | None:
        """`a, b, c, d = x.shape` (or `x.size()`): the path of x."""
        if isinstance(value, cst.Attribute) and value.attr.value == "shape":
            return self.path(value.value)
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" and not value.args:
            return self.path(value.func.value)
        return None

    def _shape_unpack(self, path: str, n: int) -> None:
        self.facts.add(path, "rank", n)
        self.facts.add(path, "roles", "tensor")

    def _bind_loop(self, target: cst.BaseExpression, it: cst.BaseExpression) -> None:
        path = self.path(it)
        if path is not None:
            self._iterated(path, target)
            return
        if isinstance(it, cst.Call):
            fn = dotted(it.func)
            args = [a.value for a in it.args if a.keyword is None and a.star == ""]
            if fn == "enumerate" and args and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                inner = self.path(args[0])
                if inner is not None:
                    self._iterated(inner, target.elements[1].value)
                    self.bind(target.elements[0].value, None)
                    return
            if fn == "zip" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(args):
                for arg, element in zip(args, target.elements):
                    inner = self.path(arg)
                    if inner is not None:
                        self._iterated(inner, element.value)
                    else:
                        self.bind(element.value, None)
                return
            if isinstance(it.func, cst.Attribute) and it.func.attr.value in ("items", "values") and self.path(it.func.value):
                self.facts.add(self.path(it.func.value) or "", "roles", "dict")
            if fn == "range" and args:
                for a in args:
                    p = self.path(a)
                    if p is not None:
                        self.facts.add(p, "roles", "count")
        self.bind(target, None)

    def _iterated(self, path: str, target: cst.BaseExpression) -> None:
        arity = len(target.elements) if isinstance(target, (cst.Tuple, cst.List)) else 0
        self.facts.add(path, "iter", arity)
        self.facts.add(path, "roles", "iterable")
        self.bind(target, f"{path}[*]")

    # ------------------------------------------------------------------ uses

    def use(self, path: str, node: cst.BaseExpression, parents: tuple[cst.CSTNode, ...]) -> None:
        if not parents:
            return
        parent = parents[-1]
        if isinstance(parent, cst.BinaryOperation):
            # A bound of a slice, even inside arithmetic (`x[i:i + self.window]`), is an int.
            for outer in reversed(parents[:-1]):
                if isinstance(outer, cst.Slice):
                    self.facts.add(path, "roles", "index")
                    break
                if not isinstance(outer, (cst.BinaryOperation, cst.UnaryOperation)):
                    break
        grand = parents[-2] if len(parents) >= 2 else None
        add = self.facts.add
        if isinstance(parent, cst.Attribute) and parent.value is node:
            if self.path(parent) is not None:
                return  # `self.x` standing for a constructor parameter: its own use
            attr = parent.attr.value
            if isinstance(grand, cst.Call) and grand.func is parent:
                self._method(path, attr, grand, parents[:-2])
            else:
                self._attribute(path, attr, parents)
            return
        if isinstance(parent, cst.Subscript) and parent.value is node:
            if self.path(parent) is not None:
                index = parent.slice[0].slice
                assert isinstance(index, cst.Index)
                if _string_value(index.value) is not None:
                    add(path, "keys", _string_value(index.value))
                    add(path, "roles", "dict")
                else:
                    add(path, "items", (_int_value(index.value) or 0) + 1)
                    add(path, "roles", "indexed")
                return
            self._tensor_index(path, parent)
            return
        if isinstance(parent, (cst.Index, cst.SubscriptElement, cst.Slice)):
            add(path, "roles", "index")
            return
        if isinstance(parent, cst.Call) and parent.func is node:
            self._called(path, parent)
            return
        if isinstance(parent, cst.Arg) and isinstance(grand, cst.Call):
            self._argument(path, parent, grand, parents[:-2])
            return
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            comparison = parent if isinstance(parent, cst.Comparison) else grand
            if isinstance(comparison, cst.Comparison):
                self._compared(path, node, comparison, parents)
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

    def _attribute(self, path: str, attr: str, parents: tuple[cst.CSTNode, ...]) -> None:
        add = self.facts.add
        parent = parents[-1]
        grand = parents[-2] if len(parents) >= 2 else None
        if attr == "shape":
            add(path, "roles", "tensor")
            if isinstance(grand, cst.Subscript) and grand.value is parent and len(grand.slice) == 1 and isinstance(grand.slice[0].slice, cst.Index):
                k = _int_value(grand.slice[0].slice.value)
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

    def _method(self, path: str, name: str, call: cst.Call, parents: tuple[cst.CSTNode, ...]) -> None:
        add = self.facts.add
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
            k = _int_value(args[0].value)
            if k is not None:
                add(path, "min_rank", k + 1 if k >= 0 else -k)
            add(path, "roles", "tensor")
        elif name == "transpose" and len(args) >= 3:  # NumPy's axes order
            add(path, "rank", len(args))
        elif name == "permute" and args:
            add(path, "rank", len(args))
            add(path, "roles", "tensor")
        elif name in ("transpose", "swapaxes") and len(args) == 2:
            ks = [_int_value(a.value) for a in args]
            add(path, "min_rank", max((k + 1 if k >= 0 else -k) for k in ks if k is not None) if any(k is not None for k in ks) else 2)
            add(path, "roles", "tensor")
        elif name == "numpy" or name == "unique" or name == "tolist" or (name.endswith("_") and not name.endswith("__")):
            add(path, "roles", "tensor")
        if name == "state_dict" or name == "load_state_dict" or name == "zero_grad":
            add(path, "roles", "stateful")

    def _tensor_index(self, path: str, sub: cst.Subscript) -> None:
        add = self.facts.add
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

    def _called(self, path: str, call: cst.Call) -> None:
        add = self.facts.add
        add(path, "roles", "called")
        args = [a for a in call.args if a.keyword is None and a.star == ""]
        add(path, "arity", len(args))
        if args:
            first = self.path(args[0].value)
            if first is not None and first != path:
                add(path, "first_arg", first)
        for a in args:
            p = self.path(a.value)
            if p is not None:
                add(p, "feeds", path)

    def _argument(self, path: str, arg: cst.Arg, call: cst.Call, parents: tuple[cst.CSTNode, ...]) -> None:
        add = self.facts.add
        callee = dotted(call.func)
        last = _last(callee)
        positional = [a for a in call.args if a.keyword is None and a.star == ""]
        pos = next((i for i, a in enumerate(positional) if a is arg), None)
        kw = arg.keyword.value if arg.keyword is not None else None
        receiver = self.path(call.func.value) if isinstance(call.func, cst.Attribute) else None
        if kw in _AXIS_KEYWORDS and last not in _LAYERS:
            add(path, "roles", "axis")
            return
        if kw in _HEADS_KEYWORDS:
            add(path, "roles", "heads")
            return
        if kw in _SIZE_KEYWORDS or kw in ("k", "n"):
            add(path, "roles", "size")
            return
        if last in _LAYERS:
            if (last == "MultiheadAttention" and pos == 1) or (last in ("TransformerEncoderLayer", "TransformerDecoderLayer") and pos == 1):
                add(path, "roles", "heads")
            elif pos is not None:
                add(path, "roles", "size")
            return
        if last in _FACTORIES and pos is not None:
            add(path, "roles", "shape" if len(positional) == 1 and last != "full" else "size")
            return
        if last == "randint" and pos is not None:
            add(path, "roles", "shape" if pos == len(positional) - 1 and len(positional) >= 2 else "size")
            return
        if last == "range":
            add(path, "roles", "count")
            return
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _SIZE_METHODS and pos is not None:
            add(path, "roles", "size")
            return
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("topk", "kthvalue", "chunk", "split") and pos == 0:
            add(path, "roles", "size")
            return
        target_pos = 1 if pos == 1 or kw == "target" else None
        if target_pos is not None and (last in _LONG_TARGET):
            add(path, "roles", "long")
            return
        if target_pos is not None and last in _PROB_TARGET:
            add(path, "roles", "prob")
            return
        if target_pos is not None and last in _FLOAT_TARGET:
            add(path, "roles", "float_target")
            return
        if pos == 0 and last in _LONG_ARG0 and callee != "nn.Embedding":
            add(path, "roles", "long")
            return
        if pos == 0 and last == "from_numpy":
            add(path, "roles", "ndarray")
            return
        if callee.startswith(("np.", "numpy.")) and last not in _PATH_ARG0 | _DIR_ARG0:
            add(path, "roles", "numeric")
            return
        if (pos == 0 or kw in ("file", "f", "fname", "path")) and last in _PATH_ARG0 and not (last == "load" and callee.startswith("torch.") and pos != 0):
            if last == "save" and callee.startswith("torch."):
                return
            add(path, "roles", "path")
            return
        if last == "save" and callee.startswith("torch.") and (pos == 1 or kw == "f"):
            add(path, "roles", "path")
            return
        if pos == 0 and last in _DIR_ARG0 and ("path" in callee or callee.startswith(("os.", "shutil."))):
            add(path, "roles", "dir")
            return
        if pos == 0 and (last in _SPARSE_ARG0 or callee in ("torch.sparse.mm", "torch.sparse.sum", "torch.sparse.softmax")):
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
            if root == "self" or _MODEL_NAME.search(root):
                assert isinstance(call.func, cst.Attribute)
                add(path, "feeds", f"{receiver}.{call.func.attr.value}")
            return
        if isinstance(call.func, cst.Name) and call.func.value in self.functions and self.depth < 1:
            self._into(path, self.functions[call.func.value], pos, kw)
            return
        if last in ("linear", "conv1d", "conv2d", "layer_norm") and pos == 0:
            add(path, "roles", "tensor")

    def _into(self, path: str, fn: cst.FunctionDef, pos: int | None, kw: str | None) -> None:
        """One level into a same-file function: its parameter's facts are this value's."""
        names = param_names(fn)
        name = kw if kw is not None else (names[pos] if pos is not None and pos < len(names) else None)
        if name is None or name not in names:
            return
        inner = analyze_function(fn, self.functions, self.depth + 1)
        for sub, facts in inner.items():
            if sub == name or sub.startswith(name + "["):
                self.facts.merge(path + sub[len(name):], facts)

    def _compared(self, path: str, node: cst.BaseExpression, comparison: cst.Comparison, parents: tuple[cst.CSTNode, ...]) -> None:
        add = self.facts.add
        others = [comparison.left, *(t.comparator for t in comparison.comparisons)]
        others = [o for o in others if o is not node]
        for other in others:
            if isinstance(other, cst.Call) and _last(dotted(other.func)) in ("argmax", "argmin"):
                add(path, "roles", "long")
                return
            if isinstance(other, cst.Name) and other.value == "None":
                return
        if any(isinstance(p, (cst.If, cst.While, cst.IfExp)) for p in parents):
            add(path, "roles", "number")


def analyze_function(fn: cst.FunctionDef, functions: dict[str, cst.FunctionDef] | None = None, depth: int = 0,
                     extra: dict[str, str] | None = None) -> dict[str, Facts]:
    roots = {n: n for n in param_names(fn)}
    roots.update(extra or {})
    analyzer = Analyzer(roots, functions, depth)
    analyzer.run(fn.body)
    return analyzer.facts.to_json()


# ------------------------------------------------------------------- classes


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]


def _init_of(cls: cst.ClassDef) -> cst.FunctionDef | None:
    return next((m for m in _methods(cls) if m.name.value == "__init__"), None)


def _self_attrs(init: cst.FunctionDef, params: Sequence[str]) -> tuple[dict[str, str], list[str], dict[str, list[str]]]:
    """`self.x = ...` in __init__: which attributes stand for a parameter's value (for
    facts), every attribute set, and the parameters each attribute is built from (for
    blame: an error on `self.fc(x)` may be about `dim`)."""
    stands: dict[str, str] = {}
    attrs: list[str] = []
    built_from: dict[str, list[str]] = {}
    analyzer = Analyzer({p: p for p in params})

    class Find(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                target = t.target
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                    attr = target.attr.value
                    attrs.append(attr)
                    path = analyzer.value_path(node.value)
                    if path is not None and "[" not in path:
                        stands[f"self.{attr}"] = path
                    used = sorted(_names(node.value) & set(params))
                    for p in used:
                        built_from.setdefault(p, []).append(attr)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is init

    init.visit(Find())
    return stands, list(dict.fromkeys(attrs)), built_from


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

    node.visit(Names())
    return found


def constructor_facts(cls: cst.ClassDef, functions: dict[str, cst.FunctionDef]) -> tuple[dict[str, Facts], list[str]]:
    """Facts about the constructor's parameters, from __init__ and from every method's use
    of the attributes they are kept in; and the attributes __init__ sets."""
    init = _init_of(cls)
    if init is None:
        return {}, []
    params = param_names(init)[1:]
    stands, attrs, built_from = _self_attrs(init, params)
    facts = _Facts()
    for p, f in analyze_function(init, functions).items():
        if p.split("[")[0] in params:
            facts.merge(p, f)
            if p in params:
                facts.add(p, "names", p)
    for method in _methods(cls):
        if method is init:
            continue
        inner = Analyzer(dict(stands), functions)
        inner.run(method.body)
        for p, f in inner.facts.to_json().items():
            facts.merge(p, f)
    for p, derived in built_from.items():
        for attr in derived:
            facts.add(p, "names", attr)
    return facts.to_json(), attrs


def _is_module_class(cls: cst.ClassDef, module_classes: set[str]) -> bool:
    for base in cls.bases:
        name = dotted(base.value)
        if name in module_classes or _MODULE_BASE.search(name):
            return True
    return False


def module_classes(module: cst.Module) -> list[cst.ClassDef]:
    """Top-level nn.Module subclasses of the file (a base defined in the file counts)."""
    found: list[cst.ClassDef] = []
    names: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and _is_module_class(stmt, names):
            found.append(stmt)
            names.add(stmt.name.value)
    return found


def factories(module: cst.Module) -> list[cst.FunctionDef]:
    return [s for s in module.body if isinstance(s, cst.FunctionDef) and FACTORY.match(s.name.value)]


def describe(module: cst.Module, fn: cst.FunctionDef, cls: cst.ClassDef | None) -> dict[str, Any]:
    """The hints for one subject: its parameters, its class's constructor (for a method),
    and the file's module classes and factories."""
    functions = {s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)}
    out: dict[str, Any] = {}
    out["params"] = analyze_function(fn, functions)
    if cls is not None:
        init_facts, attrs = constructor_facts(cls, functions)
        out["init"] = init_facts
        out["attrs"] = attrs
        if fn is _init_of(cls):
            out["params"] = init_facts  # __init__ itself: its parameters' uses in every method
    classes: dict[str, Any] = {}
    all_modules = module_classes(module)
    used_by_others = {c.name.value for c in all_modules for other in all_modules if other is not c and c.name.value in _names(other)}
    for c in all_modules:
        init_facts, attrs = constructor_facts(c, functions)
        forward = next((m for m in _methods(c) if m.name.value == "forward"), None)
        classes[c.name.value] = {
            "init": init_facts,
            "attrs": attrs,
            "inner": c.name.value in used_by_others,
            "forward_arity": len(param_names(forward)) - 1 if forward is not None else None,
        }
    if classes:
        out["classes"] = classes
    made = {}
    for f in factories(module):
        if f is fn:
            continue
        m = FACTORY.match(f.name.value)
        assert m is not None
        made[f.name.value] = {"noun": m.group(2), "params": analyze_function(f, functions)}
    if made:
        out["factories"] = made
    return out


def providers(module: cst.Module) -> set[str]:
    """Top-level names the probe may build inputs from: module classes and factories
    (kept in the subject's source next to what it uses)."""
    return {c.name.value for c in module_classes(module)} | {f.name.value for f in factories(module)}
