"""What a finding says must be true of the code it is on: messages that depend on what else
the function does."""

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
