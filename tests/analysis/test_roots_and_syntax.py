"""The two small vocabularies every part of the analysis speaks: storage roots and the
one set of libcst node questions."""

from __future__ import annotations

import libcst as cst

from review_copies.analysis import roots
from review_copies.analysis.syntax import bound_names, code_of, dotted, keyword_is, names_in, short_code


def test_wildcard_roots_reach_every_root_of_their_kind() -> None:
    assert roots.overlaps({roots.ANY_PARAMS}, {roots.parameters("model")})
    assert roots.overlaps({roots.member(roots.parameters("model"), "fc")}, {roots.ANY_PARAMS})
    assert roots.overlaps({roots.ANY_GRAD}, {roots.gradients(roots.argument("w"))})
    assert not roots.overlaps({roots.ANY_GRAD}, {roots.parameters("model")})
    assert not roots.overlaps({roots.argument("x")}, {roots.argument("y")})


def test_root_predicates_read_what_the_constructors_build() -> None:
    entry = roots.entry(roots.argument("batch"), "'image'")
    assert roots.is_argument(entry, "batch") and not roots.is_argument(entry, "b")
    assert roots.argument_name(roots.argument("x")) == "x" and roots.argument_name(roots.parameters("m")) is None
    assert roots.in_module(roots.member(roots.parameters("model"), "fc"), "model")
    assert roots.is_unknown_optimizer(roots.unknown_optimizer("opt")) and roots.is_parameters(roots.unknown_optimizer("opt"))


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def test_dotted_names_only_for_names_and_attribute_chains() -> None:
    assert dotted(_expr("a.b.c")) == "a.b.c"
    assert dotted(_expr("f().x")) == ""
    assert dotted(_expr("a[0].b")) == ""


def test_names_in_a_node_with_and_without_attributes_and_lambdas() -> None:
    node = _expr("f(self.buf, lambda y: y + z)")
    assert names_in(node) == {"f", "self", "buf", "y", "z"}  # an attribute's own name is a Name node too
    assert names_in(node, attributes=True) >= {"self.buf", "f", "z"}
    assert "y" not in names_in(node, into_lambdas=False) and "z" not in names_in(node, into_lambdas=False)
    assert list(bound_names(cst.parse_statement("a, (b, self.c) = t").body[0].targets[0].target)) == ["a", "b", "self.c"]


def test_source_text_and_keywords() -> None:
    call = _expr("torch.zeros(3, requires_grad=True, out=None)")
    assert isinstance(call, cst.Call)
    assert code_of(call) == "torch.zeros(3, requires_grad=True, out=None)"
    assert short_code(_expr("x" * 80), limit=10) == "xxxxxxx..."
    assert keyword_is(call, "requires_grad", "True") and not keyword_is(call, "out", "True")
