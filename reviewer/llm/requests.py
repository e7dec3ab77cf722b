"""Split the tensor hunks into requests under the token limits, and say what did not fit.

Hunks go in diff order (path, then line), whole: a hunk is never cut, so the model
always sees the enclosing function it is asked about. A request holds hunks until the
next would push it past `request_tokens`; the review stops adding requests before the
total passes `budget_tokens`. Later, smaller hunks may still fit after a large one did
not, so as much of the change as the budget allows is reviewed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from review_copies.llm.prompts import FileBlock
from review_copies.llm.tokens import estimate_tokens
from review_copies.model.findings import Finding
from review_copies.review.hunks import TensorHunk

OVER_REQUEST = "larger than one request may be (llm-request-tokens = {limit})"
OVER_BUDGET = "over the review's token budget (llm-budget-tokens = {limit})"


@dataclass(frozen=True)
class LLMRequest:
    """One call to the model: its user message and what it shows."""

    index: int
    blocks: tuple[FileBlock, ...]
    user: str
    tokens: int  # estimated, system prompt included

    @property
    def hunks(self) -> tuple[TensorHunk, ...]:
        return tuple(h for b in self.blocks for h in b.hunks)


@dataclass
class RequestPlan:
    requests: list[LLMRequest] = field(default_factory=list)
    left_out: list[tuple[TensorHunk, str]] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.requests)


def blocks_for(hunks: Sequence[TensorHunk], static: Sequence[Finding]) -> tuple[FileBlock, ...]:
    """Group consecutive hunks of one file, each file with the static findings inside its hunks."""
    grouped: list[list[TensorHunk]] = []
    for hunk in hunks:
        if grouped and grouped[-1][0].path == hunk.path:
            grouped[-1].append(hunk)
        else:
            grouped.append([hunk])
    out = []
    for group in grouped:
        path = group[0].path
        inside = tuple(f for f in static if f.path == path and any(h.start <= f.line <= h.end for h in group))
        out.append(FileBlock(path=path, hunks=tuple(group), static=inside))
    return tuple(out)


def plan_requests(
    hunks: Sequence[TensorHunk],
    static: Sequence[Finding],
    render: Callable[[Sequence[FileBlock]], str],
    system_tokens: int,
    request_tokens: int,
    budget_tokens: int,
) -> RequestPlan:
    plan = RequestPlan()
    current: list[TensorHunk] = []
    current_cost = 0
    spent = 0

    def cost(group: Sequence[TensorHunk]) -> tuple[str, int]:
        user = render(blocks_for(group, static))
        return user, system_tokens + estimate_tokens(user)

    def close() -> None:
        nonlocal current, current_cost, spent
        if current:
            user, tokens = cost(current)
            plan.requests.append(LLMRequest(len(plan.requests), blocks_for(current, static), user, tokens))
            spent += tokens
        current, current_cost = [], 0

    for hunk in sorted(hunks, key=lambda h: (h.path, h.start, h.end)):
        _, together = cost([*current, hunk])
        if together <= request_tokens and spent + together <= budget_tokens:
            current.append(hunk)
            current_cost = together
            continue
        _, alone = cost([hunk])
        if alone > request_tokens:
            plan.left_out.append((hunk, OVER_REQUEST.format(limit=request_tokens)))
        elif current and spent + current_cost + alone <= budget_tokens:
            close()
            current, current_cost = [hunk], alone
        else:
            plan.left_out.append((hunk, OVER_BUDGET.format(limit=budget_tokens)))
    close()
    return plan
