"""Provisioner: batch windows, one claim per packing, claim shape, nominations, limits, events."""

from __future__ import annotations

from typing import Any

import pytest
from harness import World

import builders
from karpy.api import encode
from karpy.controllers import provisioning
from karpy.controllers.provisioning import Provisioner
from karpy.core import scheduling
from karpy.core.disruption import drift
from karpy.model import labels as wk
from karpy.model.objects import NodeClassRef
from karpy.model.resources import Resources
from karpy.state.events import ObjectEvent

TYPES = [
    builders.instance_type("small", cpu="2", memory="4Gi", pods="20"),
    builders.instance_type("medium", cpu="4", memory="8Gi", pods="20"),
    builders.instance_type("large", cpu="8", memory="16Gi", pods="40"),
]
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def raw_pool(
    name: str = "default", *, limits: dict[str, str] | None = None, **template: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"nodeClassRef": REF, **template}}}
    if limits is not None:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def raw_pod(
    name: str, *, cpu: str = "1", memory: str = "1Gi", meta: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    container = {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", **(meta or {})},
        "spec": {"containers": [container], **spec},
        "status": {"phase": "Pending"},
    }


def make_world(*pools: dict[str, Any], timer: Any = None) -> tuple[World, Provisioner]:
    """A world with the provisioner wired as the runtime wiring does (feed listener -> trigger + wake)."""
    world = World.make(TYPES)
    world.apply(*(pools or (raw_pool(),)))
    prov = Provisioner(world.ctx, timer=timer)
    world.add(prov)

    def listener(event: ObjectEvent) -> None:
        if prov.on_event(event):
            world.loop.wake(prov.name)

    world.feed.listeners.append(listener)
    return world, prov


def at(world: World, delay: float, *objects: dict[str, Any]) -> None:
    world.loop.call_at(world.loop.now + delay, lambda: world.apply(*objects))


def claim_objects(world: World) -> list[dict[str, Any]]:
    return world.kube.objects("NodeClaim")


def events(world: World, reason: str) -> list[Any]:
    return [e for e in world.events.events if e.reason == reason]


# -- batch windows -------------------------------------------------------------------------------


def test_burst_over_three_seconds_is_one_batch_closed_one_idle_second_after_the_last_pod() -> None:
    world, prov = make_world()
    t0 = world.loop.now
    for i in range(7):  # a pod every 0.5 s for 3 s
        at(world, 0.5 * i, raw_pod(f"p{i}"))
    world.loop.run(until=t0 + 3.99)
    assert prov.batches == 0 and claim_objects(world) == []
    world.loop.run(until=t0 + 4.0)
    assert prov.batches == 1
    assert len(claim_objects(world)) == 1  # 7 cpu: one large node
    assert {e.name for e in events(world, "Nominated")} == {f"p{i}" for i in range(7)}
    assert all(e.time == t0 + 4.0 for e in events(world, "Nominated"))


def test_steady_trickle_closes_at_the_max_window() -> None:
    world, prov = make_world()
    t0 = world.loop.now
    for i in range(40):  # a tiny pod every 0.5 s for 20 s: the idle deadline keeps moving
        at(world, 0.5 * i, raw_pod(f"p{i:02d}", cpu="100m", memory="64Mi"))
    world.loop.run(until=t0 + 9.99)
    assert prov.batches == 0
    world.loop.run(until=t0 + 10.0)
    assert prov.batches == 1
    first = {e.name for e in events(world, "Nominated")}
    assert first == {f"p{i:02d}" for i in range(21)}  # t0 .. t0+10 inclusive
    # the next window opens with the pod at t0+10.5 and closes at its max, t0+20.5
    world.loop.run(until=t0 + 20.49)
    assert prov.batches == 1
    world.loop.run(until=t0 + 20.5)
    assert prov.batches == 2


def test_trigger_arithmetic_without_the_loop() -> None:
    world, prov = make_world()
    t0 = world.loop.now
    assert prov.deadline() is None and prov.reconcile().requeue_after is None
    prov.trigger()
    assert prov.deadline() == t0 + 1.0
    assert prov.reconcile().requeue_after == pytest.approx(1.0)
    assert prov.batches == 0


def test_settable_windows() -> None:
    from karpy import settings as settings_mod

    settings = settings_mod.Settings(batch=settings_mod.BatchSettings(idle_seconds=2.0, max_seconds=3.0))
    world = World.make(TYPES, settings=settings)
    world.apply(raw_pool())
    prov = Provisioner(world.ctx)
    t0 = world.loop.now
    prov.trigger()
    world.loop.run(until=t0 + 1.5)
    prov.trigger()
    assert prov.deadline() == t0 + 3.0  # min(1.5 + 2, 0 + 3)


# -- what gets created ---------------------------------------------------------------------------


def test_pods_that_fit_together_get_one_nodeclaim_with_the_conventions() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    at(world, 0, raw_pod("a"), raw_pod("b"), raw_pod("c"))
    world.loop.run(until=t0 + 1.0)
    (obj,) = claim_objects(world)
    meta, spec = obj["metadata"], obj["spec"]
    pool_obj = world.kube.get("NodePool", "default")
    pool = world.cluster.node_pools["default"]
    assert meta["name"].startswith("default-") and meta["generateName"] == "default-"
    assert meta["labels"][wk.NODEPOOL] == "default"
    assert meta["labels"]["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert meta["annotations"][drift.HASH_ANNOTATION] == drift.pool_hash(pool)
    assert meta["annotations"][drift.HASH_VERSION_ANNOTATION] == "karpy-v1"
    assert meta["finalizers"] == ["karpenter.sh/termination"]
    owner = meta["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "NodePool",
        "default",
        pool_obj["metadata"]["uid"],
    )
    reqs = {r["key"]: r for r in spec["requirements"]}
    assert reqs[wk.INSTANCE_TYPE]["operator"] == "In"
    assert set(reqs[wk.INSTANCE_TYPE]["values"]) == {"medium", "large"}  # 3 cpu + 3Gi: small is too small
    assert set(reqs[wk.CAPACITY_TYPE]["values"]) == {"on-demand", "spot"}
    assert spec["nodeClassRef"] == REF and spec["expireAfter"] == "720h"
    assert spec["resources"]["requests"]["cpu"] == "3"
    claim = world.cluster.claims[meta["name"]]  # the feed applied it: an in-flight node now
    assert claim.requests.get("cpu") == 3000
    assert (
        world.ctx.metrics.value(
            "karpy_nodeclaims_created_total", {"reason": "provisioned", "nodepool": "default"}
        )
        == 1.0
    )
    assert {e.message for e in events(world, "Nominated")} == {
        f"Pod should schedule on: nodeclaim/{meta['name']}"
    }
    assert world.cluster.nominations[meta["name"]] == t0 + 1.0 + 20.0  # max(2 x 10 s, 10 s)


def test_pods_that_do_not_fit_together_get_several_claims() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    at(world, 0, *(raw_pod(f"p{i}", cpu="5") for i in range(3)))
    world.loop.run(until=t0 + 1.0)
    assert len(claim_objects(world)) == 3


def test_nominated_pods_do_not_cause_a_second_claim_across_batches() -> None:
    world, prov = make_world()
    t0 = world.loop.now
    at(world, 0, raw_pod("a", cpu="3"), raw_pod("b", cpu="3"))
    world.loop.run(until=t0 + 1.0)
    (first,) = claim_objects(world)
    name = first["metadata"]["name"]
    # the pods stay pending (nothing launches or binds here): re-triggered every 10 s, re-solved
    world.loop.run(until=t0 + 65.0)
    assert prov.batches >= 6
    assert [o["metadata"]["name"] for o in claim_objects(world)] == [name]
    assert world.cluster.nominations[name] > world.loop.now  # kept nominated while pods wait for it
    # dedupe: one Nominated per pod and target in 2 min, although every batch placed them again
    assert sorted(e.name for e in events(world, "Nominated")) == ["a", "b"]
    # a pod that does not fit the in-flight claim gets a claim of its own
    at(world, 0, raw_pod("c", cpu="3"))
    world.loop.run(until=world.loop.now + 1.0)
    assert len(claim_objects(world)) == 2


def test_in_flight_claim_counts_only_its_requests() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    at(world, 0, raw_pod("a", cpu="1"))
    world.loop.run(until=t0 + 1.0)
    at(world, 0, raw_pod("b", cpu="1"))
    world.loop.run(until=t0 + 3.0)
    assert len(claim_objects(world)) == 2  # the first claim holds exactly pod a's requests


def test_pods_placed_on_an_existing_node_nominate_it() -> None:
    world, _ = make_world()
    node = builders.node("existing", allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"})
    world.apply(encode.node(node))
    t0 = world.loop.now
    at(world, 0, raw_pod("a"))
    world.loop.run(until=t0 + 1.0)
    assert claim_objects(world) == []
    assert world.cluster.nominations["existing"] == t0 + 21.0
    assert [e.message for e in events(world, "Nominated")] == ["Pod should schedule on: node/existing"]


def test_ignored_pods() -> None:
    world, prov = make_world()
    world.apply(encode.node(builders.node("n1")))
    ds_owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": True}
    node_owner = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "n", "controller": True}
    ignored = [
        raw_pod("ds", meta={"ownerReferences": [ds_owner]}),
        raw_pod("mirror", meta={"ownerReferences": [node_owner]}),
        raw_pod("gated", schedulingGates=[{"name": "wait"}]),
        raw_pod("bound", nodeName="n1"),
        raw_pod("preempting") | {"status": {"phase": "Pending", "nominatedNodeName": "n1"}},
        raw_pod("done") | {"status": {"phase": "Succeeded"}},
    ]
    t0 = world.loop.now
    world.apply(*ignored)
    world.loop.run(until=t0 + 30)
    assert prov.batches == 0 and claim_objects(world) == []
    # a pod nominated to a node that no longer exists is provisioned for
    world.apply(raw_pod("orphan") | {"status": {"phase": "Pending", "nominatedNodeName": "gone"}})
    world.loop.run(until=world.loop.now + 1.0)
    assert prov.batches == 1 and events(world, "Nominated")[0].name == "orphan"


def test_pods_of_a_node_marked_for_deletion_are_provisioned_for() -> None:
    world, prov = make_world()
    world.apply(encode.node(builders.node("old", allocatable={"cpu": "2", "memory": "4Gi", "pods": "10"})))
    world.apply(raw_pod("running", nodeName="old") | {"status": {"phase": "Running"}})
    world.cluster.mark_for_deletion("old")
    prov.trigger()
    world.loop.wake(prov.name)
    world.loop.run(until=world.loop.now + 1.0)
    assert len(claim_objects(world)) == 1
    assert [e.name for e in events(world, "Nominated")] == ["running"]
    assert prov.reconcile().requeue_after is None  # no pending pod: no 10 s re-trigger


def test_of_a_leaving_node_only_currently_reschedulable_pods_are_provisioned_for() -> None:
    """As upstream's ``CurrentlyReschedulablePods``: a do-not-disrupt pod stays where it is and a
    terminating pod goes, but a terminating StatefulSet pod is planned a place (its replacement
    comes only after it is gone)."""
    world, prov = make_world()
    world.apply(encode.node(builders.node("old", allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"})))
    running = {"status": {"phase": "Running"}}
    sts = {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "u1"}]}
    gone = {"deletionTimestamp": "2026-03-02T00:00:00Z"}
    world.apply(
        raw_pod("pinned", nodeName="old", meta={"annotations": {"karpenter.sh/do-not-disrupt": "true"}})
        | running,
        raw_pod("leaving", nodeName="old", meta=gone) | running,
        raw_pod("db-0", nodeName="old", meta=sts | gone) | running,
    )
    world.cluster.mark_for_deletion("old")
    prov.trigger()
    world.loop.wake(prov.name)
    world.loop.run(until=world.loop.now + 1.0)
    assert [e.name for e in events(world, "Nominated")] == ["db-0"]


# -- limits --------------------------------------------------------------------------------------


def test_limits_bound_what_one_batch_creates() -> None:
    world, _ = make_world(raw_pool(limits={"cpu": "8"}))
    t0 = world.loop.now
    at(world, 0, *(raw_pod(f"p{i}", cpu="5") for i in range(3)))
    world.loop.run(until=t0 + 1.0)
    assert len(claim_objects(world)) == 1
    failed = events(world, "FailedScheduling")
    assert len(failed) == 2 and all("would exceed NodePool limit cpu" in e.message for e in failed)


def test_limits_are_rechecked_at_create_against_current_usage(monkeypatch: pytest.MonkeyPatch) -> None:
    world, _ = make_world(raw_pool(limits={"cpu": "10"}))
    real_solve = scheduling.solve

    def solve_while_someone_launches(snapshot: Any, pods: Any, **kw: Any) -> Any:
        results = real_solve(snapshot, pods, **kw)
        # a NodeClaim launched meanwhile (say, a disruption replacement) uses most of the limit
        rival = builders.node_claim(
            "rival",
            initialized=False,
            node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default"),
            capacity=Resources.parse({"cpu": "8", "memory": "16Gi"}),
        )
        world.kube.create(encode.node_claim(rival))
        return results

    monkeypatch.setattr(scheduling, "solve", solve_while_someone_launches)
    t0 = world.loop.now
    at(world, 0, raw_pod("a", cpu="3"))
    world.loop.run(until=t0 + 1.0)
    assert [o["metadata"]["name"] for o in claim_objects(world)] == ["rival"]
    (failed,) = events(world, "FailedScheduling")
    assert "would exceed NodePool limit cpu (checked at create)" in failed.message
    assert world.ctx.metrics.value("karpy_scheduler_unschedulable_pods_count") == 1.0
    # the next batch (10 s later) sees the rival in its snapshot: still no room, no claim
    monkeypatch.setattr(scheduling, "solve", real_solve)
    world.loop.run(until=t0 + 12.0)
    assert [o["metadata"]["name"] for o in claim_objects(world)] == ["rival"]


# -- events and metrics --------------------------------------------------------------------------


def test_failed_scheduling_events_carry_reasons_and_are_deduped_for_five_minutes() -> None:
    world, prov = make_world()
    t0 = world.loop.now
    at(world, 0, raw_pod("huge", cpu="100"), raw_pod("picky", nodeSelector={"example.com/none": "x"}))
    world.loop.run(until=t0 + 1.0)
    failed = {e.name: e for e in events(world, "FailedScheduling")}
    assert set(failed) == {"huge", "picky"}
    assert failed["huge"].type == "Warning" and failed["huge"].namespace == "default"
    assert failed["huge"].message.startswith("Failed to schedule pod, nodepool/default: ")
    assert "cpu" in failed["huge"].message
    assert "example.com/none" in failed["picky"].message
    assert world.ctx.metrics.value("karpy_scheduler_unschedulable_pods_count") == 2.0
    world.loop.run(until=t0 + 299.0)  # re-solved every 10 s, but no new event
    assert prov.batches > 20 and len(events(world, "FailedScheduling")) == 2
    world.loop.run(until=t0 + 312.0)
    assert len(events(world, "FailedScheduling")) == 4


def test_no_pending_pods_resets_the_gauge_and_stops_retriggering() -> None:
    world, prov = make_world()
    t0 = world.loop.now
    at(world, 0, raw_pod("huge", cpu="100"))
    world.loop.run(until=t0 + 1.0)
    assert world.ctx.metrics.value("karpy_scheduler_unschedulable_pods_count") == 1.0
    world.kube.delete("Pod", "huge", "default")
    world.loop.run(until=t0 + 30.0)
    assert world.ctx.metrics.value("karpy_scheduler_unschedulable_pods_count") == 0.0
    runs = world.loop.tasks[prov.name].runs
    world.loop.run(until=t0 + 300.0)
    assert world.loop.tasks[prov.name].runs == runs  # idle until a pod arrives


def test_scheduling_duration_only_with_an_injected_timer() -> None:
    ticks = iter([100.0, 100.25])
    world, _ = make_world(timer=lambda: next(ticks))
    at(world, 0, raw_pod("a"))
    world.loop.run(until=world.loop.now + 1.0)
    labels = {"controller": "provisioner"}
    assert world.ctx.metrics.value("karpy_scheduler_scheduling_duration_seconds_sum", labels) == 0.25
    plain, _ = make_world()
    at(plain, 0, raw_pod("a"))
    plain.loop.run(until=plain.loop.now + 1.0)
    assert plain.ctx.metrics.value("karpy_scheduler_scheduling_duration_seconds_count", labels) == 0.0


def test_nomination_ttl() -> None:
    assert provisioning.nomination_ttl(10.0) == 20.0
    assert provisioning.nomination_ttl(2.0) == 10.0


def test_pods_pending_before_the_provisioner_starts_are_found_by_its_first_pass() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool(), raw_pod("early"))
    prov = Provisioner(world.ctx)
    world.add(prov)  # no feed listener: nothing triggers it but its own first pass
    t0 = world.loop.now
    world.loop.run(until=t0 + 1.0)
    assert prov.batches == 1 and len(claim_objects(world)) == 1
