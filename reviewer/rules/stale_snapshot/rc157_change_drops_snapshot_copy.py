"""RC157 change-drops-snapshot-copy."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.events import Bind, Event, FunctionFlow, Return, Store, Write
from review_copies.analysis.guesses import SNAPSHOT_NAME
from review_copies.analysis.syntax import dotted as dotted_name
from review_copies.analysis.syntax import names_in, short_code
from review_copies.analysis.values import Kind, Value
from review_copies.model.findings import Category, Severity
from review_copies.rules._common import dropped_at, dropped_words, restore, written_through
from review_copies.rules.base import Hit, Invalid, Rule, Valid

_COPIES = (".clone()", ".copy()", "copy.deepcopy(...)", "deepcopy(...)")
# Copies of any Python object: dropping one says nothing of tensors by itself.
_GENERIC_COPIES = (".copy()", "copy.deepcopy(...)", "deepcopy(...)")
_TENSOR_STATE = (Kind.TENSOR, Kind.PARAMETER_LIST, Kind.STATE_DICT, Kind.MODULE, Kind.OPTIMIZER, Kind.NDARRAY)


class ChangeDropsSnapshotCopy(Rule):
    """
    ## What it does
    Finds a change that takes the copy (`.clone()`, `.copy()`, `copy.deepcopy(...)`) off
    a value that is kept while its source changes: appended to a list or stored in a dict
    or on `self`; or bound to a name when the source is then written in place, or to a
    name that reads as a snapshot (`best`, `prev`, `init`, `saved`...) which is kept. The
    value must be state that lives on (an attribute, an argument, a `state_dict()`).

    ## Why is this bad?
    Without the copy, what is kept is a reference to the live tensor: every later in-place
    update (an optimizer step, an in-place ReLU, the next iteration's fill) changes the
    "snapshot" too (fairseq's wav2vec2 kept `unmasked_features = features` and masked
    `features` in place; captum saved activations an in-place ReLU then overwrote). The
    base version's copy is the evidence that the value changes later.

    ## Example
    ```python
    # before the change: trajectory.append(candidates.clone())
    trajectory.append(candidates)
    ```

    ## Use instead
    ```python
    trajectory.append(candidates.clone())
    ```

    ## Fix safety
    Safe: the fix is the statement as the base version wrote it; only the copy differs.
    """

    code = "RC157"
    name = "change-drops-snapshot-copy"
    category = Category.STALE_SNAPSHOT
    severity = Severity.WARNING
    prefilter = ("torch",)
    recipes = ("snapshot",)
    follows_change = True

    VALID = (
        Valid(
            """
            import torch
            class Neuron(torch.nn.Module):
                def forward(self, x_seq):
                    if self.backend == "torch":
                        v_seq = torch.cumsum(x_seq, 0)
                        if self.store_v_seq:
                            self.v_seq = v_seq
                            self.v = v_seq[-1]
                        else:
                            self.v = v_seq[-1].clone()
                        return v_seq > 1
                    return x_seq > 1
            """,
            "the base version had `self.v = v_seq[-1]` already, beside its `.clone()` arm: the change moved both under a new branch and dropped nothing (spikingjelly's neurons)",
            before="""
            import torch
            class Neuron(torch.nn.Module):
                def forward(self, x_seq):
                    v_seq = torch.cumsum(x_seq, 0)
                    if self.store_v_seq:
                        self.v_seq = v_seq
                        self.v = v_seq[-1]
                    else:
                        self.v = v_seq[-1].clone()
                    return v_seq > 1
            """,
        ),
        Valid(
            """
            import torch
            def run(steps, x):
                out = []
                for _ in range(steps):
                    out.append(x * 2)
                return out
            """,
            "`x * 2` is a new tensor every time: the copy of it bought nothing",
            before="""
            import torch
            def run(steps, x):
                out = []
                for _ in range(steps):
                    out.append((x * 2).clone())
                return out
            """,
        ),
        Valid(
            """
            import copy
            import torch
            def consolidate(contexts):
                plan = contexts[0].plan
                for ctx in contexts[1:]:
                    for key, val in ctx.plan.plan.items():
                        plan.plan[key] = val
                return plan
            """,
            "a deep copy of sharding specs, not known to hold tensors, that nothing here changes: dropping it is no evidence",
            before="""
            import copy
            import torch
            def consolidate(contexts):
                plan = copy.deepcopy(contexts[0].plan)
                for ctx in contexts[1:]:
                    for key, val in ctx.plan.plan.items():
                        plan.plan[key] = copy.deepcopy(val)
                return plan
            """,
        ),
        Valid(
            """
            import torch
            def unpack(params: torch.Tensor, dims: list[tuple[int, int]]):
                layer_params = []
                for in_dim, out_dim in dims:
                    this, params = params[:, : (in_dim + 1) * out_dim], params[:, (in_dim + 1) * out_dim :]
                    bias, weight = this[:, :out_dim], this[:, out_dim:]
                    layer_params.append(weight.view(weight.size(0), in_dim + 1, out_dim))
                    layer_params.append(bias)
                return layer_params
            """,
            "views of the argument gathered into the list it returns, and nothing here writes in place: the copies kept nothing from a change",
            before="""
            import torch
            def unpack(params: torch.Tensor, dims: list[tuple[int, int]]):
                layer_params = []
                for in_dim, out_dim in dims:
                    this, params = params[:, : (in_dim + 1) * out_dim], params[:, (in_dim + 1) * out_dim :]
                    bias, weight = this[:, :out_dim], this[:, out_dim:]
                    layer_params.append(weight.view(weight.size(0), in_dim + 1, out_dim).clone())
                    layer_params.append(bias.clone())
                return layer_params
            """,
        ),
    )
    INVALID = (
        Invalid(
            """
            import torch
            def optimize(candidates, opt, steps):
                trajectory = []
                for _ in range(steps):
                    opt.step()
                    trajectory.append(candidates)
                return trajectory
            """,
            line=6,
            before="""
            import torch
            def optimize(candidates, opt, steps):
                trajectory = []
                for _ in range(steps):
                    opt.step()
                    trajectory.append(candidates.clone())
                return trajectory
            """,
            fix="""
            import torch
            def optimize(candidates, opt, steps):
                trajectory = []
                for _ in range(steps):
                    opt.step()
                    trajectory.append(candidates.clone())
                return trajectory
            """,
            note="botorch's gen_candidates, simplified",
        ),
        Invalid(
            """
            import torch
            def features_pair(self, features, mask):
                unmasked_features = features
                features[mask] = self.mask_emb
                return features, unmasked_features
            """,
            line=3,
            before="""
            import torch
            def features_pair(self, features, mask):
                unmasked_features = features.clone()
                features[mask] = self.mask_emb
                return features, unmasked_features
            """,
            fix="""
            import torch
            def features_pair(self, features, mask):
                unmasked_features = features.clone()
                features[mask] = self.mask_emb
                return features, unmasked_features
            """,
            note="fairseq's wav2vec2, simplified",
        ),
    )

    def check(self, flow: FunctionFlow) -> Iterator[Hit]:
        if flow.change is None:
            return
        reported: set[int] = set()
        for event in flow.events:
            if event.line in reported or not isinstance(event, (Store, Bind, Return)):
                continue
            dropped = dropped_at(flow, event.line, _COPIES)
            value = _value_node(event)
            if not dropped or value is None or not _live_state(value) or not _kept(flow, event):
                continue
            if all(d.what in _GENERIC_COPIES for d in dropped) and not _holds_tensors(flow.value(value)) and not _source_written(flow, value, event.line):
                continue  # a deep copy of something not known to hold tensors, whose source nothing here changes: no evidence of a change
            if _handed_back_unchanged(flow, event):
                continue  # views of what the caller passed, gathered into a list it gets back: nothing here changes them
            reported.add(event.line)
            message = (
                f"This change drops {dropped_words(dropped)} from `{dropped[0].before}`: what is kept is now `{short_code(value)}` "
                "itself, not a copy, so every later in-place update of it (an optimizer step, an in-place op, the next fill of "
                "the buffer) changes the kept value too. Keep the copy."
            )
            yield Hit(event.node, message, restore(event.stmt, dropped))


def _handed_back_unchanged(flow: FunctionFlow, event: Event) -> bool:
    """ffjord's `_unpack_params(params)`: `layer_params.append(weight)`, `weight` a view of the
    argument, into a local list the function returns, and nothing in the function writes
    into anything in place after it (no step, no fill): the copy kept nothing from a change
    the function makes, and whether the caller changes its own tensor later is its own."""
    if not isinstance(event, Store) or "." in event.container or event.container not in _returned_names(flow):
        return False
    held = event.value.roots
    if not held or not all(roots.argument_name(r) is not None for r in held):
        return False
    return not any(isinstance(e, Write) for e in flow.after(event))


def _returned_names(flow: FunctionFlow) -> set[str]:
    return {e.value_node.value for e in flow.of(Return) if isinstance(e.value_node, cst.Name)}


def _value_node(event: Event) -> cst.BaseExpression | None:
    if isinstance(event, Store):
        return event.value_node
    if isinstance(event, Bind):
        return event.expr
    if isinstance(event, Return):
        return event.value_node
    return None


def _holds_tensors(value: Value) -> bool:
    """Tensors, or state made of them (a module, a state_dict, a container of tensors)."""
    if value.kind in _TENSOR_STATE:
        return True
    return value.kind in (Kind.LIST, Kind.DICT, Kind.TUPLE) and value.element is not None and value.element.kind in _TENSOR_STATE


def _source_written(flow: FunctionFlow, node: cst.BaseExpression, line: int) -> bool:
    """The kept value's source is written in place later in the function."""
    source = dotted_name(node.value if isinstance(node, cst.Subscript) else node)
    return bool(source) and written_through(flow, source, line) is not None


def _live_state(node: cst.BaseExpression) -> bool:
    """A name, attribute or item (state that lives on), or a `state_dict()`/`parameters()`."""
    if isinstance(node, (cst.Name, cst.Attribute, cst.Subscript)):
        return True
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value in ("state_dict", "parameters", "named_parameters", "buffers", "named_buffers")
    return False


def _kept(flow: FunctionFlow, event: Event) -> bool:
    """Kept past the statement while its source changes: stored in a container or on an
    object; or bound to a name whose source is written in place later in the function, or
    whose name reads as a snapshot and which is returned or stored as it is."""
    if isinstance(event, Store):
        return True
    if isinstance(event, Return):
        return False  # returning live state is the caller's business, not a snapshot
    assert isinstance(event, Bind) and event.expr is not None
    source = dotted_name(event.expr.value if isinstance(event.expr, cst.Subscript) else event.expr)
    if source and written_through(flow, source, event.line) is not None:
        return True
    if not SNAPSHOT_NAME.search(event.name):
        return False
    return any(isinstance(e, (Store, Return)) and e.value_node is not None and event.name in names_in(e.value_node) for e in flow.later(event))
