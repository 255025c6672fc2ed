"""The disruption controller on a virtual loop: passes, validation, skip cache, crash recovery.

The NodeClaim lifecycle is stood in for by the helpers of ``test_orchestration``.
"""

from __future__ import annotations

from typing import Any

from harness import World
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_orchestration import (
    DISRUPTED,
    T0,
    TYPES,
    gone_or_deleting,
    initialized,
    launch,
    managed,
    pod_raw,
    pool_raw,
    reason_condition,
    replacements,
    tainted,
)

import builders
from karpy.controllers import disruption, orchestration
from karpy.core import disruption as core
from karpy.model import labels as wk
from karpy.model.objects import Condition
from karpy.state.events import DELETED, MODIFIED, ObjectEvent


def _world(**pool: Any) -> tuple[World, disruption.Disruption, orchestration.Orchestrator]:
    world = World.make(TYPES, start=T0)
    orch = orchestration.Orchestrator(world.ctx)
    ctrl = disruption.Disruption(world.ctx, orch)
    world.feed.listeners.append(lambda event: ctrl.on_event(event) and ctrl.mark_dirty())  # what wiring does
    world.apply(pool_raw(**pool))
    return world, ctrl, orch


def _start(world: World, ctrl: disruption.Disruption, orch: orchestration.Orchestrator) -> None:
    world.add(ctrl)
    world.add(orch)
    orch.wake = lambda: world.loop.wake(orch.name)


def test_empty_node_removed_after_consolidate_after_and_validation() -> None:
    world, ctrl, orch = _world(consolidate_after="30s")
    managed(world, "empty")
    _start(world, ctrl, orch)
    world.loop.run(until=T0 + 44)
    assert ctrl.pending is not None and ctrl.pending.deadline == T0 + 45
    assert not gone_or_deleting(world, "empty-claim") and not tainted(world, "empty")
    world.loop.run(until=T0 + 45)
    assert gone_or_deleting(world, "empty-claim") and tainted(world, "empty")
    (event,) = [
        e for e in world.events.events if e.reason == "DisruptionTerminating" and e.kind == "NodeClaim"
    ]
    assert event.time == T0 + 45 and event.name == "empty-claim"
    metrics = world.ctx.metrics
    decision = {"decision": "delete", "reason": "empty", "consolidation_type": "empty"}
    assert metrics.value("karpy_voluntary_disruption_decisions_total", decision) == 1
    disrupted = {"reason": "empty", "nodepool": "default", "capacity_type": "on-demand"}
    assert metrics.value("karpy_nodeclaims_disrupted_total", disrupted) == 1
    world.loop.run(until=T0 + 120)  # the tainted Node (awaiting termination) is not "stale"
    assert tainted(world, "empty")


def test_command_invalidated_during_validation_is_rejected() -> None:
    world, ctrl, orch = _world(consolidate_after="30s")
    managed(world, "empty")
    _start(world, ctrl, orch)
    world.loop.run(until=T0 + 35)
    assert ctrl.pending is not None
    world.apply(pod_raw("late", "empty"))  # a pod binds to the node while it waits
    world.loop.run(until=T0 + 300)
    assert not gone_or_deleting(world, "empty-claim") and not tainted(world, "empty")
    (rejected,) = [e for e in world.events.events if e.reason == "ConsolidationRejected"]
    assert rejected.time == T0 + 45 and rejected.name == "empty"
    failed = world.ctx.metrics.value(
        "karpy_voluntary_disruption_failed_validations_total", {"reason": "scheduling"}
    )
    assert (
        failed == 1
        and world.ctx.metrics.value(
            "karpy_voluntary_disruption_decisions_total",
            {"decision": "delete", "reason": "empty", "consolidation_type": "empty"},
        )
        == 0
    )


def test_drifted_node_is_replaced_before_it_is_deleted() -> None:
    world, ctrl, orch = _world(consolidate_after="Never")
    managed(world, "old", conditions=(Condition("Drifted", "True", "NodeClassDrift", last_transition=T0),))
    world.apply(pod_raw("web", "old"))
    _start(world, ctrl, orch)
    world.loop.run(until=T0)  # drift starts at once: no validation delay
    (new,) = replacements(world)
    assert tainted(world, "old") and orch.in_queue("old") and ctrl.pending is None
    cond = reason_condition(world, "old-claim")
    assert cond is not None and cond.reason == "Drifted"
    world.loop.run(until=T0 + 20)
    launch(world, new)
    world.loop.run(until=T0 + 40)
    assert not gone_or_deleting(world, "old-claim")
    initialized(world, new)
    world.loop.run(until=T0 + 41)
    assert gone_or_deleting(world, "old-claim")
    assert replacements(world) == [new]  # no second replacement meanwhile
    decision = {"decision": "replace", "reason": "drifted", "consolidation_type": ""}
    assert world.ctx.metrics.value("karpy_voluntary_disruption_decisions_total", decision) == 1


_CONSOLIDATION = frozenset({core.MULTI_NODE, core.SINGLE_NODE})


def test_consolidation_methods_skip_while_the_state_is_unchanged_since_they_found_nothing() -> None:
    # one busy node: multi-node has too few candidates, single-node no cheaper option; nothing is
    # empty, so emptiness has no candidate and never settles
    world, ctrl, orch = _world(consolidate_after="0s")
    managed(world, "busy")
    world.apply(pod_raw("web", "busy"))
    _start(world, ctrl, orch)
    world.loop.run(until=T0)
    assert ctrl.skipped == frozenset() and set(ctrl.settled) == _CONSOLIDATION
    world.loop.run(until=T0 + 10)
    assert ctrl.skipped == _CONSOLIDATION
    # none of these changes upstream's consolidation state
    world.apply(pod_raw("other"))  # a new pending pod
    world.kube.patch(
        "Pod", "web", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, "default"
    )
    world.kube.patch("Node", "busy", {"metadata": {"labels": {"team": "a"}}})  # a Node label
    world.kube.patch("NodeClaim", "busy-claim", {"status": {"lastPodEventTime": "2026-01-01T00:00:05Z"}})
    world.kube.patch("NodePool", "default", {"status": {"resources": {"cpu": "2"}}})  # a status write
    world.loop.run(until=T0 + 20)
    assert ctrl.skipped == _CONSOLIDATION
    world.apply(pod_raw("bound", "busy"))  # a binding does
    world.loop.run(until=T0 + 30)
    assert ctrl.skipped == frozenset()
    world.loop.run(until=T0 + 40)
    assert ctrl.skipped == _CONSOLIDATION
    world.kube.patch("NodePool", "default", {"spec": {"weight": 5}})  # so does a NodePool spec change
    world.loop.run(until=T0 + 50)
    assert ctrl.skipped == frozenset()
    world.loop.run(until=T0 + 320)
    assert ctrl.skipped == _CONSOLIDATION  # the state last changed at T0 + 40
    world.loop.run(until=T0 + 340)
    assert ctrl.skipped == frozenset()  # stale 5 min after it last changed: run again


def test_consolidate_after_elapsing_gives_emptiness_its_first_candidate() -> None:
    world, ctrl, orch = _world(consolidate_after="60s")
    managed(world, "empty")
    _start(world, ctrl, orch)
    world.loop.run(until=T0 + 59)
    assert ctrl.pending is None and core.EMPTINESS not in ctrl.settled  # no candidate: never settled
    world.loop.run(until=T0 + 60)
    assert ctrl.pending is not None and ctrl.pending.command.method == core.EMPTINESS


def test_a_node_turning_consolidatable_waits_for_a_state_change_as_upstream() -> None:
    # upstream's Consolidatable condition changes no consolidation state: a settled single-node
    # consolidation sees the new candidate only once the state changes (or goes stale)
    world, ctrl, orch = _world(consolidate_after="60s")
    managed(world, "busy")
    world.apply(pod_raw("web", "busy"))
    world.loop.run_for(60)
    managed(world, "light")  # the pass at T0 + 60 sees only "busy" as a consolidation candidate
    world.apply(pod_raw("tiny", "light", cpu="100m"))
    _start(world, ctrl, orch)
    world.loop.run(until=T0 + 60)
    assert set(ctrl.settled) == _CONSOLIDATION
    world.loop.run(until=T0 + 355)  # "light" consolidatable from T0 + 120 on: still skipped
    assert ctrl.pending is None and ctrl.skipped == _CONSOLIDATION
    world.loop.run(until=T0 + 365)  # the state (last changed at T0 + 60) goes stale
    assert ctrl.pending is not None and ctrl.pending.command.method == core.SINGLE_NODE


def test_budget_no_op_is_never_consolidated() -> None:
    world, ctrl, orch = _world(consolidate_after="0s", budgets=("0",))
    managed(world, "empty")
    _start(world, ctrl, orch)
    world.loop.run(until=T0 + 95)
    assert ctrl.passes == 10 and ctrl.pending is None  # every 10 s
    assert not gone_or_deleting(world, "empty-claim")
    blocked = [e for e in world.events.events if e.reason == "DisruptionBlocked" and e.kind == "NodePool"]
    assert len(blocked) == 1 and "blocking budget" in blocked[0].message  # deduplicated


def test_stale_disrupted_taint_and_condition_are_stripped() -> None:
    world, ctrl, orch = _world(consolidate_after="Never")
    stale = Condition(orchestration.DISRUPTION_REASON, "True", "Drifted", last_transition=T0)
    managed(world, "crashed", taints=(DISRUPTED,), conditions=(stale,))
    managed(world, "leaving", taints=(DISRUPTED,), finalizers=("karpenter.sh/termination",))
    world.kube.delete("NodeClaim", "leaving-claim")  # being terminated: its taint stays
    _start(world, ctrl, orch)
    world.loop.run(until=T0)
    assert not tainted(world, "crashed") and reason_condition(world, "crashed-claim") is None
    assert tainted(world, "leaving")


def test_expired_claims_are_left_to_the_expiration_controller() -> None:
    # the expired node already counts as disrupting (as it will once deleted): a count budget leaves room
    world, ctrl, orch = _world(consolidate_after="30s", budgets=("10",))
    managed(world, "old", expire_after=20)
    world.apply(pod_raw("web", "old"))
    managed(world, "empty")
    _start(world, ctrl, orch)
    world.loop.run(until=T0 + 120)
    assert not gone_or_deleting(world, "old-claim") and not tainted(world, "old")
    assert gone_or_deleting(world, "empty-claim")  # disruption still acts on the rest
    reasons = {labels_of(s) for s in _decisions(world)}
    assert reasons == {("delete", "empty")}


def labels_of(sample: dict[str, str]) -> tuple[str, str]:
    return sample["decision"], sample["reason"]


def _decisions(world: World) -> list[dict[str, str]]:
    out = []
    for metric in world.ctx.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == "karpy_voluntary_disruption_decisions_total" and sample.value > 0:
                out.append(dict(sample.labels))
    return out


def test_underutilized_replace_is_validated_then_executed() -> None:
    world, ctrl, orch = _world(consolidate_after="30s")
    managed(world, "big", instance_type="large")
    world.apply(pod_raw("web", "big"))
    _start(world, ctrl, orch)
    world.loop.run(until=T0 + 44)
    assert ctrl.pending is not None and ctrl.pending.command.decision == "replace"
    assert replacements(world) == []
    world.loop.run(until=T0 + 45)
    (new,) = replacements(world)
    claim = world.kube.get("NodeClaim", new)
    (types,) = [r["values"] for r in claim["spec"]["requirements"] if r["key"] == wk.INSTANCE_TYPE]
    assert types == ["small"] and tainted(world, "big")
    decision = {"decision": "replace", "reason": "underutilized", "consolidation_type": "single"}
    assert world.ctx.metrics.value("karpy_voluntary_disruption_decisions_total", decision) == 1
    launch(world, new, initialize=True)
    world.loop.run(until=T0 + 47)
    assert gone_or_deleting(world, "big-claim")


def test_blocked_node_gets_one_disruption_blocked_event() -> None:
    world, ctrl, orch = _world(consolidate_after="0s")
    managed(world, "pinned")
    world.kube.patch("Node", "pinned", {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}})
    _start(world, ctrl, orch)
    for i in range(3):  # state changes: three computed passes
        world.apply(pod_raw(f"bound-{i}", "pinned"))
        world.loop.run_for(10)
    assert ctrl.passes >= 3
    blocked = [e for e in world.events.events if e.reason == "DisruptionBlocked" and e.kind == "Node"]
    assert [(e.name, e.message) for e in blocked] == [
        ("pinned", "node annotated karpenter.sh/do-not-disrupt=true")
    ]


# -- the nodes a pass checks for stale marks: kept from pass to pass, as a walk over every node finds
_NAMES = ("a", "b", "c")
_REASON = Condition(orchestration.DISRUPTION_REASON, "True", "Drifted", last_transition=T0)
_bools = st.booleans()
_ops = st.one_of(
    st.tuples(
        st.just("node"),
        st.sampled_from(_NAMES),
        st.sampled_from(["", "p-a", "p-b"]),
        st.booleans(),
        st.booleans(),
    ),
    st.tuples(
        st.just("claim"),
        st.sampled_from(_NAMES),
        st.sampled_from(["", "p-a", "p-b", "p-c"]),
        st.sampled_from(["", *_NAMES]),
        st.booleans(),
        st.booleans(),
    ),
    st.tuples(st.just("pod"), st.sampled_from(_NAMES), st.integers(0, 3)),
    # the marks alone change, the joins stay: only those StateNodes are replaced
    st.tuples(st.just("taint"), st.sampled_from(_NAMES), _bools),
    st.tuples(st.just("taint"), st.sampled_from(_NAMES), _bools),
    st.tuples(st.just("reason"), st.sampled_from(_NAMES), _bools),
    st.tuples(st.just("reason"), st.sampled_from(_NAMES), _bools),
)


def _walk(cluster: Any) -> list[str]:
    """What a walk over every Node finds: the disrupted taint, or a DisruptionReason on its claim."""
    out = []
    for name in cluster.node_names():
        node = cluster.nodes[name]
        claim = cluster.claim_for_node(node, last=True)
        if claim is None:
            continue
        if any(t.key == "karpenter.sh/disrupted" for t in node.taints) or claim.condition(
            orchestration.DISRUPTION_REASON
        ):
            out.append(name)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ops, min_size=1, max_size=40), st.integers(1, 6))
def test_the_marked_nodes_kept_between_passes_are_those_a_walk_finds(
    ops: list[tuple[Any, ...]], every: int
) -> None:
    world, ctrl, _ = _world()
    cluster = world.cluster
    for name in _NAMES:  # three joined pairs to start from
        cluster.apply(ObjectEvent(MODIFIED, builders.node(name, provider_id=f"p-{name}")))
        cluster.apply(ObjectEvent(MODIFIED, builders.node_claim(f"{name}-claim", provider_id=f"p-{name}")))
    for step, op in enumerate(ops):
        if op[0] == "node":
            _, name, provider_id, taint, delete = op
            taints = (DISRUPTED,) if taint else ()
            node = builders.node(name, provider_id=provider_id, taints=taints, labels={"step": str(step)})
            cluster.apply(ObjectEvent(DELETED if delete else MODIFIED, node))
        elif op[0] == "claim":
            _, name, provider_id, node_name, reason, delete = op
            claim = builders.node_claim(
                f"{name}-claim",
                provider_id=provider_id,
                node_name=node_name,
                conditions=(_REASON,) if reason else (),
                created=float(step),
            )
            cluster.apply(ObjectEvent(DELETED if delete else MODIFIED, claim))
        elif op[0] == "taint":
            _, name, taint = op
            if name in cluster.nodes:
                node = builders.replace(cluster.nodes[name], taints=(DISRUPTED,) if taint else ())
                cluster.apply(ObjectEvent(MODIFIED, node))
        elif op[0] == "reason":
            _, name, reason = op
            if f"{name}-claim" in cluster.claims:
                old = cluster.claims[f"{name}-claim"]
                kept = tuple(c for c in old.conditions if c.type != orchestration.DISRUPTION_REASON)
                claim = builders.replace(old, conditions=(*kept, _REASON) if reason else kept)
                cluster.apply(ObjectEvent(MODIFIED, claim))
        else:
            _, name, index = op
            pod = builders.pod(f"p{index}", node_name=name, created=float(step))
            cluster.apply(ObjectEvent(MODIFIED, pod))
        if step % every == 0:  # (changes pile up between two passes)
            assert ctrl._flagged(cluster.state_nodes(T0)) == _walk(cluster)
    assert ctrl._flagged(cluster.state_nodes(T0)) == _walk(cluster)
