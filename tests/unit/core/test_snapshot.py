"""StateNode: labels merge Node over NodeClaim, are computed once, and never leak into a changed copy."""

from __future__ import annotations

import dataclasses

from builders import node, node_claim
from karpy.core.snapshot import StateNode
from karpy.model import labels as wk


def test_labels_merge_node_over_claim_and_are_shared_between_calls() -> None:
    claim = dataclasses.replace(node_claim("c1"), labels={"team": "a", "tier": "claim"})
    state = StateNode("n1", dataclasses.replace(node("n1"), labels={"tier": "node"}), claim)
    assert state.labels == {"team": "a", "tier": "node"}
    assert state.labels is state.labels  # computed once


def test_a_replaced_state_node_computes_its_own_labels() -> None:
    claim = dataclasses.replace(node_claim("c1"), labels={"team": "a"})
    launched = StateNode("c1", None, claim)
    assert launched.labels == {"team": "a", wk.HOSTNAME: "c1"}
    registered = dataclasses.replace(launched, node=dataclasses.replace(node("n1"), labels={"zone": "z"}))
    assert registered.labels == {"team": "a", "zone": "z"}
    assert launched.labels == {"team": "a", wk.HOSTNAME: "c1"}


def test_the_cache_is_not_part_of_equality() -> None:
    claim = node_claim("c1")
    a, b = StateNode("c1", None, claim), StateNode("c1", None, claim)
    _ = a.labels
    assert a == b
