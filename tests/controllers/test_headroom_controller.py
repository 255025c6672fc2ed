"""Headroom through the wired controllers on the virtual clock (``karpy.sh/headroom`` on a NodePool).

karpy's real controllers (``runtime.wiring.build``) against the in-memory API server, the kwok
provider, the kube-scheduler stand-in and the workload stand-ins, in virtual time only: the
provisioner launches NodeClaims for headroom with no pod pending, wakes at the window's edges,
writes nothing about its virtual pods, refills the room that bound pods take, and the disruption
controller keeps the empty headroom node while the window is open and removes it after.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

import harness
import pytest

from karpy.catalog import conformance as conformance_catalog
from karpy.controllers.claims import REASON_ANNOTATION
from karpy.core import headroom
from karpy.model import labels as wk
from karpy.providers.kwok import KwokCloudProvider
from karpy.runtime import wiring
from karpy.sim.binder import Binder
from karpy.sim.workloads import Workloads

CATALOG = conformance_catalog.load(Path(__file__).parents[1] / "conformance/catalogs/karpenter-fake.yaml")
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
H = 3600.0
ONE_AM = {"schedule": "0 1 * * *", "duration": "1h"}  # open 01:00-02:00 UTC every day


def pool(
    value: dict[str, Any] | str | None,
    *,
    limits: dict[str, str] | None = None,
    consolidate_after: str = "30s",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web"}
    if value is not None:
        meta["annotations"] = {headroom.ANNOTATION: value if isinstance(value, str) else json.dumps(value)}
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                ],
            }
        },
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": consolidate_after,
            "budgets": [{"nodes": "100%"}],
        },
    }
    if limits is not None:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta, "spec": spec}


def template(cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]},
    }


class World:
    """The wired controllers, kwok nodes (registered 10 s after launch), a binder and workloads."""

    def __init__(self, nodepool: dict[str, Any], *, start: float = T0) -> None:
        def kwok(kube: Any, clock: Any, loop: Any) -> KwokCloudProvider:
            return KwokCloudProvider(
                kube,
                clock,
                types_for=lambda _pool, _nc: CATALOG.instance_types,
                node_class_for=lambda _pool: None,
                registration_delay=10.0,
                loop=loop,
            )

        self.world = harness.World.make(
            CATALOG.instance_types, cloud_factory=kwok, start=start, well_known=CATALOG.well_known
        )
        cloud: KwokCloudProvider = self.world.cloud
        self.world.cluster.instance_types = lambda p, _nc: cloud.instance_types(p)
        node_class = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass"}
        self.world.apply({**node_class, "metadata": {"name": "default"}}, nodepool)
        self.controllers = wiring.build(self.world.ctx, self.world.loop, self.world.feed)
        self.nominated: list[str] = []
        self.controllers.provisioner.nomination_listeners.append(
            lambda p, _k, _n: self.nominated.append(p.key)
        )
        self.binder = Binder(self.world.kube, self.world.cluster, self.world.ctx.clock)
        self.world.loop.add(self.binder.name, lambda: self.binder.reconcile().requeue_after, priority=20)
        self.workloads = Workloads(
            self.world.kube, self.world.ctx.clock, loop=self.world.loop, ready_after=5.0
        )

    def run_until(self, moment: float) -> None:
        self.world.loop.run(until=moment)

    def claims(self) -> list[dict[str, Any]]:
        return self.world.kube.objects("NodeClaim")

    def nodes(self) -> list[dict[str, Any]]:
        return self.world.kube.objects("Node")

    def metric(self, name: str, **labels: str) -> float:
        return self.world.ctx.metrics.value(name, labels)


def test_a_nodeclaim_is_launched_for_headroom_with_no_pod_pending() -> None:
    w = World(pool({"cpu": "2", "memory": "1Gi"}))
    w.run_until(T0 + 60)
    (claim,) = w.claims()
    assert claim["metadata"]["annotations"][REASON_ANNOTATION] == "headroom"
    assert len(w.nodes()) == 1 and w.world.kube.objects("Pod") == []
    assert w.metric("karpy_nodeclaims_created_total", reason="headroom", nodepool="web") == 1
    assert w.metric("karpy_nodeclaims_created_total", reason="provisioned", nodepool="web") == 0
    assert w.metric("karpy_scheduler_unschedulable_pods_count") == 0
    # nothing is ever written about the virtual pods
    assert w.nominated == [] and [e for e in w.world.events.events if e.kind == "Pod"] == []
    assert all(headroom.NAMESPACE not in e.namespace for e in w.world.events.events)
    labels = {"nodepool": "web", "resource": "cpu", "zone": "all"}
    assert w.metric("karpy_nodepool_headroom", kind="asked", **labels) == 2.0
    assert w.metric("karpy_nodepool_headroom", kind="free", **labels) >= 2.0  # the initialized node's room
    w.run_until(T0 + 600)
    assert len(w.claims()) == 1  # the room is there: nothing more is launched


def test_the_window_opens_and_closes_on_time_and_the_empty_node_is_kept_only_inside() -> None:
    w = World(pool({"cpu": "2", "memory": "1Gi", **ONE_AM}))
    w.run_until(T0 + H - 1)
    assert w.claims() == []  # before 01:00: nothing, and no event woke the provisioner since
    w.run_until(T0 + H + 5)
    (claim,) = w.claims()
    created = datetime.fromisoformat(claim["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert T0 + H <= created.timestamp() <= T0 + H + 2  # woken at the edge, one idle second later
    assert w.metric("karpy_nodeclaims_created_total", reason="headroom", nodepool="web") == 1
    w.run_until(T0 + 1.9 * H)  # the node is empty far longer than consolidateAfter
    assert len(w.nodes()) == 1
    blocked = [e for e in w.world.events.events if e.kind == "Node" and e.reason == "DisruptionBlocked"]
    assert blocked and blocked[-1].message.startswith("headroom: holds 1 of the 1 pieces")
    w.run_until(T0 + 2 * H + 300)  # after 02:00 ordinary emptiness removes it
    assert w.claims() == [] and w.nodes() == []
    labels = {"nodepool": "web", "resource": "cpu", "zone": "all"}
    assert w.metric("karpy_nodepool_headroom", kind="asked", **labels) == 0.0
    w.run_until(T0 + 25 * H + 30)  # and the next day's window launches again
    assert len(w.claims()) == 1


def test_pods_land_at_once_on_the_room_and_the_headroom_is_refilled() -> None:
    w = World(pool({"cpu": "2", "memory": "1Gi"}, consolidate_after="Never"))
    w.run_until(T0 + 120)
    (first,) = w.nodes()
    w.workloads.set_deployment("web", "default", template=template("1"), replicas=2)
    w.run_until(T0 + 121)
    pods = w.world.kube.objects("Pod")
    assert len(pods) == 2 and {p["spec"].get("nodeName") for p in pods} == {first["metadata"]["name"]}
    w.run_until(T0 + 240)
    reasons = sorted(c["metadata"]["annotations"][REASON_ANNOTATION] for c in w.claims())
    # the pods took the room: a second headroom node keeps it (the batch that saw them pending may
    # also have launched one for a pod that kube-scheduler then bound to the room)
    assert reasons.count("headroom") == 2 and set(reasons) <= {"headroom", "provisioned"}
    assert w.metric("karpy_scheduler_unschedulable_pods_count") == 0
    assert all(p.startswith("default/") for p in w.nominated)  # real pods may be nominated, pieces never


def test_per_zone_headroom_launches_in_every_zone_of_the_pool() -> None:
    w = World(pool({"cpu": "1", "perZone": True}))
    w.run_until(T0 + 30)
    zones = sorted(
        next(r["values"][0] for r in c["spec"]["requirements"] if r["key"] == wk.ZONE) for c in w.claims()
    )
    assert zones == ["test-zone-1", "test-zone-2", "test-zone-3"]
    w.run_until(T0 + 120)
    for zone in zones:
        labels = {"nodepool": "web", "resource": "cpu", "zone": zone}
        assert w.metric("karpy_nodepool_headroom", kind="asked", **labels) == 1.0


def test_a_limit_holds_the_headroom_back_quietly_and_it_is_tried_again() -> None:
    w = World(pool({"cpu": "2"}, limits={"cpu": "3"}))  # the only fitting type has 4 vCPU
    w.run_until(T0 + 30)
    batches = w.controllers.provisioner.batches
    assert w.claims() == [] and w.world.events.events == []
    assert w.metric("karpy_scheduler_unschedulable_pods_count") == 0
    w.run_until(T0 + 30 + 61)
    assert w.controllers.provisioner.batches > batches  # tried again after 60 s


def test_an_invalid_annotation_is_logged_once_and_keeps_no_headroom(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="karpy"):
        w = World(pool('{"cpu": "2", "schedule": "0 1 * * *"}'))
        w.run_until(T0 + 60)
        w.world.kube.patch("NodePool", "web", {"metadata": {"labels": {"touched": "yes"}}})
        w.run_until(T0 + 120)
    warnings = [r.getMessage() for r in caplog.records if "karpy.sh/headroom" in r.getMessage()]
    assert warnings == [
        'NodePool web: karpy.sh/headroom \'{"cpu": "2", "schedule": "0 1 * * *"}\' is invalid '
        "(schedule and duration must be set together); the pool keeps no headroom"
    ]
    assert w.claims() == []
