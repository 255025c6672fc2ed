"""The measured-capacity controller on the virtual clock: measure, override, correct, persist.

The world is karpy's wired controllers (``runtime.wiring.build``) against the in-memory API
server and the simulated cloud, whose Nodes register with 1Gi less memory than the catalog
says (:class:`~karpy.sim.cloud.TrueAllocatable`), the kube-scheduler stand-in and the
Deployment stand-in. Time is virtual only.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import harness

from builders import instance_type
from karpy import settings as settings_mod
from karpy.adapters.kube.measured_store import ConfigMapStore
from karpy.adapters.memory import MemoryKube
from karpy.api import encode
from karpy.controllers.measured_capacity import MeasuredCapacity
from karpy.core import measured
from karpy.model import labels as wk
from karpy.model.objects import Condition, NodeClaim, NodeClassRef, NodePool
from karpy.model.resources import Resources
from karpy.runtime import wiring
from karpy.runtime.loop import LoopClock
from karpy.sim.binder import Binder
from karpy.sim.cloud import LaunchLatency, Offset, SimCloud, TrueAllocatable
from karpy.sim.workloads import Workloads

GI = 2**30
MI = 2**20
T0 = 1_767_225_600.0
# 8Gi - 10Mi allocatable by the catalog; the cloud's Nodes have 1Gi less
SMALL = instance_type("small", cpu="2", memory="8Gi", price=0.2, overhead={"cpu": "100m", "memory": "10Mi"})
LARGE = instance_type("large", cpu="4", memory="16Gi", price=0.4, overhead={"cpu": "100m", "memory": "10Mi"})
TYPES = (SMALL, LARGE)
TRUE = TrueAllocatable({"memory": Offset(amount=-GI)})
ON = settings_mod.Settings(features=settings_mod.FeatureGates(measured_capacity=True))
NODE_CLASS = {
    "apiVersion": "karpenter.kwok.sh/v1alpha1",
    "kind": "KWOKNodeClass",
    "metadata": {"name": "default"},
}
REF = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
POOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
            }
        },
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
    },
}


def template(app: str, memory: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": memory}}}
            ]
        },
    }


class Rig:
    """The wired controllers over the simulated cloud, a binder and the Deployment stand-in."""

    def __init__(self, *, on: bool, store: Any = None, kube: MemoryKube | None = None) -> None:
        def cloud(kube: Any, clock: Any, loop: Any) -> SimCloud:
            return SimCloud(
                kube,
                clock,
                loop,
                types_for=lambda _pool, _nc: TYPES,
                rng=random.Random(1),
                launch_latency=LaunchLatency.fixed(20.0),
                true_allocatable=TRUE,
            )

        self.world = harness.World.make(TYPES, settings=ON if on else None, cloud_factory=cloud, start=T0)
        self.cloud: SimCloud = self.world.cloud
        self.world.cluster.instance_types = lambda pool, _nc: self.cloud.instance_types(pool)
        self.world.apply(NODE_CLASS, POOL)
        self.controllers = wiring.build(self.world.ctx, self.world.loop, self.world.feed)
        self.measured = self.controllers.measured_capacity
        if self.measured is not None and store is not None:
            self.measured.store = store
        binder = Binder(self.world.kube, self.world.cluster, self.world.ctx.clock)
        self.world.loop.add(binder.name, lambda: binder.reconcile().requeue_after, priority=20)
        self.workloads = Workloads(
            self.world.kube, self.world.ctx.clock, loop=self.world.loop, ready_after=5.0
        )

    def run(self, seconds: float) -> None:
        self.world.loop.run(until=self.world.loop.now + seconds)

    def claims(self) -> list[str]:
        return sorted(c["metadata"]["name"] for c in self.world.kube.objects("NodeClaim"))

    def pending(self) -> list[str]:
        return sorted(
            p["metadata"]["name"] for p in self.world.kube.objects("Pod") if not p["spec"].get("nodeName")
        )

    def types(self) -> dict[str, int]:
        pool = self.world.cluster.node_pools["default"]
        its = self.world.cluster.instance_types(pool, self.world.cluster.node_class_for(pool))
        return {it.name: it.allocatable.get("memory") for it in its}


def test_off_nothing_is_built_and_the_catalog_stands() -> None:
    rig = Rig(on=False)
    assert rig.measured is None
    assert rig.measured not in rig.controllers.all()
    rig.workloads.set_deployment("a", "default", template=template("a", "2600Mi"), replicas=3)
    rig.run(120)
    assert rig.types() == {"small": 8 * GI - 10 * MI, "large": 16 * GI - 10 * MI}
    assert "CapacityMeasured" not in rig.world.events.reasons()


def _two_waves(rig: Rig) -> tuple[list[str], list[str]]:
    """Three 2600Mi pods (they fit a small node by the catalog, two of them by the truth), then,
    once all run, four more (one fits beside the first wave's odd pod): the claims each wave made."""
    rig.workloads.set_deployment("a", "default", template=template("a", "2600Mi"), replicas=3)
    rig.run(180)
    assert rig.pending() == []
    first = rig.claims()
    rig.workloads.set_deployment("b", "default", template=template("b", "2600Mi"), replicas=4)
    rig.run(180)
    assert rig.pending() == []
    return first, [c for c in rig.claims() if c not in first]


def test_without_measurement_each_wave_packs_by_the_estimate_and_launches_twice() -> None:
    first, second = _two_waves(Rig(on=False))
    assert (len(first), len(second)) == (2, 2)  # one small claim for 3 pods; one pod did not fit it


def test_with_measurement_the_second_wave_is_packed_by_what_the_nodes_registered_with() -> None:
    rig = Rig(on=True)
    assert rig.measured is not None and rig.controllers.all()[1] is rig.measured  # right after the lifecycle
    first, second = _two_waves(rig)
    assert len(first) == 2  # the first Node of a type cannot be known in advance
    assert len(second) == 1  # measured: the three new pods go to one claim that they fit for real
    assert rig.types() == {"small": 7 * GI - 10 * MI, "large": 15 * GI - 10 * MI}
    entry = rig.measured.lookup(rig.world.cluster.node_classes[("KWOKNodeClass", "default")], "small")
    assert entry is not None and entry.allocatable.get("memory") == 7 * GI - 10 * MI
    assert entry.identity == "KWOKNodeClass"
    assert "CapacityMeasured" in rig.world.events.reasons()
    # the inner source (the cloud's catalog) is untouched
    assert {
        it.name: it.allocatable.get("memory") for it in rig.cloud.instance_types(NodePool("default"))
    } == {
        "small": 8 * GI - 10 * MI,
        "large": 16 * GI - 10 * MI,
    }


def test_the_override_keeps_one_tuple_while_nothing_changes() -> None:
    rig = Rig(on=True)
    _two_waves(rig)
    assert rig.types() == rig.types()
    pool = rig.world.cluster.node_pools["default"]
    nc = rig.world.cluster.node_class_for(pool)
    assert rig.world.cluster.instance_types(pool, nc) is rig.world.cluster.instance_types(pool, nc)


# -- one controller, driven by hand ------------------------------------------------------------


def _world(*, store: Any = None, save_interval: float = 60.0) -> tuple[harness.World, MeasuredCapacity]:
    world = harness.World.make(TYPES, settings=ON, start=T0)
    world.apply(NODE_CLASS, POOL)
    return world, MeasuredCapacity(world.ctx, store=store, save_interval=save_interval)


def _node(name: str, memory: int, *, ready: bool = True, initialized: bool = True) -> dict[str, Any]:
    from karpy.model.objects import Node

    labels = {wk.INSTANCE_TYPE: "small", wk.NODEPOOL: "default"}
    if initialized:
        labels[wk.INITIALIZED] = "true"
    alloc = Resources({"cpu": 1900, "memory": memory, "pods": 10})
    node = Node(
        name,
        labels=labels,
        capacity=alloc,
        allocatable=alloc,
        provider_id=f"fake://{name}",
        conditions=(Condition("Ready", "True" if ready else "False"),),
    )
    return encode.node(node)


def _claim(name: str, *, registered: bool = True, initialized: bool = True) -> dict[str, Any]:
    conditions = [Condition("Launched", "True")]
    if registered:
        conditions.append(Condition("Registered", "True"))
    if initialized:
        conditions.append(Condition("Initialized", "True"))
    return encode.node_claim(
        NodeClaim(
            name=name,
            node_pool="default",
            labels={wk.NODEPOOL: "default", wk.INSTANCE_TYPE: "small"},
            node_class_ref=REF,
            provider_id=f"fake://{name}",
            node_name=name if registered else "",
            capacity=SMALL.capacity,
            allocatable=SMALL.allocatable,
            conditions=tuple(conditions),
        )
    )


def test_only_ready_initialized_nodes_are_measured_and_the_minimum_is_kept() -> None:
    world, controller = _world()
    world.apply(
        _claim("a"),
        _node("a", 7 * GI, ready=False),
        _claim("b", initialized=False),
        _node("b", 6 * GI, initialized=False),
    )
    controller.reconcile()
    assert controller.entries == {}
    world.kube.patch("Node", "a", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    controller.reconcile()
    (entry,) = controller.entries.values()
    assert entry.allocatable.get("memory") == 7 * GI and entry.node == "a"
    world.apply(_claim("c"), _node("c", 7 * GI - 300 * MI))
    controller.reconcile()
    assert controller.lookup(
        None if False else world.cluster.node_classes[("KWOKNodeClass", "default")], "small"
    )
    (entry,) = controller.entries.values()
    assert entry.allocatable.get("memory") == 7 * GI - 300 * MI and entry.node == "c"
    world.apply(_claim("d"), _node("d", 7 * GI + 500 * MI))  # a bigger one does not raise it
    controller.reconcile()
    assert next(iter(controller.entries.values())).allocatable.get("memory") == 7 * GI - 300 * MI
    assert world.events.reasons().count("CapacityMeasured") == 2


def test_an_in_flight_claim_of_a_measured_type_is_corrected_once() -> None:
    world, controller = _world()
    world.apply(_claim("a"), _node("a", 7 * GI))
    world.apply(_claim("x", registered=False, initialized=False))  # launched, no Node yet
    controller.reconcile()
    x = world.cluster.claims["x"]
    assert x.allocatable.get("memory") == 7 * GI and x.allocatable.get("cpu") == 1900
    assert x.allocatable.get("pods") == 10
    assert controller.corrected == 1 and world.events.reasons().count("CapacityCorrected") == 1
    writes = len(world.kube.calls)
    controller.reconcile()
    assert len(world.kube.calls) == writes  # corrected already: nothing to write


def test_a_node_class_change_expires_the_measurements() -> None:
    world, controller = _world()
    world.apply(_claim("a"), _node("a", 7 * GI))
    controller.reconcile()
    pool = world.cluster.node_pools["default"]
    before = world.cluster.instance_types(pool, world.cluster.node_class_for(pool))
    assert {it.name: it.allocatable.get("memory") for it in before}["small"] == 7 * GI
    # another NodeClass for the pool: another identity, nothing measured for it
    world.apply(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "r",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
            },
        }
    )
    ec2 = world.cluster.node_classes[("EC2NodeClass", "default")]
    assert {it.name: it.allocatable.get("memory") for it in controller.instance_types(pool, ec2)}[
        "small"
    ] == (8 * GI - 10 * MI)


# -- the store ---------------------------------------------------------------------------------


def test_writes_are_rate_limited_and_a_restart_reads_them_back() -> None:
    shared = MemoryKube(LoopClock(harness.World.make(TYPES).loop))
    store = ConfigMapStore(shared, "karpy-system")
    world, controller = _world(store=store, save_interval=60.0)
    world.apply(_claim("a"), _node("a", 7 * GI))
    assert controller.reconcile().requeue_after is None  # written at once: the first change
    saved = shared.get("ConfigMap", "karpy-measured-capacity", "karpy-system")
    doc, _ = measured.from_doc(store.load())
    assert [m.instance_type for m in doc] == ["small"] and saved["data"]
    world.apply(_claim("b"), _node("b", 7 * GI - 100 * MI))
    result = controller.reconcile()
    assert result.requeue_after == 60.0  # changed, but written less than a minute ago
    assert measured.from_doc(store.load())[0][0].allocatable.get("memory") == 7 * GI
    world.loop.run(until=world.loop.now + 61)
    assert controller.reconcile().requeue_after is None
    assert measured.from_doc(store.load())[0][0].allocatable.get("memory") == 7 * GI - 100 * MI
    # a restart: a new controller over the same ConfigMap overrides before any Node registered
    again, restarted = _world(store=ConfigMapStore(shared, "karpy-system"))
    restarted.reconcile()
    pool = again.cluster.node_pools["default"]
    types = again.cluster.instance_types(pool, again.cluster.node_class_for(pool))
    assert {it.name: it.allocatable.get("memory") for it in types}["small"] == 7 * GI - 100 * MI


def test_a_save_merges_what_the_store_holds_and_drops_expired_identities() -> None:
    shared = MemoryKube(LoopClock(harness.World.make(TYPES).loop))
    store = ConfigMapStore(shared, "karpy-system")
    other = measured.Measurement(
        "small", "KWOKNodeClass", SMALL.capacity, Resources({"memory": 6 * GI}), "z", 1.0
    )
    stale = measured.Measurement("large", "EC2NodeClass:gone", LARGE.capacity, LARGE.allocatable, "y", 1.0)
    store.load()
    store.save(measured.to_doc([other, stale]))
    world, controller = _world(store=store)
    world.apply(_claim("a"), _node("a", 7 * GI))
    controller.reconcile()
    back, _ = measured.from_doc(store.load())
    assert [(m.identity, m.instance_type, m.allocatable.get("memory")) for m in back] == [
        ("KWOKNodeClass", "small", 6 * GI)  # the minimum of the two; the expired identity dropped
    ]


def test_a_failing_store_is_retried_and_the_measurements_keep_working() -> None:
    from karpy.model import errors

    shared = MemoryKube(LoopClock(harness.World.make(TYPES).loop))
    store = ConfigMapStore(shared, "karpy-system")
    store.load()
    stored = measured.Measurement("small", "KWOKNodeClass", SMALL.capacity, Resources({"memory": 6 * GI}))
    store.save(measured.to_doc([stored]))
    world, controller = _world(store=store, save_interval=30.0)
    shared.fail_next("get", "ConfigMap", errors.KubeError("the API server is away"))
    controller.reconcile()
    assert controller.entries == {}  # not read: read at the next pass
    controller.reconcile()
    assert controller.entries[("KWOKNodeClass", "small")].allocatable.get("memory") == 6 * GI
    world.apply(_claim("a"), _node("a", 5 * GI))
    shared.fail_next("update", "ConfigMap", errors.KubeError("the API server is away"))
    assert controller.reconcile().requeue_after == 30.0
    pool = world.cluster.node_pools["default"]
    types = controller.instance_types(pool, world.cluster.node_class_for(pool))
    assert {it.name: it.allocatable.get("memory") for it in types}["small"] == 5 * GI  # in memory all along
    world.loop.run(until=world.loop.now + 31)
    assert controller.reconcile().requeue_after is None
    assert measured.from_doc(store.load())[0][0].allocatable.get("memory") == 5 * GI


def test_wakes_on_nodes_claims_and_node_classes_only() -> None:
    from karpy.model.nodeclass import KWOKNodeClass
    from karpy.model.objects import Node, Pod
    from karpy.state.events import ObjectEvent

    _, controller = _world()
    assert controller.on_event(ObjectEvent("MODIFIED", Node("n")))
    assert controller.on_event(ObjectEvent("ADDED", NodeClaim("c")))
    assert controller.on_event(ObjectEvent("MODIFIED", KWOKNodeClass("k")))
    assert not controller.on_event(ObjectEvent("ADDED", Pod("p", "default")))


def test_the_true_allocatable_of_the_simulated_cloud() -> None:
    from karpy.model.objects import Node

    true = TrueAllocatable(
        {"memory": Offset(percent=-5.0)},
        {"large": {"memory": Offset(amount=-GI), "cpu": Offset(amount=-200)}},
    )
    alloc = Resources({"cpu": 1900, "memory": 8 * GI, "pods": 10})
    small = true.apply(Node("s", labels={wk.INSTANCE_TYPE: "small"}, capacity=alloc, allocatable=alloc))
    assert small.allocatable == Resources({"cpu": 1900, "memory": 8 * GI - 410 * MI, "pods": 10})  # MiB down
    large = true.apply(Node("l", labels={wk.INSTANCE_TYPE: "large"}, capacity=alloc, allocatable=alloc))
    assert large.allocatable == Resources({"cpu": 1700, "memory": 7 * GI, "pods": 10}) == large.capacity
    assert dataclasses.replace(small, allocatable=alloc) != small
