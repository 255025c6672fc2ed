"""Cloud drift: ``Drifted`` follows ``CloudProvider.is_drifted`` for launched claims."""

from __future__ import annotations

from typing import Any

from harness import World

from builders import instance_type
from karpy.api import encode
from karpy.controllers.cloud_drift import DRIFTED, INTERVAL, CloudDrift
from karpy.model import labels as wk
from karpy.model.objects import Condition, NodeClaim, NodeClassRef
from karpy.providers.fake import FakeCloudProvider

REF = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
SMALL = instance_type("small", cpu="2", memory="4Gi", price=0.2)


def _claim(name: str, *, launched: bool = True, provider_id: str = "") -> dict[str, Any]:
    conditions = (Condition("Launched", "True"),) if launched else ()
    return encode.node_claim(
        NodeClaim(
            name=name,
            node_pool="default",
            labels={wk.NODEPOOL: "default"},
            node_class_ref=REF,
            provider_id=provider_id or f"fake://{name}",
            conditions=conditions,
        )
    )


def _world() -> tuple[World, FakeCloudProvider, CloudDrift]:
    world = World.make((SMALL,))
    cloud = world.cloud
    assert isinstance(cloud, FakeCloudProvider)
    controller = CloudDrift(world.ctx)
    return world, cloud, controller


def test_drifted_condition_set_with_the_cloud_reason_and_cleared_when_gone() -> None:
    world, cloud, controller = _world()
    world.apply(_claim("a"), _claim("b"), _claim("c", launched=False))
    cloud.drifted = {"fake://a": "AMIDrift", "fake://c": "AMIDrift"}
    result = controller.reconcile()
    assert result.requeue_after == INTERVAL
    a = world.cluster.claims["a"].condition(DRIFTED)
    assert a is not None and (a.status, a.reason) == ("True", "AMIDrift")
    assert world.cluster.claims["b"].condition(DRIFTED) is None
    assert world.cluster.claims["c"].condition(DRIFTED) is None  # not launched: not asked
    assert world.events.reasons().count("Drifted") == 1
    patches = len(world.kube.calls)
    controller.reconcile()  # nothing changed: no write
    assert len(world.kube.calls) == patches
    cloud.drifted = {"fake://a": "SecurityGroupDrift"}
    controller.reconcile()
    a = world.cluster.claims["a"].condition(DRIFTED)
    assert a is not None and a.reason == "SecurityGroupDrift"
    cloud.drifted = {}
    controller.reconcile()
    assert world.cluster.claims["a"].condition(DRIFTED) is None
    assert world.cluster.claims["a"].is_true("Launched")


def test_wakes_on_node_class_changes_and_new_launches() -> None:
    from karpy.model.nodeclass import KWOKNodeClass
    from karpy.state.events import ObjectEvent

    _, _, controller = _world()
    assert controller.on_event(ObjectEvent("MODIFIED", KWOKNodeClass("default")))
    launched = NodeClaim(name="a", conditions=(Condition("Launched", "True"),))
    assert controller.on_event(ObjectEvent("MODIFIED", launched))
    assert not controller.on_event(ObjectEvent("MODIFIED", NodeClaim(name="b")))
