"""NodeClaim lifecycle: launch, registration, initialization, liveness and garbage collection."""

from __future__ import annotations

from typing import Any

from harness import World

from builders import instance_type
from karpy.api import encode
from karpy.controllers.lifecycle import GC_INTERVAL, LAUNCH_TTL, REGISTRATION_TTL, NodeClaimLifecycle
from karpy.controllers.termination import Termination
from karpy.core.disruption import drift
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import Condition, Node, NodeClaim, NodeClassRef
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.taints import Taint
from karpy.providers.fake import FakeCloudProvider
from karpy.providers.kwok import KwokCloudProvider

REF = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
SMALL = instance_type("small", cpu="2", memory="4Gi", price=0.2)
LARGE = instance_type("large", cpu="8", memory="16Gi", price=0.8)
FINALIZER = "karpenter.sh/termination"


def raw_pool(name: str = "default", **template_labels: str) -> dict[str, Any]:
    ref = {"group": REF.group, "kind": REF.kind, "name": REF.name}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": template_labels}, "spec": {"nodeClassRef": ref}}},
    }


def raw_claim(name: str = "default-1", **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "name": name,
        "node_pool": "default",
        "labels": {wk.NODEPOOL: "default"},
        "requirements": (Requirement.in_(wk.INSTANCE_TYPE, "small", "large"),),
        "node_class_ref": REF,
        "requests": Resources.parse({"cpu": "1"}),
    }
    fields.update(overrides)
    return encode.node_claim(NodeClaim(**fields))


def kwok_world(**kwargs: Any) -> tuple[World, KwokCloudProvider, NodeClaimLifecycle]:
    types = (SMALL, LARGE)
    world = World.make(types)
    kwok = KwokCloudProvider(
        world.kube, world.ctx.clock, types_for=lambda _pool, _nc: types, loop=world.loop, **kwargs
    )
    world.cloud = kwok
    world.ctx.cloud = kwok
    world.cluster.instance_types = lambda pool, _nc: kwok.instance_types(pool)
    world.apply(
        {
            "apiVersion": "karpenter.kwok.sh/v1alpha1",
            "kind": "KWOKNodeClass",
            "metadata": {"name": "default"},
        },
        raw_pool(),
    )
    lifecycle = NodeClaimLifecycle(world.ctx)
    world.add(lifecycle)
    return world, kwok, lifecycle


def raw(world: World, kind: str, name: str) -> dict[str, Any]:
    return world.kube.get(kind, name)


def test_launch_register_initialize() -> None:
    world, _kwok, _ = kwok_world()
    world.apply(raw_claim(taints=(Taint("dedicated", "NoSchedule", "web"),)))
    world.loop.run_for(1)

    claim = world.cluster.claims["default-1"]
    assert FINALIZER in raw(world, "NodeClaim", "default-1")["metadata"]["finalizers"]
    assert claim.annotations[drift.HASH_ANNOTATION] == drift.pool_hash(world.cluster.node_pools["default"])
    assert claim.annotations[drift.HASH_VERSION_ANNOTATION] == drift.HASH_VERSION
    assert [c.type for c in claim.conditions if c.status == "True"] == [
        "Launched",
        "Registered",
        "Initialized",
    ]
    assert claim.provider_id == "kwok://default-1"
    assert claim.node_name == "default-1"
    assert claim.labels[wk.INSTANCE_TYPE] == "small"
    assert claim.labels[wk.ZONE] == "test-zone-1"
    assert claim.labels[wk.CAPACITY_TYPE] == "spot"
    assert claim.capacity == SMALL.capacity
    assert claim.allocatable == SMALL.allocatable

    node = world.cluster.nodes["default-1"]
    assert FINALIZER in raw(world, "Node", "default-1")["metadata"]["finalizers"]
    assert node.labels[wk.REGISTERED] == "true"
    assert node.labels[wk.INITIALIZED] == "true"
    assert node.labels[wk.NODEPOOL] == "default"
    assert node.taints == (Taint("dedicated", "NoSchedule", "web"),)  # unregistered removed
    assert world.ctx.metrics.value("karpy_nodes_created_total", {"nodepool": "default"}) == 1
    assert world.cluster.snapshot(world.loop.now).nodes[0].initialized


def test_registration_waits_for_a_delayed_node() -> None:
    world, _kwok, _ = kwok_world(registration_delay=60.0)
    start = world.loop.now
    world.apply(raw_claim())
    world.loop.run(until=start + 59)
    claim = world.cluster.claims["default-1"]
    assert claim.is_true("Launched") and not claim.is_true("Registered")
    world.loop.run(until=start + 70)
    claim = world.cluster.claims["default-1"]
    assert claim.is_true("Registered") and claim.is_true("Initialized")
    assert claim.condition("Registered").last_transition >= start + 60  # type: ignore[union-attr]


def test_initialization_waits_for_startup_taints_and_extended_resources() -> None:
    world, _kwok, _ = kwok_world()
    startup = Taint("example.com/agent-not-ready", "NoSchedule")
    world.apply(
        raw_claim(startup_taints=(startup,), requests=Resources.parse({"cpu": "1", "example.com/gpu": "1"}))
    )
    world.loop.run_for(30)
    claim = world.cluster.claims["default-1"]
    assert claim.is_true("Registered") and not claim.is_true("Initialized")
    node = world.cluster.nodes[claim.node_name]
    assert startup in node.taints
    assert wk.INITIALIZED not in node.labels

    world.kube.patch("Node", node.name, {"spec": {"taints": None}})  # the agent removed its taint
    world.loop.run_for(30)
    assert not world.cluster.claims["default-1"].is_true("Initialized")  # no GPU allocatable yet

    world.kube.patch("Node", node.name, {"status": {"allocatable": {"example.com/gpu": "1"}}})
    world.loop.run_for(30)
    assert world.cluster.claims["default-1"].is_true("Initialized")
    assert world.cluster.nodes[node.name].labels[wk.INITIALIZED] == "true"


def fake_world() -> tuple[World, FakeCloudProvider]:
    """A fake cloud that writes no Nodes: tests play the kubelet."""
    cloud = FakeCloudProvider([SMALL])
    world = World.make([SMALL], cloud=cloud)
    world.apply(raw_pool())
    world.add(NodeClaimLifecycle(world.ctx))
    return world, cloud


def kubelet_node(world: World, claim: str, *, ready: bool = True, **overrides: Any) -> str:
    """Write the Node a kubelet would for ``claim`` (unregistered taint, Ready as given)."""
    provider_id = world.cluster.claims[claim].provider_id
    fields: dict[str, Any] = {
        "taints": (Taint("karpenter.sh/unregistered", "NoExecute"),),
        "allocatable": SMALL.allocatable,
        "capacity": SMALL.capacity,
        "ready": ready,
        "conditions": (Condition("Ready", "True" if ready else "False"),),
    }
    fields.update(overrides)
    world.kube.create(encode.node(Node(f"{claim}-node", provider_id=provider_id, **fields)))
    world.loop.wake("nodeclaim.lifecycle")
    return f"{claim}-node"


def test_not_ready_node_is_registered_but_not_initialized() -> None:
    world, _ = fake_world()
    world.apply(raw_claim())
    world.loop.run_for(1)
    assert world.cluster.claims["default-1"].is_true("Launched")
    assert not world.cluster.claims["default-1"].is_true("Registered")  # no Node yet
    name = kubelet_node(world, "default-1", ready=False)
    world.loop.run_for(30)
    claim = world.cluster.claims["default-1"]
    assert claim.is_true("Registered") and not claim.is_true("Initialized")
    assert claim.node_name == name
    world.kube.patch("Node", name, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    world.loop.run_for(10)
    assert world.cluster.claims["default-1"].is_true("Initialized")


def test_registration_syncs_taints_unless_the_node_opts_out() -> None:
    world, _ = fake_world()
    taint = Taint("dedicated", "NoSchedule", "web")
    startup = Taint("example.com/agent-not-ready", "NoSchedule")
    world.apply(
        raw_claim("synced", taints=(taint,), startup_taints=(startup,)),
        raw_claim("opted-out", taints=(taint,)),
    )
    world.loop.run_for(1)
    synced = kubelet_node(world, "synced")
    opted_out = kubelet_node(world, "opted-out", labels={"karpenter.sh/do-not-sync-taints": "true"})
    world.loop.run_for(1)
    assert world.cluster.nodes[synced].taints == (taint, startup)
    assert world.cluster.nodes[opted_out].taints == ()
    assert world.cluster.claims["opted-out"].is_true("Initialized")
    assert not world.cluster.claims["synced"].is_true("Initialized")  # its startup taint is still there


def test_a_node_without_the_unregistered_taint_is_reported() -> None:
    world, _ = fake_world()
    world.apply(raw_claim())
    world.loop.run_for(1)
    kubelet_node(world, "default-1", taints=())
    world.loop.run_for(1)
    assert world.cluster.claims["default-1"].is_true("Registered")
    assert "UnregisteredTaintMissing" in world.events.reasons()


def test_hash_is_stamped_and_restamped_for_another_version() -> None:
    world, _kwok, _ = kwok_world()
    pool_hash = drift.pool_hash(world.cluster.node_pools["default"])
    world.apply(
        raw_claim("old", annotations={drift.HASH_ANNOTATION: "123", drift.HASH_VERSION_ANNOTATION: "v3"}),
        raw_claim(
            "drifted", annotations={drift.HASH_ANNOTATION: "123", drift.HASH_VERSION_ANNOTATION: "karpy-v1"}
        ),
        raw_claim("bare"),
    )
    world.loop.run_for(1)
    claims = world.cluster.claims
    assert claims["old"].annotations[drift.HASH_ANNOTATION] == pool_hash
    assert claims["old"].annotations[drift.HASH_VERSION_ANNOTATION] == "karpy-v1"
    assert claims["bare"].annotations[drift.HASH_ANNOTATION] == pool_hash
    assert claims["drifted"].annotations[drift.HASH_ANNOTATION] == "123"  # same version: it is drift


def test_an_initialized_claim_is_left_alone_until_it_changes() -> None:
    world, _kwok, lifecycle = kwok_world()
    world.apply(raw_claim())
    world.loop.run_for(1)
    world.kube.calls.clear()
    lifecycle.reconcile()
    assert world.kube.calls == []  # nothing to do for a settled claim
    world.kube.patch(
        "NodeClaim", "default-1", {"metadata": {"annotations": {drift.HASH_VERSION_ANNOTATION: "v3"}}}
    )
    world.kube.calls.clear()
    lifecycle.reconcile()
    assert ("patch", "NodeClaim", "default-1") in world.kube.calls
    assert world.cluster.claims["default-1"].annotations[drift.HASH_VERSION_ANNOTATION] == drift.HASH_VERSION


def test_a_claim_gone_and_made_again_under_its_name_is_taken_from_the_start() -> None:
    """What the controller remembers of a claim goes with it: the new one gets the finalizer."""
    world, _kwok, lifecycle = kwok_world()
    world.apply(raw_claim())
    world.loop.run_for(1)
    assert FINALIZER in raw(world, "NodeClaim", "default-1")["metadata"]["finalizers"]
    world.kube.patch("NodeClaim", "default-1", {"metadata": {"finalizers": []}})
    world.kube.delete("NodeClaim", "default-1")
    assert "default-1" not in world.cluster.claims
    lifecycle.reconcile()  # sees it gone
    world.kube.delete("Node", "default-1")
    world.apply(raw_claim())
    lifecycle.reconcile()
    assert FINALIZER in raw(world, "NodeClaim", "default-1")["metadata"]["finalizers"]


def test_existing_finalizers_are_kept() -> None:
    world, _kwok, _ = kwok_world()
    world.apply(raw_claim())
    world.kube.patch("NodeClaim", "default-1", {"metadata": {"finalizers": ["example.com/keep"]}})
    world.loop.run_for(1)
    assert raw(world, "NodeClaim", "default-1")["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]


def test_insufficient_capacity_deletes_the_claim_and_the_next_launch_picks_another_offering() -> None:
    world, kwok, _ = kwok_world()
    world.add(Termination(world.ctx))
    kwok.ice = {("small", "test-zone-1", "spot")}
    world.apply(raw_claim())
    world.loop.run_for(10)

    assert "default-1" not in world.cluster.claims
    assert world.kube.objects("Node") == []
    assert "InsufficientCapacityError" in world.events.reasons()
    labels = {"reason": "insufficient_capacity", "nodepool": "default", "capacity_type": ""}
    assert world.ctx.metrics.value("karpy_nodeclaims_disrupted_total", labels) == 1

    world.apply(raw_claim("default-2"))  # provisioning creates a replacement for the pods
    world.loop.wake("nodeclaim.lifecycle")  # as the wiring does on a NodeClaim event
    world.loop.run_for(10)
    claim = world.cluster.claims["default-2"]
    assert claim.is_true("Initialized")
    assert (claim.labels[wk.INSTANCE_TYPE], claim.labels[wk.ZONE], claim.labels[wk.CAPACITY_TYPE]) == (
        "small",
        "test-zone-1",
        "on-demand",
    )


def test_claim_whose_node_never_registers_is_deleted_after_15_minutes() -> None:
    world, _kwok, _ = kwok_world(registration_delay=3600.0)
    start = world.loop.now
    world.apply(raw_claim())
    world.loop.run(until=start + REGISTRATION_TTL - 1)
    claim = world.cluster.claims["default-1"]
    assert claim.is_true("Launched") and not claim.deleting
    world.loop.run(until=start + REGISTRATION_TTL + 1)
    assert world.cluster.claims["default-1"].deleting
    assert "RegistrationTimeout" in world.events.reasons()
    labels = {"reason": "liveness", "nodepool": "default", "capacity_type": "spot"}
    assert world.ctx.metrics.value("karpy_nodeclaims_disrupted_total", labels) == 1


class FailingCloud(FakeCloudProvider):
    def create(self, claim: NodeClaim) -> NodeClaim:
        self.create_calls.append(claim)
        raise errors.CloudError("throttled")


def test_launch_errors_retry_with_backoff_then_time_out() -> None:
    cloud = FailingCloud([SMALL])
    world = World.make([SMALL], cloud=cloud)
    world.apply(raw_pool())
    world.add(NodeClaimLifecycle(world.ctx))
    start = world.loop.now
    world.apply(raw_claim())
    world.loop.run(until=start + 60)
    launched = world.cluster.claims["default-1"].condition("Launched")
    assert launched is not None and (launched.status, launched.reason) == ("Unknown", "CreateError")
    assert len(cloud.create_calls) == 6  # t+0, 1, 3, 7, 15, 31 (then 63)
    failed = [e for e in world.events.events if e.reason == "FailedLaunch"]
    assert [(e.name, e.message, e.type) for e in failed] == [("default-1", "throttled", "Warning")]  # once
    world.loop.run(until=start + LAUNCH_TTL + 1)
    assert world.cluster.claims["default-1"].deleting
    assert "LaunchTimeout" in world.events.reasons()


def test_node_class_not_ready_deletes_the_claim() -> None:
    world, cloud = fake_world()
    cloud.next_error = errors.NodeClassNotReady("EC2NodeClass default is not ready")
    world.apply(raw_claim())
    world.loop.run_for(1)
    assert world.cluster.claims["default-1"].deleting
    assert "NodeClassNotReady" in world.events.reasons()


def test_claim_whose_instance_is_interrupted_is_garbage_collected() -> None:
    world, kwok, _ = kwok_world()
    world.apply(raw_claim())
    world.loop.run_for(1)
    claim = world.cluster.claims["default-1"]
    assert claim.is_true("Registered")
    kwok.delete(claim)  # a spot interruption: the instance is gone, the Node is being deleted
    world.loop.run_for(GC_INTERVAL + 1)
    assert world.cluster.claims["default-1"].deleting
    labels = {"reason": "garbage_collected", "nodepool": "default", "capacity_type": "spot"}
    assert world.ctx.metrics.value("karpy_nodeclaims_disrupted_total", labels) == 1


def test_a_ready_node_is_trusted_over_the_cloud_listing() -> None:
    world, cloud = fake_world()
    world.apply(raw_claim())
    world.loop.run_for(1)
    name = kubelet_node(world, "default-1")
    world.loop.run_for(1)
    assert world.cluster.claims["default-1"].is_true("Registered")

    cloud.instances.clear()  # the cloud lost track of the instance
    world.loop.run_for(GC_INTERVAL * 2)
    assert not world.cluster.claims["default-1"].deleting  # the kubelet still reports Ready
    world.kube.patch("Node", name, {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    world.loop.run_for(GC_INTERVAL)
    assert world.cluster.claims["default-1"].deleting


def test_instances_without_a_claim_are_garbage_collected() -> None:
    world, kwok, _ = kwok_world()
    orphan = NodeClaim("orphan", node_pool="default", node_class_ref=REF, labels={wk.NODEPOOL: "default"})
    kwok.create(orphan)  # launched, but its NodeClaim was never written
    world.apply(raw_claim())
    world.loop.run_for(GC_INTERVAL + 1)
    assert [c.name for c in kwok.delete_calls] == ["orphan"]
    assert sorted(world.cluster.nodes) == ["default-1"]
    assert not world.cluster.claims["default-1"].deleting


def test_a_claim_lost_while_it_launches_has_its_instance_deleted_and_is_not_launched_again() -> None:
    """The claim is gone (NotFound) when its launch is written back, e.g. an API server restored
    empty: the instance just launched is deleted at once instead of running until garbage
    collection, and the claim, still in the state until the watch catches up, is not relaunched."""
    world, kwok, _ = kwok_world()
    launch = kwok.create
    created: list[str] = []

    def create_then_lose(claim: NodeClaim) -> NodeClaim:
        hydrated = launch(claim)
        created.append(claim.name)
        world.kube.patch("NodeClaim", claim.name, {"metadata": {"finalizers": []}})
        world.kube.delete("NodeClaim", claim.name)
        return hydrated

    kwok.create = create_then_lose  # type: ignore[method-assign]
    world.apply(raw_claim())
    world.loop.run_for(GC_INTERVAL / 2)
    assert created == ["default-1"]
    assert [c.name for c in kwok.delete_calls] == ["default-1"]
    assert "default-1" not in world.cluster.nodes


def test_conditions_keep_their_transition_times() -> None:
    from karpy.controllers.lifecycle import set_conditions

    current = [Condition("Launched", "True", last_transition=10.0), Condition("Registered", "False")]
    out = set_conditions(current, [Condition("Launched", "True"), Condition("Registered", "True")], now=50.0)
    assert [(c["type"], c["status"], c["lastTransitionTime"]) for c in out] == [
        ("Launched", "True", encode.time(10.0)),
        ("Registered", "True", encode.time(50.0)),
    ]


class _BatchCloud(FakeCloudProvider):
    """A fake that launches in batches (as the AWS provider does) and fails the claims it is told to."""

    def __init__(self, *args: Any, fail: dict[str, errors.CloudError] | None = None) -> None:
        super().__init__(*args)
        self.batches: list[list[str]] = []
        self.fail = fail or {}

    def create_batch(self, claims: Any) -> list[NodeClaim | errors.CloudError]:
        self.batches.append([c.name for c in claims])
        out: list[NodeClaim | errors.CloudError] = []
        for claim in claims:
            if claim.name in self.fail:
                out.append(self.fail[claim.name])
            else:
                launched = self.create(claim)
                out.append(dataclass_replace(launched, annotations={**launched.annotations, "x/batch": "1"}))
        return out


def dataclass_replace(claim: NodeClaim, **changes: Any) -> NodeClaim:
    import dataclasses

    return dataclasses.replace(claim, **changes)


def test_a_batch_provider_gets_every_claim_of_a_pass_in_one_call() -> None:
    cloud = _BatchCloud((SMALL, LARGE), fail={"default-3": errors.InsufficientCapacity("no capacity")})
    world = World.make((SMALL, LARGE), cloud=cloud)
    world.apply(raw_pool(), raw_claim("default-1"), raw_claim("default-2"), raw_claim("default-3"))
    NodeClaimLifecycle(world.ctx).reconcile()
    assert cloud.batches == [["default-1", "default-2", "default-3"]]
    assert [c.name for c in cloud.create_calls] == ["default-1", "default-2"]  # no second launch
    for name in ("default-1", "default-2"):
        claim = world.cluster.claims[name]
        assert claim.is_true("Launched") and claim.provider_id.startswith("fake://")
        assert claim.annotations["x/batch"] == "1"  # the provider's annotations reach the claim
    assert world.cluster.claims["default-3"].deleting  # insufficient capacity: deleted, as one by one
    assert "InsufficientCapacityError" in world.events.reasons()


def test_a_single_claim_takes_the_ordinary_path() -> None:
    cloud = _BatchCloud((SMALL, LARGE))
    world = World.make((SMALL, LARGE), cloud=cloud)
    world.apply(raw_pool(), raw_claim("default-1"))
    NodeClaimLifecycle(world.ctx).reconcile()
    assert cloud.batches == []
    assert world.cluster.claims["default-1"].is_true("Launched")
