"""StateMetrics: pending-pod gauges, startup durations observed once per pod, and cost per NodePool."""

from __future__ import annotations

from typing import Any

from harness import World

import builders
from karpy.api import encode
from karpy.controllers.state_metrics import StateMetrics
from karpy.model import labels as wk
from karpy.model.catalog import Offering
from karpy.model.objects import NodeClassRef

TYPES = [
    builders.instance_type(
        "medium",
        offerings=[
            Offering("z1", "spot", 0.25),
            Offering("z1", "on-demand", 1.0),
            Offering("z2", "spot", 0.5),
        ],
    )
]
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def raw_pod(name: str, created: float, *, started: float | None = None, node: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending"}
    if started is not None:
        status = {"phase": "Running", "startTime": encode.time(started)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": encode.time(created)},
        "spec": {"containers": [{"name": "c"}], **({"nodeName": node} if node else {})},
        "status": status,
    }


def value(world: World, name: str, labels: dict[str, str] | None = None) -> float:
    return world.ctx.metrics.value(name, labels)


def test_pending_gauges_and_startup_durations_follow_the_pods() -> None:
    world = World.make(TYPES)
    t0 = world.loop.now
    controller = StateMetrics(world.ctx)
    world.kube.create(raw_pod("a", t0))
    controller.reconcile()
    assert value(world, "karpy_pods_pending") == 1
    assert value(world, "karpy_pods_pending_oldest_age_seconds") == 0
    world.loop.run(until=t0 + 30)
    controller.reconcile()  # no pod changed: the age still grows
    assert value(world, "karpy_pods_pending_oldest_age_seconds") == 30
    world.kube.create(raw_pod("b", t0 + 30))
    world.kube.update(raw_pod("a", t0, started=t0 + 40, node="n1"))
    controller.reconcile()
    assert value(world, "karpy_pods_pending") == 1
    assert value(world, "karpy_pods_pending_oldest_age_seconds") == 0
    assert value(world, "karpy_pods_startup_duration_seconds_count") == 1
    assert value(world, "karpy_pods_startup_duration_seconds_sum") == 40
    controller.reconcile()
    assert value(world, "karpy_pods_startup_duration_seconds_count") == 1  # once per pod
    world.kube.update(raw_pod("b", t0 + 30, started=t0 + 35, node="n1"))
    world.kube.create(raw_pod("c", t0 + 30, started=t0 + 32, node="n1"))
    controller.reconcile()
    assert value(world, "karpy_pods_pending") == 0
    assert value(world, "karpy_pods_startup_duration_seconds_count") == 3
    assert value(world, "karpy_pods_startup_duration_seconds_sum") == 40 + 5 + 2
    world.kube.update(raw_pod("c", t0 + 30, started=t0 + 32, node="n2"))  # changed, observed already
    controller.reconcile()
    assert value(world, "karpy_pods_startup_duration_seconds_count") == 3
    world.kube.delete("Pod", "a", "default")
    controller.reconcile()
    world.kube.create(raw_pod("a", t0 + 30, started=t0 + 31, node="n1"))  # a new pod of the same name
    controller.reconcile()
    assert value(world, "karpy_pods_startup_duration_seconds_count") == 4


def test_cost_sums_each_launched_claims_offering() -> None:
    world = World.make(TYPES)
    world.apply(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {"nodeClassRef": REF}}},
        }
    )
    controller = StateMetrics(world.ctx)
    for name, zone, capacity_type, provider_id in [
        ("a", "z1", "spot", "fake://a"),
        ("b", "z1", "on-demand", "fake://b"),
        ("c", "z2", "spot", "fake://c"),
        ("d", "z2", "spot", ""),  # not launched: no cost yet
    ]:
        claim = builders.node_claim(
            name,
            provider_id=provider_id,
            node_class_ref=NodeClassRef(**REF),
            labels={wk.INSTANCE_TYPE: "medium", wk.ZONE: zone, wk.CAPACITY_TYPE: capacity_type},
        )
        world.apply(encode.node_claim(claim))
    controller.reconcile()
    assert not world.problems
    assert value(world, "karpy_cluster_cost_per_hour", {"nodepool": "default"}) == 1.75
    world.kube.delete("NodeClaim", "b")
    controller.reconcile()
    assert value(world, "karpy_cluster_cost_per_hour", {"nodepool": "default"}) == 0.75
    world.cloud.types = (builders.instance_type("medium", offerings=[Offering("z1", "spot", 0.125)]),)
    controller.reconcile()  # the provider's new prices are read on the next pass
    assert value(world, "karpy_cluster_cost_per_hour", {"nodepool": "default"}) == 0.125


def test_node_counts_follow_the_nodes_labels() -> None:
    world = World.make(TYPES)
    controller = StateMetrics(world.ctx)

    def labelled(name: str, capacity_type: str) -> dict[str, Any]:
        node_labels = {wk.NODEPOOL: "default", wk.INSTANCE_TYPE: "medium", wk.CAPACITY_TYPE: capacity_type}
        return encode.node(builders.node(name, labels=node_labels))

    def count(capacity_type: str) -> float:
        series = {"nodepool": "default", "instance_type": "medium", "capacity_type": capacity_type}
        return value(world, "karpy_nodes", series)

    world.apply(labelled("n1", "spot"), labelled("n2", "spot"), encode.node(builders.node("unmanaged")))
    controller.reconcile()
    assert (count("spot"), count("on-demand")) == (2, 0)
    assert value(world, "karpy_cluster_state_node_count") == 3
    world.kube.patch("Node", "n2", {"metadata": {"labels": {wk.CAPACITY_TYPE: "on-demand"}}})
    controller.reconcile()
    assert (count("spot"), count("on-demand")) == (1, 1)
    world.kube.delete("Node", "n1")
    controller.reconcile()
    assert (count("spot"), count("on-demand")) == (0, 1)  # the spot series is gone
    controller.reconcile()  # nothing changed: the same counts stay set
    assert (count("spot"), count("on-demand")) == (0, 1)
