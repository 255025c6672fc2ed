"""NodePoolStatus: per-pool summed capacity and node count, written only when they change."""

from __future__ import annotations

from typing import Any

from harness import World

import builders
from karpy.api import encode
from karpy.controllers.nodepool_status import NodePoolStatus
from karpy.model.objects import NodeClassRef
from karpy.model.resources import Resources

TYPES = [builders.instance_type("medium", cpu="4", memory="8Gi")]
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def raw_pool(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": REF}}},
    }


def add_node(world: World, name: str, pool: str, cpu: str, *, register: bool = True) -> None:
    """A NodeClaim ``<name>-claim`` of ``pool`` and (when ``register``) its Node with ``cpu`` capacity."""
    provider_id = f"fake://{name}"
    claim = builders.node_claim(
        f"{name}-claim",
        pool=pool,
        provider_id=provider_id,
        node_name=name if register else "",
        capacity=Resources.parse({"cpu": "2"}),
        node_class_ref=NodeClassRef(**REF),
    )
    world.apply(encode.node_claim(claim))
    if register:
        node = builders.node(name, provider_id=provider_id, capacity={"cpu": cpu}, labels={"pool": pool})
        world.apply(encode.node(node))


def status(world: World, pool: str) -> Any:
    return world.kube.get("NodePool", pool).get("status")


def patches(world: World) -> list[tuple[str, str, str]]:
    return [c for c in world.kube.calls if c[0] == "patch" and c[1] == "NodePool"]


def test_counts_and_sums_each_pools_nodes_and_follows_changes() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool("a"), raw_pool("b"))
    add_node(world, "n1", "a", "4")
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "4", "nodes": "1"}, "nodes": 1}
    assert status(world, "b") == {"resources": {"nodes": "0"}, "nodes": 0}
    written = len(patches(world))
    controller.reconcile()  # nothing changed: nothing written
    assert len(patches(world)) == written
    add_node(world, "n2", "a", "8")
    add_node(world, "n3", "b", "2", register=False)  # launched, not registered: its claim's capacity
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "12", "nodes": "2"}, "nodes": 2}
    assert status(world, "b") == {"resources": {"cpu": "2", "nodes": "1"}, "nodes": 1}
    world.kube.delete("NodeClaim", "n1-claim")
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "8", "nodes": "1"}, "nodes": 1}
    world.kube.delete("Node", "n1")  # an unmanaged node counts for no pool
    written = len(patches(world))
    controller.reconcile()
    assert len(patches(world)) == written


def test_a_pool_created_later_is_written_too() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool("a"))
    add_node(world, "n1", "late", "4")
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    world.apply(raw_pool("late"))
    controller.reconcile()
    assert not world.problems
    assert status(world, "late") == {"resources": {"cpu": "4", "nodes": "1"}, "nodes": 1}


def test_sums_follow_a_node_or_claim_changed_in_place_not_pods() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool("a"))
    add_node(world, "n1", "a", "4")
    add_node(world, "n2", "a", "2", register=False)
    controller = NodePoolStatus(world.ctx)
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "6", "nodes": "2"}, "nodes": 2}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }
    world.apply(pod)  # a bound pod: the same sums, nothing written
    written = len(patches(world))
    controller.reconcile()
    assert len(patches(world)) == written
    # the Node alone changes (its claim stays): the sum follows its capacity
    node = builders.node("n1", provider_id="fake://n1", capacity={"cpu": "16"}, labels={"pool": "a"})
    world.kube.patch("Node", "n1", {"status": encode.node(node)["status"]})
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "18", "nodes": "2"}, "nodes": 2}
    # the unregistered claim alone changes: its capacity is the one counted
    claim = builders.node_claim(
        "n2-claim",
        pool="a",
        provider_id="fake://n2",
        capacity=Resources.parse({"cpu": "8"}),
        node_class_ref=NodeClassRef(**REF),
    )
    world.kube.patch("NodeClaim", "n2-claim", {"status": encode.node_claim(claim)["status"]})
    controller.reconcile()
    assert status(world, "a") == {"resources": {"cpu": "24", "nodes": "2"}, "nodes": 2}
