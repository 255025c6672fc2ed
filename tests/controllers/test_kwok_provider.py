"""The kwok CloudProvider against the in-memory API server, on a virtual loop."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest
from harness import World

from builders import instance_type
from karpy.adapters.kube import errors as kube_errors
from karpy.api import encode
from karpy.controllers.lifecycle import NodeClaimLifecycle
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
    assert [n["metadata"]["name"] for n in nodes] == ["default-1"]
    node = world.cluster.nodes["default-1"]
    assert node.provider_id == "kwok://default-1"
    assert node.labels[wk.INSTANCE_TYPE] == "small"  # the cheaper of the allowed types
    assert node.labels[wk.ZONE] == "test-zone-1"
    assert node.labels[wk.CAPACITY_TYPE] == "spot"
    assert node.labels[wk.NODEPOOL] == "default"
    assert node.labels[wk.HOSTNAME] == "default-1"
    assert node.labels["team"] == "a"
    assert node.labels[KWOK_LABEL] == "fake"
    assert node.taints == (Taint("karpenter.sh/unregistered", "NoExecute"), taint, startup)
    assert node.ready
    assert node.capacity == SMALL.capacity
    assert node.allocatable == SMALL.allocatable

    assert hydrated.provider_id == "kwok://default-1"
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
    assert (first.provider_id, second.provider_id) == ("kwok://a", "kwok://b")


def test_create_without_a_compatible_offering_is_insufficient_capacity() -> None:
    world, kwok = kwok_world()
    with pytest.raises(errors.InsufficientCapacity):
        kwok.create(claim(types=("huge",)))
    assert world.kube.objects("Node") == []


def test_get_and_list_read_kwok_nodes_only() -> None:
    world, kwok = kwok_world()
    hydrated = kwok.create(claim())
    other = encode.node(world.cluster.nodes["default-1"])
    other["metadata"]["name"] = "aws-node"
    other["spec"]["providerID"] = "aws:///us-east-1a/i-123"
    world.kube.create(other)

    assert [c.provider_id for c in kwok.list()] == ["kwok://default-1"]
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
    world.kube.patch("Node", "default-1", {"metadata": {"labels": {"team": "b"}}})
    changed = kwok.list()
    assert changed[0] is not first[0]
    assert changed[0].labels["team"] == "b"
    world.kube.delete("Node", "default-1")
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
    world.kube.patch("Node", "default-1", {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    kwok.delete(hydrated)
    assert world.cluster.nodes["default-1"].deleting  # the Node lingers until its finalizer goes
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
    assert [n["metadata"]["name"] for n in world.kube.objects("Node")] == ["default-1"]


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


# -- a relaunch adopts the instance (the Node is named after the claim) ------------------------
def restarted(world: World, types: tuple[Any, ...] = (SMALL, LARGE), **kwargs: Any) -> KwokCloudProvider:
    """A fresh provider on the same API server: the operator after a crash."""
    return KwokCloudProvider(
        world.kube, world.ctx.clock, types_for=lambda _pool, _nc: tuple(types), loop=world.loop, **kwargs
    )


def node_names(world: World) -> list[str]:
    return sorted(n["metadata"]["name"] for n in world.kube.objects("Node"))


def test_a_relaunch_after_a_crash_adopts_the_node_instead_of_making_a_second_one() -> None:
    world, kwok = kwok_world()
    first = kwok.create(claim(types=("small", "large")))
    # after the restart the cheaper type is gone: a fresh launch would pick "large"
    again = restarted(world, types=(LARGE,)).create(claim(types=("small", "large")))
    assert node_names(world) == ["default-1"]
    assert again.provider_id == first.provider_id == "kwok://default-1"
    assert again.labels == first.labels and again.labels[wk.INSTANCE_TYPE] == "small"
    assert (again.capacity, again.allocatable) == (first.capacity, first.allocatable)


def test_a_relaunch_in_the_same_process_adopts_too_also_while_the_node_is_delayed() -> None:
    world, kwok = kwok_world()
    first = kwok.create(claim())
    assert kwok.create(claim()) == first  # the claim's status write had failed: launched again
    assert node_names(world) == ["default-1"]
    delayed = restarted(world, registration_delay=30.0)
    pending = delayed.create(claim("default-2"))
    assert delayed.create(claim("default-2")) is pending  # its Node still to appear
    world.loop.run_for(60)
    assert node_names(world) == ["default-1", "default-2"]
    # a provider with a registration delay reads the Node first (a crash after it appeared)
    assert restarted(world, registration_delay=30.0).create(claim("default-2")) == pending
    world.loop.run_for(60)
    assert node_names(world) == ["default-1", "default-2"]


def test_a_node_of_that_name_that_is_not_the_claims_instance_is_not_adopted() -> None:
    world, kwok = kwok_world()
    hydrated = kwok.create(claim())
    foreign = encode.node(world.cluster.nodes["default-1"])
    foreign["metadata"]["name"] = "default-2"
    foreign["spec"]["providerID"] = "aws:///us-east-1a/i-123"
    world.kube.create(foreign)
    with pytest.raises(errors.CloudError, match="providerID aws:///us-east-1a/i-123"):
        kwok.create(claim("default-2"))
    world.kube.patch("Node", "default-2", {"spec": {"providerID": "kwok://default-9"}})
    with pytest.raises(errors.CloudError, match="providerID kwok://default-9, not kwok://default-2"):
        kwok.create(claim("default-2"))  # a kwok Node, but another instance's
    world.kube.delete("Node", "default-2")
    # the claim's previous instance, terminating (held by a finalizer): retried later, not adopted
    world.kube.patch("Node", "default-1", {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    kwok.delete(hydrated)
    with pytest.raises(errors.CloudError, match="terminating"):
        restarted(world).create(claim())
    world.kube.patch("Node", "default-1", {"metadata": {"finalizers": []}})
    assert kwok.create(claim()).provider_id == "kwok://default-1"  # gone: launched anew
    assert [c.provider_id for c in kwok.list()] == ["kwok://default-1"]


def test_the_lifecycle_retrying_a_launch_whose_status_write_failed_makes_one_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world, kwok = kwok_world()
    lifecycle = NodeClaimLifecycle(world.ctx)
    world.apply(encode.node_claim(claim()))
    real = world.kube.patch
    failed: list[str] = []

    def flaky(kind: str, name: str, patch: Any, namespace: str = "") -> Any:
        """The status write after the first create fails (an outage): the claim is launched again."""
        if kind == "NodeClaim" and "providerID" in (patch.get("status") or {}) and not failed:
            failed.append(name)
            raise kube_errors.Unavailable(f"PATCH NodeClaim {name}: connection reset")
        return real(kind, name, patch, namespace)

    monkeypatch.setattr(world.kube, "patch", flaky)
    for _ in range(5):
        with contextlib.suppress(kube_errors.Unavailable):  # the operator's guard retries it
            lifecycle.reconcile()
        world.loop.run_for(2)
    assert failed == ["default-1"] and len(kwok.create_calls) == 2
    assert node_names(world) == ["default-1"]
    launched = world.cluster.claims["default-1"]
    assert launched.provider_id == "kwok://default-1" and launched.is_true("Launched")


def test_a_delayed_node_whose_write_fails_stays_pending_and_is_written_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world, kwok = kwok_world(registration_delay=30.0)
    start = world.loop.now
    first = kwok.create(claim())
    second = kwok.create(claim("default-2"))
    for _ in range(3):  # the API server unreachable when both are due, and at the first retry
        world.kube.fail_next(
            "create", "Node", kube_errors.Unavailable("POST /api/v1/nodes: connection refused")
        )
    with caplog.at_level(logging.DEBUG, logger="karpy.kwok"):
        world.loop.run(until=start + 30)  # (no exception escapes the loop)
        assert node_names(world) == []
        assert sorted(c.provider_id for c in kwok.list()) == [first.provider_id, second.provider_id]
        world.loop.run(until=start + 31)  # retried after 1 s: one more failure, one written
        assert len(node_names(world)) == 1
        world.loop.run(until=start + 33)  # then after 2 s
        assert node_names(world) == ["default-1", "default-2"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "retrying in 1.0 s" in warnings[0].getMessage()
    assert any("works again" in r.getMessage() for r in caplog.records)


def test_create_batch_launches_as_create_would_reading_the_node_pool_once() -> None:
    world, kwok = kwok_world()
    alone_world, alone = kwok_world()
    batch = [claim("a", types=("large",)), claim("b", types=("huge",)), claim("c")]
    world.kube.calls.clear()
    results = kwok.create_batch(batch)
    expected: list[Any] = []
    for c in batch:
        try:
            expected.append(alone.create(c))
        except errors.CloudError as exc:
            expected.append(exc)

    assert [r.provider_id for r in results if isinstance(r, NodeClaim)] == ["kwok://a", "kwok://c"]
    assert isinstance(results[1], errors.InsufficientCapacity)
    assert [r for r in results if isinstance(r, NodeClaim)] == [
        e for e in expected if isinstance(e, NodeClaim)
    ]
    assert node_names(world) == node_names(alone_world) == ["a", "c"]
    assert world.kube.objects("Node") == alone_world.kube.objects("Node")
    assert [c for c in world.kube.calls if c[1] == "NodePool"] == [("get", "NodePool", "default")]
    assert [c for c in world.kube.calls if c[1] == "Node"] == [
        ("create", "Node", "a"),
        ("create", "Node", "c"),
    ]
    assert kwok.create_batch([]) == []


def test_create_batch_adopts_an_existing_node_and_refuses_a_foreign_one() -> None:
    world, kwok = kwok_world()
    first = kwok.create(claim("a"))
    foreign = encode.node(world.cluster.nodes["a"])
    foreign["metadata"]["name"] = "b"
    foreign["spec"]["providerID"] = "aws:///us-east-1a/i-123"
    world.kube.create(foreign)
    adopted, refused, fresh = restarted(world, types=(LARGE,)).create_batch(
        [claim("a"), claim("b"), claim("c")]
    )
    assert isinstance(adopted, NodeClaim) and adopted.labels == first.labels  # "small", as launched
    assert isinstance(refused, errors.CloudError) and "providerID aws:///us-east-1a/i-123" in str(refused)
    assert isinstance(fresh, NodeClaim) and fresh.labels[wk.INSTANCE_TYPE] == "large"
    assert node_names(world) == ["a", "b", "c"]


def test_create_batch_raises_a_failed_node_write_after_the_others_and_the_retry_adopts_them() -> None:
    world, kwok = kwok_world()
    world.kube.fail_next("create", "Node", kube_errors.Unavailable("POST /api/v1/nodes: connection reset"))
    with pytest.raises(kube_errors.Unavailable, match="connection reset"):
        kwok.create_batch([claim("a"), claim("b")])
    assert node_names(world) == ["b"]  # the write of "a" failed, the one of "b" went through
    again = kwok.create_batch([claim("a"), claim("b")])
    assert [r.provider_id for r in again if isinstance(r, NodeClaim)] == ["kwok://a", "kwok://b"]
    assert node_names(world) == ["a", "b"]
    # a NodePool read that fails while planning: raised at once, nothing written
    world.kube.fail_next("get", "NodePool", kube_errors.Unavailable("GET nodepools: timed out"))
    with pytest.raises(kube_errors.Unavailable):
        kwok.create_batch([claim("d"), claim("e")])
    assert node_names(world) == ["a", "b"]
