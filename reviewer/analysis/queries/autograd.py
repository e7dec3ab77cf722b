"""What autograd keeps and when it lets go: saved tensors still needed at a write, and the
`backward()` calls between two events."""

from __future__ import annotations

from review_copies.analysis.events import Backward, Bind, FunctionFlow, Saved, Write
from review_copies.analysis.queries.aliasing import name_of
from review_copies.analysis.roots import overlaps


def backpropagated(flow: FunctionFlow, roots: frozenset[str], after: int = -1) -> bool:
    return any(isinstance(e, Backward) and e.index > after and e.value.roots & roots for e in flow.events)


def backward_between(flow: FunctionFlow, start: int, end: int, saved: int | None = None) -> bool:
    """Did a backward run between the two events that freed the saved tensor `saved`?
    (A backward frees its own graph only; one of unknown provenance may have freed anything.)"""
    return any(
        isinstance(e, Backward) and start < e.index < end and (saved is None or not e.value.graph or saved in e.value.graph) for e in flow.events
    )


def backward_later(flow: FunctionFlow, after: int, saved: int) -> bool:
    """A backward after `after` that goes through the saved tensor (and so will fail)."""
    return any(isinstance(e, Backward) and e.index > after and saved in e.value.graph for e in flow.events)


def saved_before(flow: FunctionFlow, write: Write) -> Saved | None:
    """A tensor autograd saved before this write, still needed (no backward freed it)."""
    for saved in flow.saved:
        needed = saved.index < write.index and not flow.left_between(saved.arms, write.arms) and not backward_between(flow, saved.index, write.index, saved.index)
        if needed and overlaps(saved.roots, write.target.roots) and (saved.attached or saved.in_forward) and not _rebound(flow, saved, write):
            if write.op == "optimizer.step()" and not backward_later(flow, write.index, saved.index):
                continue  # stepping with a graph still alive is harmless unless it is backpropagated after
            return saved
    return None


def _rebound(flow: FunctionFlow, saved: Saved, write: Write) -> bool:
    """After the save the written name was bound to another tensor: where the save happened
    (one arm of an `if`), the write reaches that other tensor; merging the arms must not pair
    the save with the write."""
    name = name_of(write.target_node)
    return any(
        isinstance(e, Bind) and e.name == name and saved.index < e.index < write.index and not overlaps(e.value.roots, saved.roots) for e in flow.events
    )
