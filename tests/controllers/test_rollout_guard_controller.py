"""The rollout guard through the watch and the disruption controller, on a virtual loop.

Deployments and StatefulSets reach the cluster state as their rollout status only
(:mod:`karpy.state.rollouts`); a NodePool annotated ``karpy.sh/rollout-guard`` keeps a node that
consolidation would delete while a Deployment of its pods rolls out, then deletes it once the
settle time after the rollout's completion has passed (and the 15 s validation).
"""

from __future__ import annotations

from typing import Any

from harness import World
from test_orchestration import T0, TYPES, gone_or_deleting, managed, pool_raw

from karpy.api import encode
from karpy.controllers import disruption, orchestration
from karpy.core.disruption import rollout
from karpy.model import labels as wk
from karpy.model.objects import ROLLOUT_GUARD_ANNOTATION, Rollout

SETTLE = 120.0


def deployment_raw(*, updated: int, reason: str, at: float, replicas: int = 2) -> dict[str, Any]:
    """The Deployment ``web`` as its controller would write it: ``updated`` of ``replicas`` pods
    of the new template, the Progressing condition's reason last updated ``at``."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "generation": 2},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 600},
        "status": {
            "observedGeneration": 2,
            "replicas": replicas + (replicas - updated > 0),
            "updatedReplicas": updated,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": reason,
                    "lastUpdateTime": encode.time(at),
                    "lastTransitionTime": encode.time(T0 - 3600),
                }
            ],
        },
    }


def web_pod_raw(name: str, node: str, *, cpu: str = "500m", dnd: bool = False) -> dict[str, Any]:
    """A Running pod of the Deployment ``web`` (its ReplicaSet ``web-abc12``) on ``node``."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {"app": "web", "pod-template-hash": "abc12"},
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-abc12",
                "uid": "rs",
                "controller": True,
            }
        ],
    }
    if dnd:
        meta["annotations"] = {wk.DO_NOT_DISRUPT: "true"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "web", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def guarded_world(settle: str | None = "2m") -> tuple[World, disruption.Disruption]:
    """``n1`` (large) holds a pod of ``web`` that fits on ``n2`` (small, held by do-not-disrupt):
    consolidation deletes ``n1`` unless the guard keeps it."""
    world = World.make(TYPES, start=T0)
    orch = orchestration.Orchestrator(world.ctx)
    ctrl = disruption.Disruption(world.ctx, orch)
    world.feed.listeners.append(lambda event: ctrl.on_event(event) and ctrl.mark_dirty())
    raw = pool_raw(consolidate_after="30s")
    if settle is not None:
        raw["metadata"]["annotations"] = {ROLLOUT_GUARD_ANNOTATION: settle}
    world.apply(raw)
    managed(world, "n1", instance_type="large")
    managed(world, "n2", instance_type="small")
    world.apply(web_pod_raw("web-abc12-1", "n1"), web_pod_raw("web-abc12-2", "n2", dnd=True))
    world.add(ctrl)
    world.add(orch)
    orch.wake = lambda: world.loop.wake(orch.name)
    return world, ctrl


# -- the watch ----------------------------------------------------------------------------------------


def test_deployments_and_statefulsets_reach_the_state_as_their_rollout_status() -> None:
    world = World.make(TYPES, start=T0)
    world.apply(deployment_raw(updated=1, reason="ReplicaSetUpdated", at=T0))
    (found,) = world.cluster.snapshot(T0).rollouts
    assert found == Rollout(
        "Deployment",
        "default",
        "web",
        replicas=2,
        generation=2,
        observed_generation=2,
        status_replicas=3,
        updated=1,
        available=2,
        progress_status="True",
        progress_reason="ReplicaSetUpdated",
        progress_updated=T0,
    )
    assert rollout.progress(found, T0) == "1/2 updated"
    world.kube.patch(
        "Deployment", "web", deployment_raw(updated=2, reason=rollout.NEW_RS_AVAILABLE, at=T0 + 5), "default"
    )
    (done,) = world.cluster.snapshot(T0 + 5).rollouts
    assert rollout.progress(done, T0 + 5) is None and done.progress_updated == T0 + 5
    stateful = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "data"},
        "spec": {"replicas": 3, "template": {"this": "is not read"}},
        "status": {
            "replicas": 3,
            "updatedReplicas": 1,
            "readyReplicas": 3,
            "currentRevision": "db-1",
            "updateRevision": "db-2",
        },
    }
    world.apply(stateful)
    db = world.cluster.rollouts["StatefulSet/data/db"]
    assert (db.replicas, db.updated, db.available, db.current_revision, db.update_revision) == (
        3,
        1,
        3,
        "db-1",
        "db-2",
    )
    world.kube.delete("Deployment", "web", "default")
    assert [r.name for r in world.cluster.snapshot(T0).rollouts] == ["db"]
    assert world.problems == []


def test_a_workload_without_status_or_with_odd_fields_takes_the_defaults() -> None:
    world = World.make(TYPES, start=T0)
    world.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "bare"},
            "spec": {"replicas": "three", "paused": "yes"},
            "status": {"conditions": [{"type": "Progressing", "lastUpdateTime": "not a time"}, "junk"]},
        }
    )
    bare = world.cluster.rollouts["Deployment/default/bare"]
    assert (bare.replicas, bare.updated, bare.paused, bare.progress_updated) == (1, 0, False, None)
    assert rollout.progress(bare, T0) == "0/1 updated"


# -- the disruption controller -----------------------------------------------------------------------


def test_the_node_is_kept_while_its_deployment_rolls_and_consolidated_after_the_settle_time() -> None:
    world, ctrl = guarded_world()
    world.apply(deployment_raw(updated=1, reason="ReplicaSetUpdated", at=T0))
    world.loop.run(until=T0 + 300)
    assert not gone_or_deleting(world, "n1-claim")
    assert ctrl.pending is None
    blocked = [e for e in world.events.events if e.reason == "DisruptionTerminating"]
    assert blocked == []
    done_at = world.loop.now
    world.kube.patch(
        "Deployment", "web", deployment_raw(updated=2, reason=rollout.NEW_RS_AVAILABLE, at=done_at), "default"
    )
    world.loop.run(until=done_at + SETTLE - 1)
    assert not gone_or_deleting(world, "n1-claim") and ctrl.pending is None
    # the pass at the settle time's end finds the delete; the 15 s validation; then it starts
    world.loop.run(until=done_at + SETTLE + disruption.PASS_SECONDS + disruption.VALIDATION_SECONDS + 1)
    assert gone_or_deleting(world, "n1-claim")
    (started,) = [e for e in world.events.events if e.reason == "DisruptionTerminating" and e.kind == "Node"]
    assert started.name == "n1"
    assert done_at + SETTLE + disruption.VALIDATION_SECONDS <= started.time
    assert not gone_or_deleting(world, "n2-claim")


def test_without_the_annotation_the_same_node_goes_during_the_rollout() -> None:
    world, _ = guarded_world(settle=None)
    world.apply(deployment_raw(updated=1, reason="ReplicaSetUpdated", at=T0))
    world.loop.run(until=T0 + 120)
    assert gone_or_deleting(world, "n1-claim")


def test_a_rollout_starting_during_validation_rejects_the_command() -> None:
    world, ctrl = guarded_world()
    world.apply(deployment_raw(updated=2, reason=rollout.NEW_RS_AVAILABLE, at=T0 - 3600))
    while ctrl.pending is None and world.loop.now < T0 + 300:
        world.loop.step()
    assert ctrl.pending is not None and ctrl.pending.command.candidates == ("n1",)
    world.kube.patch(
        "Deployment",
        "web",
        deployment_raw(updated=1, reason="ReplicaSetUpdated", at=world.loop.now),
        "default",
    )
    world.loop.run(until=ctrl.pending.deadline + 1)
    assert not gone_or_deleting(world, "n1-claim")
    rejected = [e for e in world.events.events if e.reason == "ConsolidationRejected"]
    assert rejected and "churn" in rejected[0].message
