"""What a finding says, and whether there is one, depends on what else the code around it does:
its callers, the rest of its loop."""

from __future__ import annotations

import textwrap

from review_copies.review.engine import FileJob, review_file

CAPTURE = """
import torch


def capture(model, inputs, iterations: int):
    outputs = []
    for i in range(iterations):
        output = model(inputs[i])
        outputs.append(output)
        {backward}
    return outputs
"""


def _messages(source: str, rule: str) -> list[str]:
    text = textwrap.dedent(source).lstrip("\n")
    return [f.message for f in review_file(FileJob("m.py", text, None, (rule,))).findings]


def test_a_stored_output_whose_backward_already_ran_is_said_to_keep_only_nodes() -> None:
    # backward() frees the saved activations of the graph it runs through: what the list keeps
    # is the graph's nodes, and the message must not claim the whole graph.
    [freed] = _messages(CAPTURE.format(backward="output.backward(torch.ones_like(output))"), "RC252")
    assert "graph nodes alive" in freed and "line 9" in freed and "whole graph" not in freed
    [kept] = _messages(CAPTURE.format(backward="output.backward(torch.ones_like(output), retain_graph=True)"), "RC252")
    assert "whole graph alive" in kept


CLIP = """
import torch
from torch import nn


class Attention(nn.Module):
    def clip(self, eta: float):
        w = self.linear_kv.weight
        {call}

    def _clip_kv(self, weight: torch.Tensor, eta: float) -> torch.Tensor:
        halves = weight.view(2, -1, weight.shape[-1])
        k = halves[0]
        k.mul_(eta)
        return torch.cat([k, halves[1]], dim=0)
"""


def test_a_helper_whose_caller_copies_the_result_back_into_what_it_passed_is_not_reported() -> None:
    # Megatron's qk-clip: `w.data.copy_(self._clip_kv(w.data, eta))` writes the result into
    # the very tensor the helper wrote into, so the write changes nothing the caller keeps.
    assert _messages(CLIP.format(call="w.data.copy_(self._clip_kv(w.data, eta))"), "RC102") == []
    # Copied into another tensor, the caller's weight is changed behind its back.
    [changed] = _messages(CLIP.format(call="self.clipped.copy_(self._clip_kv(w.data, eta))"), "RC102")
    assert "`weight`" in changed
