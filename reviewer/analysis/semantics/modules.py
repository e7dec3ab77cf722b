"""nn.Module and optimizer methods: `state_dict()` and `parameters()` hand out the live
tensors, `.to()` moves the module itself, `load_state_dict` and `optimizer.step()` write
into parameters in place, `zero_grad(set_to_none=False)` into gradients."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.context import Context
from review_copies.analysis.events import Write
from review_copies.analysis.semantics import api
from review_copies.analysis.semantics.callables import call_value
from review_copies.analysis.syntax import dotted, first_argument_false, keyword_is, short_code
from review_copies.analysis.values import NONE, OTHER, UNKNOWN, Device, Kind, Tri, Value

# Methods of nn.Module that are not submodule calls even with arguments.
MODULE_METHODS = api.MODULE_ONLY_METHODS | {"forward", "to", "cuda", "cpu", "float", "double", "half", "zero_grad", "requires_grad_", "register_buffer"}
_MOVES = frozenset(("to", "cuda", "cpu", "train", "eval", "float", "double", "half", "requires_grad_"))
# nn.Module's own public methods (torch 2.13, `dir(torch.nn.Module)`): calling one is not
# calling a submodule. They hand back hooks' handles, modules, iterators or nothing.
NN_MODULE_METHODS = frozenset(
    "add_module apply bfloat16 buffers call_super_init children compile cpu cuda double eval extra_repr float forward "
    "get_buffer get_extra_state get_parameter get_submodule half ipu load_state_dict modules mtia named_buffers "
    "named_children named_modules named_parameters parameters register_backward_hook register_buffer register_forward_hook "
    "register_forward_pre_hook register_full_backward_hook register_full_backward_pre_hook register_load_state_dict_post_hook "
    "register_load_state_dict_pre_hook register_module register_parameter register_state_dict_post_hook "
    "register_state_dict_pre_hook requires_grad_ set_extra_state set_submodule share_memory state_dict to to_empty train "
    "type xpu zero_grad".split()
    # Its private ones, less the three that run forward (`_call_impl`, `_wrapped_call_impl`,
    # `_slow_forward`): `module._apply(fn)` converts the tensors, it computes nothing.
    + "_apply _get_backward_hooks _get_backward_pre_hooks _get_name _load_from_state_dict _maybe_warn_non_full_backward_hook "
    "_named_members _register_load_state_dict_pre_hook _register_state_dict_hook _replicate_for_data_parallel "
    "_save_to_state_dict".split()
)


def call_module_method(cx: Context, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    origin = f"`{short_code(node)}`"
    owned = recv.roots or cx.new_root(node, "params")
    func = node.func
    assert isinstance(func, cst.Attribute)
    if method == "state_dict":
        keep = keyword_is(node, "keep_vars", "True")
        element = Value(kind=Kind.TENSOR, grad=Tri.YES if keep else Tri.NO, leaf=keep, device=recv.device, roots=owned, via="state_dict", origin=origin)
        return Value(kind=Kind.STATE_DICT, grad=Tri.NO, roots=owned, element=element, via="state_dict", origin=origin)
    if method in ("parameters", "named_parameters"):
        # A module whose every parameter was frozen (`for p in m.parameters(): p.requires_grad = False`).
        grad = Tri.NO if recv.params_grad is Tri.NO else Tri.YES
        element = Value(kind=Kind.TENSOR, grad=grad, leaf=True, device=recv.device, roots=owned, origin=origin)
        if method == "named_parameters":
            element = Value(kind=Kind.TUPLE, items=(OTHER, element), element=element)
        return Value(kind=Kind.PARAMETER_LIST, grad=Tri.NO, roots=owned, element=element, origin=origin)
    if method in ("buffers", "named_buffers"):
        element = Value(kind=Kind.TENSOR, grad=Tri.NO, device=recv.device, roots=owned, origin=origin)
        return Value(kind=Kind.PARAMETER_LIST, grad=Tri.NO, roots=owned, element=element, origin=origin)
    if method in _MOVES:
        return _move(cx, node, recv, method, args, kwargs)
    if method == "zero_grad":
        zero_grad(cx, node, func.value)
        return NONE
    if method == "load_state_dict" and not keyword_is(node, "assign", "True"):
        # (`assign=True` puts the given tensors in place of the module's own: those are left as they were.)
        cx.emit(Write, node, target=Value(kind=Kind.TENSOR, roots=owned, grad=Tri.NO), target_node=func.value, op="load_state_dict", source=args[0] if args else None)
        return UNKNOWN
    if method == "from_pretrained":
        # `self.embedding.from_pretrained(weights)`: a classmethod that builds a new module
        # (nn.Embedding's, a Hugging Face model's), called through an instance; no forward pass.
        return Value(kind=Kind.MODULE, grad=Tri.NO, has_params=Tri.YES, roots=cx.new_root(node, "params"), fresh=True, origin=origin)
    # `cls._load(...)` in a classmethod calls the class's own method, as `self._load(...)` does.
    own_method = dotted(func.value) in ("self", "cls") and method in cx.class_methods
    if any(a.kind is Kind.NDARRAY for a in args) or method in ("predict", "predict_proba"):
        # `net.call(array)`: another backend's entry point, not a submodule; `reranker.predict(pairs)`:
        # a wrapper's inference entry point (sentence-transformers, skorch), whose result may be numpy.
        return UNKNOWN
    if method == "generate" and not own_method:
        # `model.generate(input_ids=...)`: a language model's sampling loop (Hugging Face's runs
        # under `no_grad`), which hands back token ids or an output record, not a forward pass's
        # activations; it stays where the module is.
        record = keyword_is(node, "return_dict_in_generate", "True")
        return Value(kind=Kind.UNKNOWN if record else Kind.TENSOR, grad=Tri.NO, device=recv.device, roots=cx.new_root(node), fresh=True, origin=origin)
    if method == "forward" or (not own_method and method not in NN_MODULE_METHODS and (args or kwargs)):
        # `model.encoder(x)`: a submodule is called like the module itself.
        return call_value(cx, node, func, recv.but(has_params=Tri.YES if recv.has_params is not Tri.NO else Tri.NO, op="", via=""), args, kwargs)
    if method in ("register_buffer", "register_parameter") and len(args) >= 2 and isinstance(node.args[0].value, cst.SimpleString):
        name = node.args[0].value.evaluated_value
        owner = dotted(func.value)
        if owner and isinstance(name, str):
            # A parameter is what was registered (`nn.Parameter(w, requires_grad=False)`, or
            # what a helper built: unknown), not a guess from its name.
            cx.state[f"{owner}.{name}"] = args[1].but(fresh=False, grad=Tri.NO) if method == "register_buffer" else args[1].but(fresh=False)
        return NONE
    return UNKNOWN


def _move(cx: Context, node: cst.Call, recv: Value, method: str, args: tuple[Value, ...], kwargs: dict[str, Value]) -> Value:
    """`model.to(device)`, `.cuda()`, `.eval()`: the module itself, now where it was moved."""
    device = recv.device
    if method == "cuda":
        device = Device.CUDA
    elif method == "cpu":
        device = Device.CPU
    elif method == "to" and args:
        device = cx.device_of(args[0]) if args[0].kind in (Kind.DEVICE, Kind.UNKNOWN) else device
    elif method == "to" and "device" in kwargs:
        device = cx.device_of(kwargs["device"])
    updated = recv.but(device=device)
    if method == "requires_grad_":
        # `nn.Conv2d(...).requires_grad_(False)`: a BN-fusion target whose weights are then
        # filled in place, legitimately.
        updated = updated.but(params_grad=Tri.NO if first_argument_false(node, "requires_grad") else Tri.YES)
    key = dotted(node.func.value) if isinstance(node.func, cst.Attribute) else ""
    if key and key in cx.state:
        cx.state[key] = updated
    return updated


def call_optimizer_method(cx: Context, node: cst.Call, recv: Value, method: str) -> Value:
    func = node.func
    assert isinstance(func, cst.Attribute)
    if method == "step":
        # An optimizer whose parameters are unknown may update any module's parameters.
        params = frozenset(r for r in recv.roots if not roots.is_optimizer_state(r))
        known = params and not any(roots.is_unknown_optimizer(r) for r in params)
        written = (params if known else frozenset((roots.ANY_PARAMS,))) | _state_of(recv, func.value)
        cx.emit(Write, node, target=Value(kind=Kind.TENSOR, roots=written, grad=Tri.YES, leaf=True), target_node=func.value, op="optimizer.step()", source=None)
        return NONE
    if method == "state_dict":
        # References to the live moment buffers, which step() updates in place.
        state = _state_of(recv, func.value)
        element = Value(kind=Kind.TENSOR, grad=Tri.NO, roots=state, via="state_dict")
        return Value(kind=Kind.STATE_DICT, grad=Tri.NO, roots=state, element=element, via="state_dict", origin=f"`{short_code(node)}`")
    if method == "zero_grad":
        zero_grad(cx, node, func.value)
        return NONE
    return UNKNOWN


def _state_of(optimizer: Value, node: cst.BaseExpression) -> frozenset[str]:
    """The moment buffers of this optimizer object: those of the one built here, or, for one
    handed in, those its name stands for."""
    own = frozenset(r for r in optimizer.roots if roots.is_optimizer_state(r))
    return own or frozenset((roots.optimizer_state(dotted(node)),))


def zero_grad(cx: Context, node: cst.Call, recv_node: cst.BaseExpression) -> None:
    """`zero_grad(set_to_none=False)` zeroes the gradient tensors in place (the default
    replaces them with None, leaving old references intact)."""
    if first_argument_false(node, "set_to_none"):
        cx.emit(Write, node, target=Value(kind=Kind.TENSOR, roots=frozenset((roots.ANY_GRAD,)), grad=Tri.NO), target_node=recv_node, op="zero_grad(set_to_none=False)", source=None)
