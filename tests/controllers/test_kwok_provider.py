"""The kwok CloudProvider against the in-memory API server, on a virtual loop."""

from __future__ import annotations

from typing import Any

import pytest
from harness import World

from builders import instance_type
from karpy.api import encode
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClaim, NodeClassRef
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.taints import Taint
from karpy.ports import CloudProvider
from karpy.providers.kwok import KWOK_LABEL, UNAVAILABLE_TTL, KwokCloudProvider

REF = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
SMALL = instance_type("small", cpu="2", memory="4Gi", price=0.2)
LARGE = instance_type("large", cpu="8", memory="16Gi", price=0.8)


def raw_pool(name: str = "default", *, node_class: str = "default") -> dict[str, Any]:
    ref = {"group": REF.group, "kind": REF.kind, "name": node_class}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": ref}}},
    }


def raw_node_class(name: str = "default", *, delay: str | None = None) -> dict[str, Any]:
    spec = {"nodeRegistrationDelay": delay} if delay is not None else {}
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def claim(
    name: str = "default-1", *, types: tuple[str, ...] = ("small", "large"), **overrides: Any
) -> NodeClaim:
    fields: dict[str, Any] = {
        "name": name,
        "node_pool": "default",
        "labels": {wk.NODEPOOL: "default", "team": "a"},
        "requirements": (Requirement.in_(wk.INSTANCE_TYPE, *types),),
        "node_class_ref": REF,
        "requests": Resources.parse({"cpu": "1"}),
    }
    fields.update(overrides)
    return NodeClaim(**fields)


def kwok_world(types: tuple[Any, ...] = (SMALL, LARGE), **kwargs: Any) -> tuple[World, KwokCloudProvider]:
    world = World.make(types)
    kwok = KwokCloudProvider(
        world.kube, world.ctx.clock, types_for=lambda _pool, _nc: tuple(types), loop=world.loop, **kwargs
    )
    world.cloud = kwok
    world.ctx.cloud = kwok
    world.cluster.instance_types = lambda pool, _nc: kwok.instance_types(pool)
    world.apply(raw_node_class(), raw_pool())
    return world, kwok


def test_satisfies_the_cloud_provider_port() -> None:
    _world, kwok = kwok_world()
    provider: CloudProvider = kwok
    assert provider.name == "kwok"
    assert provider.is_drifted(claim()) == ""


def test_create_writes_a_registering_node_and_returns_the_hydrated_claim() -> None:
    world, kwok = kwok_world()
    startup = Taint("example.com/booting", "NoSchedule")
    taint = Taint("dedicated", "NoSchedule", "gpu")
    hydrated = kwok.create(claim(taints=(taint,), startup_taints=(startup,)))

    nodes = world.kube.objects("Node")
    assert [n["metadata"]["name"] for n in nodes] == ["default-1-1"]
    node = world.cluster.nodes["default-1-1"]
    assert node.provider_id == "kwok://default-1-1"
    assert node.labels[wk.INSTANCE_TYPE] == "small"  # the cheaper of the allowed types
    assert node.labels[wk.ZONE] == "test-zone-1"
    assert node.labels[wk.CAPACITY_TYPE] == "spot"
    assert node.labels[wk.NODEPOOL] == "default"
    assert node.labels[wk.HOSTNAME] == "default-1-1"
    assert node.labels["team"] == "a"
    assert node.labels[KWOK_LABEL] == "fake"
    assert node.taints == (Taint("karpenter.sh/unregistered", "NoExecute"), taint, startup)
    assert node.ready
    assert node.capacity == SMALL.capacity
    assert node.allocatable == SMALL.allocatable

    assert hydrated.provider_id == "kwok://default-1-1"
    assert hydrated.labels[wk.INSTANCE_TYPE] == "small"
    assert hydrated.labels[wk.ZONE] == "test-zone-1"
    assert hydrated.labels[wk.CAPACITY_TYPE] == "spot"
    assert hydrated.capacity == SMALL.capacity
    assert hydrated.allocatable == SMALL.allocatable


def test_create_respects_the_allowed_types_and_names_nodes_deterministically() -> None:
    _world, kwok = kwok_world()
    first = kwok.create(claim("a", types=("large",)))
    second = kwok.create(claim("b"))
    assert first.labels[wk.INSTANCE_TYPE] == "large"
    assert (first.provider_id, second.provider_id) == ("kwok://a-1", "kwok://b-2")


def test_create_without_a_compatible_offering_is_insufficient_capacity() -> None:
    world, kwok = kwok_world()
    with pytest.raises(errors.InsufficientCapacity):
        kwok.create(claim(types=("huge",)))
    assert world.kube.objects("Node") == []


def test_get_and_list_read_kwok_nodes_only() -> None:
    world, kwok = kwok_world()
    hydrated = kwok.create(claim())
    other = encode.node(world.cluster.nodes["default-1-1"])
    other["metadata"]["name"] = "aws-node"
    other["spec"]["providerID"] = "aws:///us-east-1a/i-123"
    world.kube.create(other)

    assert [c.provider_id for c in kwok.list()] == ["kwok://default-1-1"]
    got = kwok.get(hydrated.provider_id)
    assert got.labels[wk.INSTANCE_TYPE] == "small"
    assert got.capacity == SMALL.capacity
    with pytest.raises(errors.NodeClaimNotFound):
        kwok.get("kwok://nope")
    with pytest.raises(errors.NodeClaimNotFound):
        kwok.get("aws:///us-east-1a/i-123")


def test_list_reuses_a_parse_only_while_the_node_is_unchanged() -> None:
    world, kwok = kwok_world()
    kwok.create(claim())
    first = kwok.list()
    assert kwok.list()[0] is first[0]  # same resourceVersion: the parsed instance is reused
    world.kube.patch("Node", "default-1-1", {"metadata": {"labels": {"team": "b"}}})
    changed = kwok.list()
    assert changed[0] is not first[0]
    assert changed[0].labels["team"] == "b"
    world.kube.delete("Node", "default-1-1")
    assert kwok.list() == []


def test_delete_removes_the_node_then_reports_not_found() -> None:
    world, kwok = kwok_world()
    hydrated = kwok.create(claim())
    kwok.delete(hydrated)
    assert world.kube.objects("Node") == []
    assert kwok.list() == []
    with pytest.raises(errors.NodeClaimNotFound):
        kwok.delete(hydrated)


def test_delete_of_a_node_held_by_a_finalizer_forgets_the_instance() -> None:
    world, kwok = kwok_world()
    hydrated = kwok.create(claim())
    world.kube.patch("Node", "default-1-1", {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    kwok.delete(hydrated)
    assert world.cluster.nodes["default-1-1"].deleting  # the Node lingers until its finalizer goes
    assert kwok.list() == []
    with pytest.raises(errors.NodeClaimNotFound):
        kwok.get(hydrated.provider_id)
    with pytest.raises(errors.NodeClaimNotFound):
        kwok.delete(hydrated)


def test_registration_delay_writes_the_node_later() -> None:
    world, kwok = kwok_world(registration_delay=30.0)
    start = world.loop.now
    hydrated = kwok.create(claim())
    assert world.kube.objects("Node") == []
    assert [c.provider_id for c in kwok.list()] == [hydrated.provider_id]  # the instance exists
    assert kwok.get(hydrated.provider_id).provider_id == hydrated.provider_id
    world.loop.run(until=start + 29)
    assert world.kube.objects("Node") == []
    world.loop.run(until=start + 30)
    assert [n["metadata"]["name"] for n in world.kube.objects("Node")] == ["default-1-1"]


def test_node_class_registration_delay_wins() -> None:
    world, kwok = kwok_world(registration_delay=30.0)
    world.kube.patch("KWOKNodeClass", "default", {"spec": {"nodeRegistrationDelay": "2m"}})
    start = world.loop.now
    kwok.create(claim())
    world.loop.run(until=start + 119)
    assert world.kube.objects("Node") == []
    world.loop.run(until=start + 120)
    assert len(world.kube.objects("Node")) == 1


def test_delete_before_registration_cancels_the_node() -> None:
    world, kwok = kwok_world(registration_delay=30.0)
    hydrated = kwok.create(claim())
    kwok.delete(hydrated)
    world.loop.run_for(60)
    assert world.kube.objects("Node") == []
    with pytest.raises(errors.NodeClaimNotFound):
        kwok.delete(hydrated)


def test_insufficient_capacity_caches_the_offering_for_three_minutes() -> None:
    world, kwok = kwok_world()
    pool = world.cluster.node_pools["default"]
    kwok.ice = {("small", "test-zone-1", "spot")}
    with pytest.raises(errors.InsufficientCapacity) as caught:
        kwok.create(claim())
    assert caught.value.offerings == (("small", "test-zone-1", "spot"),)
    assert world.kube.objects("Node") == []

    def available(zone: str, capacity_type: str) -> bool:
        small = next(it for it in kwok.instance_types(pool) if it.name == "small")
        return next(
            o for o in small.offerings if (o.zone, o.capacity_type) == (zone, capacity_type)
        ).available

    assert not available("test-zone-1", "spot")
    assert available("test-zone-1", "on-demand")
    retried = kwok.create(claim("default-2"))  # the next create picks another offering
    assert (retried.labels[wk.ZONE], retried.labels[wk.CAPACITY_TYPE]) == ("test-zone-1", "on-demand")

    world.loop.run_for(UNAVAILABLE_TTL - 1)
    assert not available("test-zone-1", "spot")
    world.loop.run_for(1)
    assert available("test-zone-1", "spot")


def test_mark_unavailable_steers_create_and_expires() -> None:
    world, kwok = kwok_world()
    kwok.mark_unavailable("small", "test-zone-1", "spot")
    assert kwok.create(claim("a")).labels[wk.CAPACITY_TYPE] == "on-demand"
    world.loop.run_for(UNAVAILABLE_TTL)
    assert kwok.create(claim("b")).labels[wk.CAPACITY_TYPE] == "spot"
