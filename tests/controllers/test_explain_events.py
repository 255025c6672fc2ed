"""The operator's answers to "why" as events and metrics: FailedScheduling with its reason class,
``karpy_pods_unschedulable{reason}``, Nominated, DisruptionBlocked on the NodeClaim too, and
Unconsolidatable with its 15-minute dedupe."""

from __future__ import annotations

from typing import Any

from harness import World
from test_orchestration import T0, managed, pod_raw, pool_raw
from test_orchestration import TYPES as DISRUPTION_TYPES
from test_provisioning import at, events, make_world, raw_pod, raw_pool

import builders
from karpy.controllers import disruption, orchestration, provisioning
from karpy.core.scheduling import PodError
from karpy.model import labels as wk
from karpy.state.events import ObjectEvent


def _unschedulable(world: World, reason: str) -> float:
    return world.ctx.metrics.value("karpy_pods_unschedulable", {"reason": reason})


def _sample_labels(world: World, name: str) -> list[str]:
    """The ``reason`` labels the registry exports for a metric (to see which series exist)."""
    metric = next(m for m in world.ctx.metrics.registry.collect() if m.name == name)
    return sorted(s.labels["reason"] for s in metric.samples)


# -- FailedScheduling and the unschedulable gauge ------------------------------------------------


def test_failed_scheduling_names_the_reason_class() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    at(world, 0, raw_pod("huge", cpu="100"), raw_pod("picky", nodeSelector={"example.com/none": "x"}))
    world.loop.run(until=t0 + 1.0)
    failed = {e.name: e.message for e in events(world, "FailedScheduling")}
    assert failed["huge"].startswith("Failed to schedule pod, nodepool/default: ")
    assert failed["huge"].endswith(" (reason: resources)")
    assert failed["picky"].endswith(" (reason: requirements)")


def test_unschedulable_gauge_counts_by_reason_and_zeroes_classes_that_clear() -> None:
    world, prov = make_world()
    t0 = world.loop.now
    at(
        world,
        0,
        raw_pod("huge-1", cpu="100"),
        raw_pod("huge-2", cpu="100"),
        raw_pod("picky", nodeSelector={"example.com/none": "x"}),
        raw_pod("fine"),
    )
    world.loop.run(until=t0 + 1.0)
    assert _unschedulable(world, "resources") == 2
    assert _unschedulable(world, "requirements") == 1
    assert world.ctx.metrics.value("karpy_scheduler_unschedulable_pods_count") == 3
    assert _sample_labels(world, "karpy_pods_unschedulable") == ["requirements", "resources"]

    world.kube.delete("Pod", "huge-1", "default")
    world.kube.delete("Pod", "huge-2", "default")
    world.loop.run(until=t0 + 12.0)  # the 10 s re-trigger solves again
    assert _unschedulable(world, "resources") == 0  # kept as a series that reads 0
    assert _unschedulable(world, "requirements") == 1
    assert _sample_labels(world, "karpy_pods_unschedulable") == ["requirements", "resources"]

    world.kube.delete("Pod", "picky", "default")
    batches = prov.batches
    world.loop.run(until=t0 + 40.0)
    assert prov.batches > batches
    assert _unschedulable(world, "resources") == 0 and _unschedulable(world, "requirements") == 0


def test_pods_left_out_by_a_nodepool_limit_count_as_nodepool_limit() -> None:
    world, _ = make_world(raw_pool(limits={"cpu": "8"}))
    t0 = world.loop.now
    at(world, 0, *(raw_pod(f"p{i}", cpu="5") for i in range(3)))
    world.loop.run(until=t0 + 1.0)
    failed = events(world, "FailedScheduling")
    assert len(failed) == 2 and all(e.message.endswith("(reason: nodepool-limit)") for e in failed)
    assert _unschedulable(world, "nodepool-limit") == 2


def _error(**reasons: str) -> PodError:
    return PodError(builders.pod("p"), dict(reasons))


def test_pod_reason_prefers_a_nodepool_rejection_that_is_not_a_taint() -> None:
    taint = "did not tolerate taint example.com/gpu=true:NoSchedule"
    short = "not enough cpu: wants 100, 8 free"
    assert (
        provisioning.pod_reason(_error(**{"nodepool/gpu": taint, "nodepool/default": short})) == "resources"
    )
    assert provisioning.pod_reason(_error(**{"nodepool/gpu": taint})) == "taint"
    # the NodePools' verdicts say more than the existing nodes'
    nodes = f"node-a: {taint}"
    both = {"existing nodes": nodes, "nodepool/default": short}
    assert provisioning.pod_reason(_error(**both)) == "resources"
    assert provisioning.pod_reason(_error(**{"existing nodes": nodes})) == "taint"
    assert provisioning.pod_reason(_error(nodepools="no NodePool can launch nodes")) == "no-nodepool"
    assert provisioning.pod_reason(_error(validation="label karpenter.sh/nodepool is restricted")) == (
        "validation"
    )


# -- Nominated ---------------------------------------------------------------------------------


def test_nominated_events_name_the_nodeclaim_and_listeners_hear_every_nomination() -> None:
    world, prov = make_world()
    heard: list[tuple[str, str, str]] = []
    prov.nomination_listeners.append(lambda pod, kind, name: heard.append((pod.key, kind, name)))
    t0 = world.loop.now
    at(world, 0, raw_pod("web"))
    world.loop.run(until=t0 + 1.0)
    (claim,) = [o["metadata"]["name"] for o in world.kube.objects("NodeClaim")]
    (nominated,) = events(world, "Nominated")
    assert (nominated.name, nominated.message) == ("web", f"Pod should schedule on: nodeclaim/{claim}")
    assert heard == [("default/web", "nodeclaim", claim)]
    world.loop.run(until=t0 + 12.0)  # still pending: nominated again (the event deduped, not the call)
    assert len(events(world, "Nominated")) == 1
    assert heard[-1] == ("default/web", "nodeclaim", claim) and len(heard) >= 2


# -- DisruptionBlocked and Unconsolidatable ------------------------------------------------------


def _disruption_world(**pool: Any) -> tuple[World, disruption.Disruption]:
    world = World.make(DISRUPTION_TYPES, start=T0)
    orch = orchestration.Orchestrator(world.ctx)
    ctrl = disruption.Disruption(world.ctx, orch)

    def listener(event: ObjectEvent) -> None:  # what the wiring does
        if ctrl.on_event(event):
            ctrl.mark_dirty()

    world.feed.listeners.append(listener)
    world.apply(pool_raw(**pool))
    world.add(ctrl)
    world.add(orch)
    orch.wake = lambda: world.loop.wake(orch.name)
    return world, ctrl


def _reasons(world: World, reason: str) -> list[tuple[str, str, str]]:
    return [(e.kind, e.name, e.message) for e in world.events.events if e.reason == reason]


def test_disruption_blocked_is_posted_on_the_node_and_its_nodeclaim() -> None:
    world, ctrl = _disruption_world(consolidate_after="0s")
    claim = managed(world, "pinned")
    world.kube.patch("Node", "pinned", {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}})
    for i in range(3):
        world.apply(pod_raw(f"bound-{i}", "pinned"))
        world.loop.run_for(10)
    assert ctrl.passes >= 3
    why = "node annotated karpenter.sh/do-not-disrupt=true"
    blocked = [e for e in _reasons(world, "DisruptionBlocked") if e[0] != "NodePool"]
    assert blocked == [("Node", "pinned", why), ("NodeClaim", claim, why)]


def _one_stuck_node() -> tuple[World, disruption.Disruption, str]:
    world, ctrl = _disruption_world(consolidate_after="0s")
    claim = managed(world, "only")  # the cheapest type, one pod: nowhere to move it, nothing cheaper
    world.apply(pod_raw("web", "only"))
    return world, ctrl, claim


def _churn(world: World, ctrl: disruption.Disruption) -> None:
    """Change the state every 100 s for 14 minutes (consolidation runs again each time)."""
    for i in range(8):
        world.loop.run_for(100)
        world.kube.patch("Pod", "web", {"metadata": {"labels": {"round": str(i)}}}, "default")
        ctrl.mark_dirty()
    world.loop.run(until=T0 + 899)


def test_unconsolidatable_names_why_on_node_and_nodeclaim_and_waits_15_minutes() -> None:
    world, ctrl, claim = _one_stuck_node()
    world.loop.run_for(5)
    found = _reasons(world, "Unconsolidatable")
    assert [(kind, name) for kind, name, _ in found] == [("Node", "only"), ("NodeClaim", claim)]
    message = found[0][2]
    assert message == found[1][2] and message and not message.startswith("not consolidated")
    record = ctrl._compute(world.cluster.snapshot(world.loop.now)).records["only"]
    assert f"not consolidated: {message}" in record.reasons  # the decision's own text
    _churn(world, ctrl)
    assert len(_reasons(world, "Unconsolidatable")) == 2
    world.loop.run(until=T0 + 905)
    ctrl.mark_dirty()
    world.loop.run(until=T0 + 930)
    assert _reasons(world, "Unconsolidatable")[2:] == found


def test_without_the_dedupe_the_same_churn_would_post_again() -> None:
    world, ctrl, _ = _one_stuck_node()
    ctrl._unconsolidatable.window = 0.0
    world.loop.run_for(5)
    _churn(world, ctrl)
    assert len(_reasons(world, "Unconsolidatable")) >= 2 * 8


def test_consolidation_switched_off_for_non_empty_nodes_is_unconsolidatable() -> None:
    world, _ = _disruption_world(consolidate_after="0s", policy="WhenEmpty")
    claim = managed(world, "busy")
    world.apply(pod_raw("web", "busy"))
    world.loop.run_for(5)
    assert _reasons(world, "Unconsolidatable") == [
        ("Node", "busy", "consolidationPolicy WhenEmpty"),
        ("NodeClaim", claim, "consolidationPolicy WhenEmpty"),
    ]


def test_nodes_inside_consolidate_after_are_not_unconsolidatable() -> None:
    world, _ = _disruption_world(consolidate_after="1h")
    managed(world, "young")
    world.apply(pod_raw("web", "young"))
    world.loop.run_for(60)
    assert _reasons(world, "Unconsolidatable") == []
