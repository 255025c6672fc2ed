"""Upstream's consolidation state: which applied watch events change it, and its staleness."""

from __future__ import annotations

from typing import Any

import pytest

import builders
from karpy.controllers.consolidation_state import STALE_SECONDS, ConsolidationState
from karpy.model import labels as wk
from karpy.model.objects import Condition
from karpy.state.cluster import Cluster
from karpy.state.events import ADDED, DELETED, MODIFIED, ObjectEvent


class _Feed:
    """Apply an event to the cluster state, then ask the consolidation state (the wiring's order)."""

    def __init__(self) -> None:
        self.cluster = Cluster(lambda _pool, _nc: ())
        self.state = ConsolidationState(self.cluster)

    def __call__(self, kind: str, obj: Any) -> bool:
        event = ObjectEvent(kind, obj)
        self.cluster.apply(event)
        return self.state.changes(event)


def test_pods_change_it_when_bound_anew_or_deleted() -> None:
    feed = _Feed()
    pending = builders.pod("web")
    assert not feed(ADDED, pending)  # a new pending pod
    bound = builders.replace(pending, node_name="n1", phase="Running")
    assert feed(MODIFIED, bound)  # a new binding
    assert not feed(MODIFIED, builders.replace(bound, ready=False))  # readiness
    assert not feed(MODIFIED, builders.replace(bound, deleting=True))  # terminating
    assert not feed(MODIFIED, builders.replace(bound, annotations={wk.DO_NOT_DISRUPT: "true"}))
    assert feed(MODIFIED, builders.replace(bound, node_name="n2"))  # bound elsewhere (a reused name)
    assert not feed(MODIFIED, builders.replace(bound, node_name="n2", phase="Succeeded"))  # completion
    assert feed(DELETED, bound)  # any deletion
    assert feed(DELETED, builders.pod("never-bound"))


def test_a_completed_pod_bound_again_is_a_new_binding() -> None:
    feed = _Feed()
    pod = builders.pod("job", node_name="n1")
    assert feed(ADDED, pod)
    assert not feed(MODIFIED, builders.replace(pod, phase="Failed"))
    assert feed(MODIFIED, builders.replace(pod, phase="Running"))  # (upstream forgot the binding)


def _claim(**changes: Any) -> Any:
    fields: dict[str, Any] = {"provider_id": "p-1", "node_name": "n1", "initialized": False, **changes}
    return builders.node_claim("c1", **fields)


def test_node_claims_change_it_when_their_state_node_comes_goes_initializes_or_deletes() -> None:
    feed = _Feed()
    assert not feed(ADDED, _claim(provider_id=""))  # not launched: no StateNode yet
    assert feed(MODIFIED, _claim())  # launched: a new StateNode
    consolidatable = Condition("Consolidatable", "True")
    assert not feed(MODIFIED, _claim(conditions=(consolidatable,)))  # another condition
    assert not feed(MODIFIED, _claim(labels={"team": "a"}, last_pod_event=5.0))  # labels, status
    assert not feed(ADDED, builders.node("n1", provider_id="p-1"))  # its Node joins it: no change
    assert feed(MODIFIED, _claim(initialized=True))
    assert not feed(MODIFIED, _claim(initialized=True, taints=()))
    assert feed(MODIFIED, _claim(initialized=True, deleting=True))  # a deletion timestamp
    assert feed(DELETED, _claim(initialized=True, deleting=True))  # half of the StateNode goes
    assert feed(DELETED, builders.node("n1", provider_id="p-1"))  # and the rest
    assert not feed(DELETED, _claim(provider_id=""))  # never launched: nothing to clean up


def test_the_in_memory_deletion_mark_is_no_change_nor_the_deletion_that_follows_it() -> None:
    feed = _Feed()
    assert feed(ADDED, _claim(initialized=True))
    feed.cluster.mark_for_deletion("c1")  # upstream sets it in place: no comparison sees it change
    assert not feed(MODIFIED, _claim(initialized=True, deleting=True))
    feed.cluster.unmark_for_deletion("c1")
    assert not feed(MODIFIED, _claim(initialized=True, deleting=True, labels={"x": "y"}))


def test_nodes_without_a_claim_are_initialized_state_nodes_of_their_own() -> None:
    feed = _Feed()
    node = builders.node("plain", provider_id="p-9")
    assert feed(ADDED, node)
    assert not feed(MODIFIED, builders.replace(node, labels={"team": "a"}))
    assert not feed(MODIFIED, builders.replace(node, ready=False))
    assert feed(MODIFIED, builders.replace(node, deleting=True))
    assert feed(DELETED, node)
    nameless = builders.node("no-provider-id")  # keyed by its name, as upstream does
    assert feed(ADDED, nameless)
    assert not feed(MODIFIED, builders.replace(nameless, labels={"team": "b"}))


def test_the_node_label_initializes_a_joined_state_node() -> None:
    feed = _Feed()
    assert feed(ADDED, _claim())
    node = builders.node("n1", provider_id="p-1")
    assert not feed(ADDED, node)
    assert feed(MODIFIED, builders.replace(node, labels={**node.labels, wk.INITIALIZED: "true"}))


def test_node_pools_change_it_when_created_or_their_spec_changes() -> None:
    feed = _Feed()
    pool = builders.node_pool("general")
    assert feed(ADDED, pool)
    assert not feed(MODIFIED, builders.replace(pool))  # a status write: the same model object
    assert feed(MODIFIED, builders.replace(pool, weight=10))
    assert not feed(DELETED, pool)  # upstream's informer ignores deletions


@pytest.mark.parametrize(
    "obj",
    [
        builders.daemonset(),
        builders.pdb("web", match_labels={"app": "web"}),
    ],
    ids=["daemonset", "pdb"],
)
def test_other_kinds_never_change_it(obj: Any) -> None:
    feed = _Feed()
    assert not feed(ADDED, obj)
    assert not feed(DELETED, obj)


def test_the_state_goes_stale_five_minutes_after_it_last_changed() -> None:
    state = _Feed().state
    assert state.at(100.0) == 100.0  # never changed: the first read starts it
    assert state.at(100.0 + STALE_SECONDS - 1) == 100.0
    state.mark(150.0)
    assert state.at(150.0 + STALE_SECONDS - 1) == 150.0
    assert state.at(150.0 + STALE_SECONDS) == 150.0 + STALE_SECONDS  # moved to now
    assert state.at(160.0 + STALE_SECONDS) == 150.0 + STALE_SECONDS
