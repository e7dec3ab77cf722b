"""What the analysis knows about the torch API: which calls make, view, copy or mutate
tensors, and what autograd saves for backward. Checked against torch 2.13 (see
shared/notes/torch-sandbox.md for the measured semantics)."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

# Functions that create a new tensor from scratch (fresh storage).
FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "tensor zeros ones empty full rand randn randint randperm arange linspace logspace eye "
        "zeros_like ones_like empty_like full_like rand_like randn_like randint_like "
        "empty_strided normal bernoulli multinomial poisson complex polar tril_indices triu_indices "
        "sparse_coo_tensor sparse_csr_tensor"
    ).split()
)
LEGACY_CONSTRUCTORS = frozenset(
    f"torch.{name}"
    for name in (
        "Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor ByteTensor CharTensor ShortTensor "
        "IntTensor LongTensor BoolTensor"
    ).split()
) | frozenset(
    f"torch.cuda.{name}" for name in "FloatTensor DoubleTensor HalfTensor LongTensor IntTensor BoolTensor ByteTensor".split()
)
LEGACY_DTYPES = {
    "Tensor": "float32",
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64",
    "IntTensor": "int32",
    "ShortTensor": "int16",
    "CharTensor": "int8",
    "ByteTensor": "uint8",
    "BoolTensor": "bool",
}

# Functions returning a tensor that shares memory with their first argument.
SHARING_FUNCTIONS = {
    "torch.from_numpy": "from_numpy",
    "torch.as_tensor": "as_tensor",
    "torch.asarray": "as_tensor",
    "torch.utils.dlpack.from_dlpack": "alias",
    "torch.from_dlpack": "alias",
}

# Tensor methods (and torch.* functions of the same name) that return a view.
VIEW_METHODS = frozenset(
    (
        "view view_as t transpose permute expand expand_as narrow select squeeze unsqueeze "
        "diagonal as_strided unfold movedim moveaxis swapaxes swapdims unflatten real imag "
        "view_as_real view_as_complex adjoint mT mH T H indices values crow_indices col_indices "
        "alias"
    ).split()
)
# Views that come back as a tuple of views.
VIEW_TUPLE_METHODS = frozenset("unbind split chunk tensor_split split_with_sizes hsplit vsplit dsplit".split())
# Returns a view when the layout allows it, a copy otherwise.
MAYBE_VIEW_METHODS = frozenset("reshape reshape_as flatten contiguous".split())
# Conversions that return `self` when nothing needs to change.
MAYBE_SELF_METHODS = frozenset(
    "to cpu cuda type type_as float double half bfloat16 int long short bool byte char".split()
)
DTYPE_METHODS = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int": "int32",
    "long": "int64",
    "short": "int16",
    "bool": "bool",
    "byte": "uint8",
    "char": "int8",
}
# Methods that return a Python value, not a tensor.
SCALAR_METHODS = frozenset("item tolist dim size numel element_size nelement is_contiguous data_ptr stride ndimension".split())
COPY_METHODS = frozenset(("clone",))

# Measured with torch 2.13: y = op(x); an in-place write to y (or to x) before backward
# raises "modified by an inplace operation".
# Ops whose backward needs their own output.
SAVES_OUTPUT = frozenset(
    "exp exp2 expm1 sigmoid tanh tan relu rsqrt sqrt reciprocal softmax log_softmax norm prod hypot "
    "cdist pdist logsumexp cumprod".split()
)
# Ops whose backward divides by their output: an infinite fill of it (`d.data.masked_fill_(m,
# -inf)` before a softmax) gives the masked places gradient 0, as the out-of-place fill does
# (measured with torch 2.13; not so `exp`, whose backward multiplies and makes NaN).
DIVIDES_BY_OUTPUT = frozenset("cdist norm sqrt".split())
# Ops whose backward needs their (first) input.
SAVES_INPUTS = frozenset(
    "abs acos asin atan atan2 cos cosh sin sinh log log10 log1p log2 pow square norm prod hypot "
    "elu celu selu relu6 gelu silu mish softplus leaky_relu hardswish logsigmoid "
    "conv1d conv2d conv3d batch_norm layer_norm group_norm instance_norm cosine_similarity".split()
)
# Binary ops that save each operand when the other one requires grad (x * w saves x for dw).
SAVES_OTHER_OPERAND = frozenset("mul div matmul mm bmm mv dot einsum addmm baddbmm linear bilinear".split())
OPERATOR_SAVES_INPUTS = frozenset(("*", "/", "**", "@"))

# nn modules that own no parameters (calling them does not attach their output by itself).
PARAMETERLESS_MODULES = frozenset(
    (
        "ReLU ReLU6 LeakyReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Softmax LogSoftmax "
        "Softplus Softsign Hardtanh Hardswish Hardsigmoid Threshold Dropout Dropout1d Dropout2d Dropout3d "
        "AlphaDropout Identity Flatten Unflatten MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d "
        "AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d "
        "Upsample UpsamplingBilinear2d UpsamplingNearest2d PixelShuffle PixelUnshuffle ChannelShuffle Fold Unfold "
        "ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d ReflectionPad2d "
        "ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d CircularPad1d CircularPad2d CircularPad3d "
        "FractionalMaxPool2d FractionalMaxPool3d LPPool1d LPPool2d LPPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d "
        "Softmin Softmax2d LogSigmoid Tanhshrink Softshrink Hardshrink RReLU GLU TripletMarginWithDistanceLoss "
        "CosineSimilarity PairwiseDistance MSELoss L1Loss CrossEntropyLoss NLLLoss "
        "BCELoss BCEWithLogitsLoss HuberLoss SmoothL1Loss KLDivLoss CosineEmbeddingLoss MarginRankingLoss "
        "TripletMarginLoss CTCLoss PoissonNLLLoss GaussianNLLLoss HingeEmbeddingLoss MultiLabelMarginLoss "
        "MultiLabelSoftMarginLoss MultiMarginLoss SoftMarginLoss"
    ).split()
)
# Modules that take inplace=True.
INPLACE_MODULES = frozenset(
    "ReLU ReLU6 LeakyReLU ELU SELU CELU SiLU Mish Hardtanh Hardswish Hardsigmoid Threshold "
    "Dropout Dropout1d Dropout2d Dropout3d AlphaDropout".split()
)
# torch.nn.functional functions that take inplace=True.
INPLACE_FUNCTIONAL = frozenset(
    "relu relu6 leaky_relu elu selu celu silu mish hardtanh hardswish hardsigmoid threshold "
    "dropout dropout1d dropout2d dropout3d alpha_dropout rrelu".split()
)

# Methods that only nn.Module / optimizers / tensors have: evidence of what a name holds.
MODULE_ONLY_METHODS = frozenset(
    "parameters named_parameters buffers named_buffers state_dict load_state_dict modules "
    "named_modules children named_children train eval register_buffer register_parameter "
    "register_forward_hook".split()
)
OPTIMIZER_ONLY = frozenset(("param_groups",))
TENSOR_ONLY_METHODS = frozenset(
    (
        "detach detach_ clone view view_as unsqueeze t squeeze_ unsqueeze_ requires_grad_ numpy "
        "add_ sub_ mul_ div_ zero_ fill_ copy_ clamp_ masked_fill_ index_add_ index_copy_ "
        "scatter_ scatter_add_ normal_ uniform_ exp_ log_ sigmoid_ tanh_ relu_ neg_ abs_ sqrt_ "
        "pow_ addcmul_ addcdiv_ lerp_ t_ transpose_ resize_ contiguous is_contiguous data_ptr "
        "untyped_storage element_size numel backward retain_grad register_hook"
    ).split()
)
TENSOR_ONLY_ATTRIBUTES = frozenset(("grad", "grad_fn", "requires_grad", "is_leaf", "data", "dtype", "T", "mT"))

# Methods only a SciPy sparse matrix has (a tensor's sparse API is `to_sparse_coo()`,
# `to_dense()`): what calls one is a matrix, whose `.data` is an ndarray of its values.
SPARSE_MATRIX_METHODS = frozenset("tocoo tocsr tocsc tolil todok todia tobsr toarray getnnz eliminate_zeros sum_duplicates".split())

MODULE_CLASS_PREFIXES = ("torch.nn.", "nn.")
# Libraries whose functions never return a tensor, though their objects may look like one
# (a SciPy sparse matrix's `.data`, a DataFrame's `.values`). NumPy is modelled on its own.
NON_TORCH_LIBRARIES = ("scipy.", "pandas.", "sklearn.", "networkx.")
# transformers' text, image and audio preprocessors (`AutoTokenizer.from_pretrained(...)`,
# `AutoProcessor(...)`): objects with a `__call__`, never modules, whose outputs are lists
# unless asked for tensors.
PREPROCESSOR_CLASS = re.compile(r"^transformers\.(?:\w+\.)*\w*(?:Tokenizer|TokenizerFast|Processor|FeatureExtractor)(?:\.from_pretrained)?$")
# What builds a DataLoader, whose batches the analysis takes for data (`values.a_loader`).
LOADER_CLASSES = frozenset(("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"))
# Their classes build dataset objects, not tensors: what `.data` holds differs by dataset
# (torchvision's CIFAR10 keeps a NumPy array there, MNIST a tensor).
DATASET_LIBRARIES = ("torchvision.datasets.", "torchaudio.datasets.", "torchtext.datasets.")
OPTIMIZER_PREFIX = "torch.optim."
SCHEDULER_PREFIXES = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.SWALR")
# Functions that name a device other than the CPU (an XLA device: a TPU or GPU). The
# analysis has one word for "not the CPU", Device.CUDA: what matters to copies is that
# moving a CPU tensor there always copies, and that NumPy cannot read it in place.
ACCELERATOR_DEVICE_FUNCTIONS = frozenset(("torch_xla.device", "torch_xla.core.xla_model.xla_device"))
# Device strings of such devices (`"xla"`, `"xla:0"`, `"mps"`, `"xpu"`), beside `"cuda"`.
ACCELERATOR_DEVICE_STRINGS = frozenset(("xla", "mps", "xpu", "hpu", "npu"))
DIFFERENTIATE_FUNCTIONS = frozenset(("torch.autograd.grad", "torch.autograd.backward"))
GRAD_MODE_OFF = frozenset(("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"))
GRAD_MODE_ON = frozenset(("torch.enable_grad", "torch.autograd.enable_grad"))
# Their last names, which only torch spells (`with torch.no_grad():` of a `torch` bound at run time).
GRAD_MODE_NAMES = frozenset(q.rpartition(".")[2] for q in GRAD_MODE_OFF | GRAD_MODE_ON)

# Lightning runs its evaluation loops (validation, test, predict) under no_grad or
# inference_mode, and calls these hooks of the LightningModule and its callbacks from them.
LIGHTNING_BASE = re.compile(r"^(?:pytorch_lightning|lightning(?:\.pytorch)?)\.(?:\w+\.)*(?:LightningModule|Callback)$")
LIGHTNING_EVALUATION_HOOKS = frozenset(
    f"{prefix}{stage}{suffix}"
    for stage in ("validation", "test", "predict")
    for prefix, suffix in (("", "_step"), ("", "_epoch_end"), ("on_", "_start"), ("on_", "_end"), ("on_", "_epoch_start"),
                           ("on_", "_epoch_end"), ("on_", "_batch_start"), ("on_", "_batch_end"))
)


def is_inplace_method(name: str) -> bool:
    """`add_`, `zero_`...: an in-place method torch.Tensor really has.

    A trailing underscore alone is only a naming habit: `boxes.transform_boxes_(m)` or
    `mesh.offset_verts_(d)` belong to other classes (kornia's Boxes, pytorch3d's Meshes),
    whose receivers are often named like tensors.
    """
    return len(name) > 1 and name.endswith("_") and not name.endswith("__") and not name.startswith("_") and name in tensor_methods()


# In-place methods that change only the tensor object they are called on (its shape,
# strides or storage), never the data it shares: another tensor or array viewing the
# same memory keeps its own shape and values.
SHAPE_ONLY_INPLACE = frozenset(("unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "as_strided_", "resize_", "set_"))


DTYPE_CONSTANTS = {
    f"torch.{alias}": dtype
    for dtype, aliases in {
        "float32": ("float32", "float"),
        "float64": ("float64", "double"),
        "float16": ("float16", "half"),
        "bfloat16": ("bfloat16",),
        "int64": ("int64", "long"),
        "int32": ("int32", "int"),
        "int16": ("int16", "short"),
        "int8": ("int8",),
        "uint8": ("uint8",),
        "bool": ("bool",),
        "complex64": ("complex64", "cfloat"),
    }.items()
    for alias in aliases
}


@cache
def _table() -> dict:
    return json.loads((Path(__file__).parent / "torch_api.json").read_text())


@cache
def tensor_methods() -> frozenset[str]:
    """Every public method torch.Tensor has (from the table made with the pinned torch)."""
    return frozenset().union(*_table()["tensor_methods"].values())


def method_returns(name: str) -> str:
    """'tensor', 'tuple', 'other', or 'unknown' for a torch.Tensor method (from aten schemas)."""
    table = _table()["tensor_methods"]
    return next((kind for kind in ("tensor", "tuple", "other") if name in table[kind]), "unknown")


def function_returns(name: str) -> str:
    table = _table()["torch_functions"]
    return next((kind for kind in ("tensor", "tuple", "other") if name in table[kind]), "unknown")

# nn modules whose backward needs their output / their input (measured with torch 2.13
# through the functional forms they call).
MODULE_SAVES_OUTPUT = frozenset("Sigmoid Tanh ReLU Softmax LogSoftmax".split())
MODULE_SAVES_INPUT = frozenset(
    "Linear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d BatchNorm1d BatchNorm2d "
    "BatchNorm3d LayerNorm GroupNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d GELU SiLU ELU SELU CELU Mish "
    "Softplus LeakyReLU Hardswish LogSigmoid".split()
)


def is_view_op(name: str) -> bool:
    """Does this op return a view of its input (per its aten schema's alias annotation)?"""
    return name in _views()


@cache
def _views() -> frozenset[str]:
    return frozenset(_table()["views"]) - {"to", "contiguous", "reshape", "flatten", "type_as", "view_as_complex_copy"}

# Ops whose results are indices, counts or masks: integer or bool tensors, never attached.
INDEX_OPS = frozenset(
    "argmax argmin argsort nonzero bincount searchsorted bucketize count_nonzero eq ne lt le gt ge "
    "isnan isinf isfinite isclose logical_and logical_or logical_not logical_xor equal one_hot".split()
)

# torchvision transforms whose output is a tensor, whatever image, array or tensor they get.
TENSOR_TRANSFORMS = frozenset(
    f"torchvision.transforms.{v}{name}"
    for v in ("", "v2.")
    for name in ("ToTensor", "PILToTensor", "ConvertImageDtype", "Normalize", "ToImage", "ToDtype", "ToPureTensor")
)


# Ops that return two separate new tensors, the second of them indices or a second statistic
# (`values, indices = x.topk(k)`): unpacked, the names share nothing.
PAIR_RESULTS = frozenset("topk sort max min kthvalue mode median nanmedian cummax cummin aminmax std_mean var_mean frexp slogdet".split())
# Of those, the ones whose second tensor is int64 indices.
INDEX_PAIR_RESULTS = frozenset("topk sort max min kthvalue mode median nanmedian cummax cummin".split())
# Reductions that return one tensor over all elements and (values, indices) along a dimension
# (`x.max()` against `x.max(1)`, `torch.median(x, dim=0)`; `x.max(y)` of a tensor `y` is
# the elementwise maximum).
PAIR_ALONG_DIM = frozenset("max min median nanmedian".split())


# NumPy's random draws and where their `size` goes positionally: with no size they return one
# number (`2 ** np.random.uniform(a, b)` is a float, not an array).
NUMPY_RANDOM_SIZE_AT = {
    "uniform": 2, "normal": 2, "randint": 2, "beta": 2, "binomial": 2, "gamma": 2, "laplace": 2, "lognormal": 2, "logistic": 2, "gumbel": 2,
    "exponential": 1, "poisson": 1, "choice": 1, "chisquare": 1, "geometric": 1,
    "rand": 0, "randn": 0, "random": 0, "random_sample": 0, "ranf": 0, "sample": 0, "standard_normal": 0,
}

