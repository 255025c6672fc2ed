"""Deletions reach the cluster state by key: a DELETED event or a relist's
tombstone removes its (kind, namespace, name) whatever the raw object looks like, an update that
no longer validates drops the previous good copy, listeners hear of both, and every index the
cluster keeps (sorted names, journals, providerID joins, bound pods) stays as after a deletion."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy.api import encode
from karpy.model import labels as wk
from karpy.model.objects import Node, NodeClaim, NodeClassRef, NodePool
from karpy.ports import WatchEvent
from karpy.state.cluster import Cluster
from karpy.state.events import ADDED, DELETED, MODIFIED, ObjectEvent
from karpy.state.feed import Feed


def raw_pool(name: str = "p1", *, consolidate_after: str = "Never", rv: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "resourceVersion": rv, "uid": f"uid-{name}"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": consolidate_after},
        },
    }


def raw_claim(name: str, *, provider_id: str = "", node_name: str = "", rv: str = "1") -> dict[str, Any]:
    claim = NodeClaim(
        name=name,
        node_pool="p1",
        labels={wk.NODEPOOL: "p1"},
        node_class_ref=NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default"),
        provider_id=provider_id,
        node_name=node_name,
    )
    raw = encode.node_claim(claim)
    raw["metadata"].update(resourceVersion=rv, uid=f"uid-{name}")
    return raw


def raw_node(name: str, provider_id: str, *, rv: str = "1") -> dict[str, Any]:
    raw = encode.node(Node(name=name, provider_id=provider_id))
    raw["metadata"].update(resourceVersion=rv, uid=f"uid-{name}")
    return raw


def raw_pod(name: str, *, node_name: str = "", rv: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": rv, "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def unparseable(raw: dict[str, Any]) -> dict[str, Any]:
    """The same object with a spec that does not validate (a field of the wrong type)."""
    out = copy.deepcopy(raw)
    out["spec"] = {"containers": "not a list", "requirements": 7, "providerID": ["x"]}
    return out


class World:
    def __init__(self) -> None:
        self.cluster = Cluster(lambda _pool, _nc: ())
        self.problems: list[tuple[str, str]] = []
        self.feed = Feed(
            self.cluster, on_problem=lambda text, event: self.problems.append((event.type, text))
        )
        self.heard: list[tuple[str, str, str]] = []
        self.feed.listeners.append(
            lambda e: self.heard.append((e.type, type(e.obj).__name__, getattr(e.obj, "name", "")))
        )

    def __call__(self, type_: str, raw: dict[str, Any]) -> None:
        self.feed(WatchEvent(type_, raw["kind"], raw))


def test_a_nodepool_made_invalid_then_deleted_leaves_the_state() -> None:
    world = World()
    world(ADDED, raw_pool())
    assert set(world.cluster.node_pools) == {"p1"}
    invalid = raw_pool(consolidate_after="soon", rv="2")
    world(MODIFIED, invalid)
    assert world.cluster.node_pools == {}  # the previous good copy is dropped with the invalid update
    assert [t for t, _ in world.problems] == [MODIFIED] and "soon" in world.problems[0][1]
    world(DELETED, raw_pool(consolidate_after="soon", rv="3"))
    assert world.cluster.node_pools == {}
    assert [t for t, _ in world.problems] == [MODIFIED]  # a deletion is not reported as a problem
    assert world.heard == [(ADDED, "NodePool", "p1"), (DELETED, "NodePool", "p1")]
    world(ADDED, raw_pool(rv="4"))  # valid again: back
    assert set(world.cluster.node_pools) == {"p1"}


def test_a_deletion_whose_object_no_longer_parses_removes_the_key() -> None:
    """The watch missed the invalid update (or delivered a tombstone): the DELETED object itself
    does not validate; the state's copy goes anyway and listeners get it as DELETED."""
    world = World()
    world(ADDED, raw_pool())
    pool_before = world.cluster.node_pools["p1"]
    world(DELETED, raw_pool(consolidate_after="soon", rv="2"))
    assert world.cluster.node_pools == {}
    assert world.problems == []
    assert world.heard[-1] == (DELETED, "NodePool", "p1")

    seen: list[ObjectEvent] = []
    world.feed.listeners.append(seen.append)
    world(ADDED, raw_pod("web", rv="5"))
    world(DELETED, unparseable(raw_pod("web", rv="5")))  # a relist tombstone of what no longer parses
    assert world.cluster.pods == {} and list(world.cluster.unbound_pods()) == []
    assert [(e.type, e.obj.key) for e in seen] == [(ADDED, "default/web"), (DELETED, "default/web")]  # type: ignore[union-attr]
    assert isinstance(pool_before, NodePool)


def test_a_tombstone_of_an_unknown_key_that_does_not_parse_is_ignored() -> None:
    world = World()
    world(DELETED, unparseable(raw_claim("gone")))
    assert world.heard == [] and world.problems == [] and world.cluster.version == 0


@pytest.mark.parametrize("how", ["deleted", "invalid-update"])
def test_indexes_stay_consistent_after_a_removal_by_key(how: str) -> None:
    """After a removal by key the cluster answers as one that never held the object."""
    world = World()
    world(ADDED, raw_claim("c1", provider_id="kwok://n1", node_name="n1"))
    world(ADDED, raw_claim("c2"))
    world(ADDED, raw_node("n1", "kwok://n1"))
    world(ADDED, raw_pod("web", node_name="n1"))
    cluster = world.cluster
    names_before = cluster.claim_names()
    assert names_before == ("c1", "c2")
    assert [s.name for s in cluster.state_nodes()] == ["n1", "c2"]
    claims_version = cluster.store_version("claims")
    pods_version = cluster.store_version("pods")
    version = cluster.version

    def gone(raw: dict[str, Any]) -> None:
        if how == "deleted":
            world(DELETED, unparseable(raw))
        else:
            bad = unparseable(raw)
            bad["metadata"]["resourceVersion"] = "9"
            world(MODIFIED, bad)

    gone(raw_claim("c1", provider_id="kwok://n1", node_name="n1"))
    gone(raw_pod("web", node_name="n1"))

    assert cluster.claim_names() == ("c2",) and cluster.claim_names() is not names_before
    assert cluster.changed_since("claims", claims_version) == ["c1"]
    assert cluster.changed_since("pods", pods_version) == ["default/web"]
    assert cluster.version > version
    assert cluster.claim_for_provider("kwok://n1") is None
    assert cluster.pods_on("n1") == []

    fresh = Cluster(lambda _pool, _nc: ())
    for obj in (cluster.claims["c2"], cluster.nodes["n1"]):
        fresh.apply(ObjectEvent(ADDED, obj))
    assert cluster.state_nodes() == fresh.state_nodes()
    assert [s.claim for s in cluster.state_nodes()] == [None, cluster.claims["c2"]]  # n1 unjoined now
    assert cluster.snapshot(0.0).pods == () and cluster.snapshot(0.0).unbound == ()
    assert [e[0] for e in world.heard[-2:]] == [DELETED, DELETED]


def test_remove_by_key_for_every_kind() -> None:
    world = World()
    raws = [
        raw_pool(),
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "ds", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"a": "b"}}},
        raw_node("n1", "kwok://n1"),
    ]
    for raw in raws:
        world(ADDED, raw)
    cluster = world.cluster
    assert all(
        (cluster.node_pools, cluster.node_classes, cluster.daemonsets, cluster.pdbs, cluster.namespaces)
    )
    assert all(
        world.cluster.stored(r["kind"], r["metadata"].get("namespace", ""), r["metadata"]["name"])
        for r in raws
    )
    for raw in raws:
        broken = copy.deepcopy(raw)
        broken["spec"] = "not an object"
        broken["metadata"]["labels"] = "nor this"
        world(DELETED, broken)
    assert not (cluster.node_pools or cluster.node_classes or cluster.daemonsets or cluster.pdbs)
    assert not (cluster.namespaces or cluster.nodes)
    assert [t for t, *_ in world.heard] == [ADDED] * len(raws) + [DELETED] * len(raws)
    assert cluster.remove("NodePool", "", "p1") is None  # nothing left: no change
    assert cluster.remove("Secret", "default", "x") is None


def test_the_same_version_with_another_uid_is_not_taken_for_a_redelivery() -> None:
    """After an API server's state was reset, a re-created object may carry the version of the
    one the state holds: the uid tells them apart."""
    world = World()
    world(ADDED, raw_pool(rv="3"))
    world(ADDED, raw_pool(rv="3"))  # a re-delivery: dropped
    assert len(world.heard) == 1
    other = raw_pool(rv="3", consolidate_after="30s")
    other["metadata"]["uid"] = "uid-p1-again"
    world(MODIFIED, other)
    assert len(world.heard) == 2
    assert world.cluster.node_pools["p1"].disruption.consolidate_after == 30.0
