"""Label selectors (karpy.model.selectors)."""

from __future__ import annotations

import pytest

from karpy.model.selectors import LabelSelector, SelectorRequirement

LABELS = {"app": "web", "tier": "front"}


@pytest.mark.parametrize(
    ("expr", "matches"),
    [
        (SelectorRequirement("app", "In", ("web", "api")), True),
        (SelectorRequirement("app", "In", ("api",)), False),
        (SelectorRequirement("missing", "In", ("web",)), False),
        (SelectorRequirement("app", "In", ()), False),
        (SelectorRequirement("app", "NotIn", ("api",)), True),
        (SelectorRequirement("app", "NotIn", ("web",)), False),
        (SelectorRequirement("missing", "NotIn", ("web",)), True),
        (SelectorRequirement("app", "Exists"), True),
        (SelectorRequirement("missing", "Exists"), False),
        (SelectorRequirement("app", "DoesNotExist"), False),
        (SelectorRequirement("missing", "DoesNotExist"), True),
        (SelectorRequirement("app", "Gt", ("1",)), False),  # unknown operators never match
    ],
)
def test_match_expressions(expr: SelectorRequirement, matches: bool) -> None:
    assert expr.matches(LABELS) is matches
    assert LabelSelector(match_expressions=(expr,)).matches(LABELS) is matches


@pytest.mark.parametrize(
    ("match_labels", "matches"),
    [
        ({"app": "web"}, True),
        ({"app": "web", "tier": "front"}, True),
        ({"app": "api"}, False),
        ({"app": "web", "zone": "a"}, False),
        ({}, True),
    ],
)
def test_match_labels(match_labels: dict[str, str], matches: bool) -> None:
    assert LabelSelector.from_labels(match_labels).matches(LABELS) is matches


def test_labels_and_expressions_are_anded() -> None:
    selector = LabelSelector((("app", "web"),), (SelectorRequirement("tier", "NotIn", ("front",)),))
    assert not selector.matches(LABELS)
    assert selector.matches({"app": "web", "tier": "back"})


def test_empty_selector_matches_everything() -> None:
    selector = LabelSelector()
    assert selector.is_empty()
    assert selector.matches({})
    assert selector.matches(LABELS)
    assert str(selector) == "<all>"


def test_from_labels_sorted() -> None:
    assert LabelSelector.from_labels({"b": "2", "a": "1"}).match_labels == (("a", "1"), ("b", "2"))


def test_with_labels_adds_terms() -> None:
    selector = LabelSelector.from_labels({"app": "web"}).with_labels({"tier": "front"})
    assert selector.match_labels == (("app", "web"), ("tier", "front"))
    assert selector.matches(LABELS)
    assert not selector.matches({"app": "web", "tier": "back"})


def test_with_labels_conflicting_key_becomes_unsatisfiable_and() -> None:
    selector = LabelSelector.from_labels({"app": "web"}).with_labels({"app": "api"})
    assert not selector.matches({"app": "web"})
    assert not selector.matches({"app": "api"})


def test_with_labels_keeps_expressions_and_does_not_mutate() -> None:
    base = LabelSelector(match_expressions=(SelectorRequirement("app", "Exists"),))
    extended = base.with_labels({"tier": "front"})
    assert base.match_labels == ()
    assert extended.match_expressions == base.match_expressions
    assert extended.matches(LABELS)
    assert not extended.matches({"tier": "front"})


def test_with_no_labels_is_same_selector() -> None:
    base = LabelSelector.from_labels({"app": "web"})
    assert base.with_labels({}) == base


def test_str() -> None:
    selector = LabelSelector((("app", "web"),), (SelectorRequirement("tier", "In", ("a",)),))
    assert str(selector) == "app=web,tier In ['a']"
