"""Termination: drain order, PDBs, do-not-disrupt and terminationGracePeriod, finalizers."""

from __future__ import annotations

from typing import Any

from harness import World
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import instance_type
from karpy.api import common as api_common
from karpy.api import encode
from karpy.controllers.lifecycle import NodeClaimLifecycle
from karpy.controllers.termination import TERMINATION_TIMESTAMP, Termination, _deleting
from karpy.model import labels as wk
from karpy.model.objects import Node, NodeClaim, NodeClassRef
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.taints import DISRUPTED as DISRUPTED_TAINT
from karpy.providers.kwok import KwokCloudProvider

REF = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
SMALL = instance_type("small", cpu="4", memory="8Gi", pods="20", price=0.2)
FINALIZER = "karpenter.sh/termination"


def raw_claim(name: str = "default-1", **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": name,
        "node_pool": "default",
        "labels": {wk.NODEPOOL: "default"},
        "requirements": (Requirement.in_(wk.INSTANCE_TYPE, "small"),),
        "node_class_ref": REF,
        "requests": Resources.parse({"cpu": "1"}),
    }
    fields.update(overrides)
    return encode.node_claim(NodeClaim(**fields))


def raw_pod(
    name: str,
    node: str,
    *,
    owner: str | None = "ReplicaSet",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str = "",
    tolerations: list[dict[str, str]] | None = None,
    grace: int | None = None,
    ready: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": f"{name}-owner",
                "uid": f"{name}-uid",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        "tolerations": tolerations or [],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def raw_pdb(name: str, app: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


def world_with_node(**claim_overrides: Any) -> tuple[World, KwokCloudProvider, str]:
    """A kwok world whose NodeClaim ``default-1`` has launched, registered and initialized."""
    types = (SMALL,)
    world = World.make(types)
    kwok = KwokCloudProvider(world.kube, world.ctx.clock, types_for=lambda _pool, _nc: types, loop=world.loop)
    world.cloud = kwok
    world.ctx.cloud = kwok
    world.cluster.instance_types = lambda pool, _nc: kwok.instance_types(pool)
    world.apply(
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {"nodeClassRef": {"group": REF.group, "kind": REF.kind, "name": "default"}}
                }
            },
        },
        raw_claim(**claim_overrides),
    )
    world.add(NodeClaimLifecycle(world.ctx))
    world.add(Termination(world.ctx))
    world.loop.run_for(1)
    claim = world.cluster.claims["default-1"]
    assert claim.is_true("Initialized")
    return world, kwok, claim.node_name


def delete_claim(world: World) -> None:
    world.kube.delete("NodeClaim", "default-1")
    world.loop.wake("termination")  # as the wiring does on a NodeClaim event


def evictions(world: World) -> list[str]:
    return [name for verb, _, name in world.kube.calls if verb == "evict"]


def test_drain_goes_tier_by_tier_then_removes_instance_node_and_claim() -> None:
    world, kwok, node = world_with_node()
    world.apply(
        raw_pod("crit-ds", node, owner="DaemonSet", priority_class="system-node-critical"),
        raw_pod("crit", node, priority_class="system-cluster-critical"),
        raw_pod("ds", node, owner="DaemonSet"),
        raw_pod("app", node),
        raw_pod("bare", node, owner=None),
        raw_pod("mirror", node, owner="Node"),
        raw_pod("tolerant", node, tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}]),
    )
    delete = kwok.delete
    seen_terminating: list[bool] = []

    def delete_seeing_the_claim(claim: Any) -> None:
        seen_terminating.append(world.cluster.claims["default-1"].is_true("InstanceTerminating"))
        delete(claim)

    kwok.delete = delete_seeing_the_claim  # type: ignore[method-assign]
    delete_claim(world)
    world.loop.step()  # the first termination pass
    assert DISRUPTED_TAINT in world.cluster.nodes[node].taints
    assert world.cluster.nodes[node].deleting
    assert evictions(world) == ["app", "bare"]  # the first tier only

    world.loop.run_for(60)
    assert evictions(world) == ["app", "bare", "ds", "crit", "crit-ds"]
    assert node not in world.cluster.nodes
    assert "default-1" not in world.cluster.claims
    assert [c.name for c in kwok.delete_calls] == ["default-1"] * 2  # until NodeClaimNotFound
    assert seen_terminating == [False, True]  # InstanceTerminating once the instance's deletion began
    assert {p.name for p in world.cluster.pods.values()} == {"mirror", "tolerant"}
    assert world.events.reasons().count("Evicted") == 5
    metrics = world.ctx.metrics
    assert metrics.value("karpy_pods_eviction_requests_total", {"code": "200"}) == 5
    assert metrics.value("karpy_nodes_terminated_total", {"nodepool": "default"}) == 1
    assert metrics.value("karpy_nodeclaims_terminated_total", {"nodepool": "default"}) == 1


def test_pdb_with_max_unavailable_zero_holds_the_drain_until_it_is_edited() -> None:
    world, _, node = world_with_node()
    world.apply(
        raw_pod("web-1", node, labels={"app": "web"}),
        raw_pod("web-2", node, labels={"app": "web"}),
        raw_pdb("web", "web", maxUnavailable=0),
    )
    delete_claim(world)
    world.loop.run_for(600)
    assert node in world.cluster.nodes
    assert {"web-1", "web-2"} <= {p.name for p in world.cluster.pods.values()}
    refused = world.ctx.metrics.value("karpy_pods_eviction_requests_total", {"code": "429"})
    assert 2 * 55 < refused < 2 * 100  # retried with a backoff capped at 10 s
    assert "FailedDraining" in world.events.reasons()

    world.kube.patch("PodDisruptionBudget", "web", {"spec": {"maxUnavailable": 1}}, namespace="default")
    world.loop.run_for(30)
    assert "web-1" not in {p.name for p in world.cluster.pods.values()}
    assert "web-2" not in {p.name for p in world.cluster.pods.values()}
    assert node not in world.cluster.nodes
    assert "default-1" not in world.cluster.claims


def test_pdb_allows_the_eviction_once_a_replacement_is_ready() -> None:
    world, _, node = world_with_node()
    world.apply(raw_pod("web-1", node, labels={"app": "web"}), raw_pdb("web", "web", minAvailable=1))
    delete_claim(world)
    world.loop.run_for(30)
    assert "web-1" in {p.name for p in world.cluster.pods.values()}
    world.apply(raw_pod("web-2", "elsewhere", labels={"app": "web"}, ready=False))  # the replacement starts
    world.loop.run_for(30)
    assert "web-1" in {p.name for p in world.cluster.pods.values()}
    world.kube.patch(
        "Pod", "web-2", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, namespace="default"
    )
    world.loop.run_for(30)
    assert "web-1" not in {p.name for p in world.cluster.pods.values()}
    assert node not in world.cluster.nodes


def test_do_not_disrupt_and_pdb_blocked_pods_are_deleted_when_the_grace_period_runs_out() -> None:
    world, _, node = world_with_node(termination_grace_period=600.0)
    world.apply(
        raw_pod("keep", node, annotations={wk.DO_NOT_DISRUPT: "true"}, grace=30),
        raw_pod("web", node, labels={"app": "web"}, grace=120),
        raw_pdb("web", "web", maxUnavailable=0),
    )
    deleted_at = world.loop.now
    delete_claim(world)
    world.loop.run_for(1)
    stamp = world.cluster.claims["default-1"].annotations[TERMINATION_TIMESTAMP]
    until = api_common.parse_time(stamp)
    assert until == int(deleted_at) + 600
    assert "TerminationGracePeriodExpiring" in world.events.reasons()
    assert "keep" not in evictions(world)  # do-not-disrupt pods are waited on, never evicted

    world.loop.run(until=until - 121)
    assert {"keep", "web"} <= {p.name for p in world.cluster.pods.values()}
    world.loop.run(until=until - 120)  # web gets its full 120 s grace period before the deadline
    assert "web" not in {p.name for p in world.cluster.pods.values()}
    assert "keep" in {p.name for p in world.cluster.pods.values()}
    world.loop.run(until=until - 30)
    assert "keep" not in {p.name for p in world.cluster.pods.values()}
    assert world.events.reasons().count("Disrupted") == 2
    world.loop.run(until=until)
    assert node not in world.cluster.nodes
    assert "default-1" not in world.cluster.claims


def test_deleting_the_node_deletes_its_claim_too() -> None:
    world, kwok, node = world_with_node()
    world.apply(raw_pod("app", node))
    world.kube.delete("Node", node)
    world.loop.wake("termination")
    world.loop.run_for(30)
    assert evictions(world) == ["app"]
    assert node not in world.cluster.nodes
    assert "default-1" not in world.cluster.claims
    assert kwok.list() == []


def test_a_claim_that_never_launched_just_loses_its_finalizer() -> None:
    world, _kwok, _ = world_with_node()
    world.apply(raw_claim("default-2", requirements=(Requirement.in_(wk.INSTANCE_TYPE, "missing"),)))
    world.kube.patch("NodeClaim", "default-2", {"metadata": {"finalizers": [FINALIZER]}})
    world.kube.delete("NodeClaim", "default-2")
    world.loop.wake("termination")
    world.loop.run_for(10)
    assert "default-2" not in world.cluster.claims
    assert "default-1" in world.cluster.claims


def test_unmanaged_nodes_are_left_alone() -> None:
    world, _, _ = world_with_node()
    world.kube.create(
        encode.node(Node("byo", provider_id="aws:///zone/i-1"), finalizers=("example.com/keep",))
    )
    world.apply(raw_pod("app", "byo"))
    world.kube.delete("Node", "byo")
    world.loop.wake("termination")
    world.loop.run_for(30)
    assert world.cluster.nodes["byo"].deleting
    assert world.cluster.nodes["byo"].taints == ()
    assert evictions(world) == []
    assert world.kube.get("Node", "byo")["metadata"]["finalizers"] == ["example.com/keep"]


def test_what_termination_remembers_of_a_node_goes_with_the_node() -> None:
    """The backoff and the FailedDraining already told are per Node name; once the Node is gone
    (the cluster's name tuples change) a pass forgets them, so a later Node under that name
    starts afresh. Between two such changes the clean-up is skipped."""
    world, _, node = world_with_node()
    termination = Termination(world.ctx)  # a second instance, driven by hand, to read its tables
    world.apply(raw_pod("web-1", node, labels={"app": "web"}), raw_pdb("web", "web", maxUnavailable=0))
    delete_claim(world)
    world.loop.run_for(5)
    termination.reconcile()
    assert node in termination._blocked
    assert any(told[0] == node for told in termination._told)
    world.kube.patch("PodDisruptionBudget", "web", {"spec": {"maxUnavailable": 1}}, namespace="default")
    world.loop.run_for(60)
    assert node not in world.cluster.nodes and "default-1" not in world.cluster.claims
    termination.reconcile()
    assert node not in termination._blocked
    assert not any(told[0] == node for told in termination._told)


# -- the walk over names being deleted -------------------------------------------------------------
_NAMES = ["a", "b", "c", "d", "e", "f"]


@settings(max_examples=300, deadline=None)
@given(
    st.sets(st.sampled_from(_NAMES)),
    st.lists(st.sets(st.sampled_from([*_NAMES, "g", "bb"])), min_size=1, max_size=8),
)
def test_the_deleting_walk_visits_what_the_walk_over_every_name_visits(
    known: set[str], states: list[set[str]]
) -> None:
    """The names being deleted may change after each visit (its API calls): the walk reads them
    anew, and takes only the names known when it began, in order, as the walk over all names."""
    names = tuple(sorted(known))

    def state(visited: int) -> set[str]:
        return states[min(visited, len(states) - 1)]

    expected: list[str] = []
    for name in names:
        if name in state(len(expected)):
            expected.append(name)
    got: list[str] = []
    for name in _deleting(names, lambda: tuple(sorted(state(len(got))))):
        got.append(name)
    assert got == expected


def test_an_eviction_never_takes_a_pod_recreated_under_the_same_name() -> None:
    """Evictions carry the pod's UID as a precondition: a StatefulSet's pod re-created (pending) under
    the name of one being drained answers 409 and stays; the drain counts the old one as gone."""
    from karpy.model.objects import Pod

    world, _, node = world_with_node()
    world.apply(raw_pod("web-0", node))
    stale: Pod = next(p for p in world.cluster.pods.values() if p.name == "web-0")
    world.kube.delete("Pod", "web-0", "default")
    fresh = raw_pod("web-0", "")
    fresh["spec"].pop("nodeName")
    world.apply(fresh)
    assert Termination(world.ctx)._evict(stale)  # done: the pod it meant is gone
    assert world.kube.get("Pod", "web-0", "default")["metadata"]["uid"] != stale.uid
    assert world.ctx.metrics.value("karpy_pods_eviction_requests_total", {"code": "409"}) == 1
