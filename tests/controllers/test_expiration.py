"""Expiration: NodeClaims are deleted, forcefully, at ``created + expireAfter`` in virtual time."""

from __future__ import annotations

from typing import Any

from harness import World

import builders
from karpy.api import encode
from karpy.controllers.expiration import Expiration, expires_at
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClassRef
from karpy.state.events import ObjectEvent

TYPES = [builders.instance_type("medium", cpu="4", memory="8Gi")]
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def raw_pool(name: str = "default", *, expire_after: str = "1h") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"nodeClassRef": REF, "expireAfter": expire_after}},
            # budgets forbid every voluntary disruption: expiration ignores them
            "disruption": {"budgets": [{"nodes": "0"}]},
        },
    }


def add_claim(world: World, name: str, *, pool: str = "default", expire_after: float | None = 3600.0) -> None:
    model = builders.node_claim(
        name,
        pool=pool,
        labels={wk.CAPACITY_TYPE: "on-demand"},
        provider_id=f"fake://{name}",
        node_name=f"{name}-node",
        node_class_ref=NodeClassRef(**REF),
        expire_after=expire_after,
    )
    world.apply(encode.node_claim(model, finalizers=("karpenter.sh/termination",)))


def make_world(*pools: dict[str, Any]) -> tuple[World, Expiration]:
    world = World.make(TYPES)
    world.apply(*(pools or (raw_pool(),)))
    expiration = Expiration(world.ctx)
    world.add(expiration)

    def listener(event: ObjectEvent) -> None:
        if expiration.on_event(event):
            world.loop.wake(expiration.name)

    world.feed.listeners.append(listener)
    return world, expiration


def deleting(world: World, name: str) -> bool:
    return world.cluster.claims[name].deleting


def expired_count(world: World) -> float:
    labels = {"reason": "expired", "nodepool": "default", "capacity_type": "on-demand"}
    return world.ctx.metrics.value("karpy_nodeclaims_disrupted_total", labels)


def test_claims_are_deleted_when_expire_after_elapses() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    add_claim(world, "first")
    world.loop.call_at(t0 + 600, lambda: add_claim(world, "second"))
    world.loop.run(until=t0 + 3599.5)
    assert not deleting(world, "first") and not deleting(world, "second")
    assert expired_count(world) == 0
    world.loop.run(until=t0 + 3600)
    assert deleting(world, "first") and not deleting(world, "second")
    assert world.kube.get("NodeClaim", "first")["metadata"]["deletionTimestamp"] == encode.time(t0 + 3600)
    assert "first" in world.cluster.marked_for_deletion
    assert expired_count(world) == 1
    disrupted = [(e.kind, e.name, e.time) for e in world.events.events if e.reason == "Disrupted"]
    assert disrupted == [("NodeClaim", "first", t0 + 3600), ("Node", "first-node", t0 + 3600)]
    assert "Expired" in world.events.events[0].message
    world.loop.run(until=t0 + 4199.5)
    assert not deleting(world, "second")
    world.loop.run(until=t0 + 4200)
    assert deleting(world, "second") and expired_count(world) == 2
    deletes = [c for c in world.kube.calls if c[0] == "delete"]
    assert deletes == [("delete", "NodeClaim", "first"), ("delete", "NodeClaim", "second")]  # once each


def test_never_expiring_claims_and_the_pool_fallback() -> None:
    world, expiration = make_world(raw_pool(), raw_pool("forever", expire_after="Never"))
    t0 = world.loop.now
    add_claim(world, "kept", pool="forever", expire_after=None)
    add_claim(world, "inherits", expire_after=None)  # no expireAfter of its own: the NodePool's 1h
    world.loop.run(until=t0 + 3600)
    assert deleting(world, "inherits") and not deleting(world, "kept")
    world.loop.run(until=t0 + 400 * 24 * 3600)
    assert not deleting(world, "kept")
    assert expiration.reconcile().requeue_after is None
    assert expires_at(world.cluster.claims["kept"], world.cluster.node_pools["forever"]) is None


def test_a_failed_delete_is_retried() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    add_claim(world, "first")
    world.kube.fail_next("delete", "NodeClaim", errors.TooManyRequests("slow down"))
    world.loop.run(until=t0 + 3600)
    assert not deleting(world, "first") and expired_count(world) == 0
    world.loop.run(until=t0 + 3601)
    assert deleting(world, "first") and expired_count(world) == 1


def test_requeues_at_the_next_expiry() -> None:
    world, expiration = make_world()
    add_claim(world, "first")
    world.loop.run(until=world.loop.now + 1000)
    assert expiration.reconcile().requeue_after == 2600.0


def test_the_deletion_mark_is_dropped_once_the_claim_is_gone() -> None:
    world, expiration = make_world()
    add_claim(world, "first")
    world.loop.run(until=world.loop.now + 3600)
    assert "first" in world.cluster.marked_for_deletion
    world.kube.patch("NodeClaim", "first", {"metadata": {"finalizers": None}})  # termination finishes
    assert "first" not in world.cluster.claims
    expiration.reconcile()
    assert "first" not in world.cluster.marked_for_deletion
