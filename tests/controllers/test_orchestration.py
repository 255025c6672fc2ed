"""The disruption orchestration queue: taint, launch replacements, wait, delete or roll back.

Also home of the small test-only helpers both disruption test modules use (raw NodePools,
managed nodes, pods, and ``launch``/``initialize`` standing in for the NodeClaim lifecycle
controller, which these tests do not run).
"""

from __future__ import annotations

from typing import Any

from harness import World

import builders
from karpy.api import encode
from karpy.controllers import orchestration
from karpy.core import disruption as core
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType
from karpy.model.objects import Condition, Node, NodeClaim, NodeClassRef
from karpy.model.taints import Taint

T0 = 1_767_225_600.0
DISRUPTED = Taint("karpenter.sh/disrupted", "NoSchedule")
TYPES = (
    builders.instance_type("small", cpu="2", memory="2Gi"),
    builders.instance_type("large", cpu="8", memory="8Gi"),
)


# -- world helpers (shared with test_disruption_controller) ----------------------------------------


def pool_raw(
    name: str = "default",
    *,
    consolidate_after: str = "30s",
    policy: str = "WhenEmptyOrUnderutilized",
    budgets: tuple[str, ...] = ("100%",),
) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": policy,
                "consolidateAfter": consolidate_after,
                "budgets": [{"nodes": b} for b in budgets],
            },
        },
    }


def _type(name: str) -> InstanceType:
    return next(it for it in TYPES if it.name == name)


def managed(
    world: World,
    name: str,
    *,
    pool: str = "default",
    instance_type: str = "small",
    conditions: tuple[Condition, ...] = (),
    taints: tuple[Taint, ...] = (),
    expire_after: float | None = None,
    finalizers: tuple[str, ...] = (),
) -> str:
    """A registered, initialized Node + NodeClaim (``<name>-claim``); returns the claim's name."""
    now = world.loop.now
    it = _type(instance_type)
    shared = {
        wk.NODEPOOL: pool,
        wk.INSTANCE_TYPE: it.name,
        wk.ZONE: builders.ZONES[0],
        wk.CAPACITY_TYPE: "on-demand",
    }
    provider_id = f"fake://{name}"
    claim = NodeClaim(
        name=f"{name}-claim",
        node_pool=pool,
        labels=shared,
        provider_id=provider_id,
        node_name=name,
        capacity=it.capacity,
        allocatable=it.allocatable,
        requests=it.allocatable,
        expire_after=expire_after,
        node_class_ref=NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default"),
        conditions=(
            Condition("Launched", "True", last_transition=now),
            Condition("Registered", "True", last_transition=now),
            Condition("Initialized", "True", last_transition=now),
            *conditions,
        ),
    )
    world.kube.create(encode.node_claim(claim, finalizers=finalizers))
    node = Node(
        name,
        labels={**shared, wk.HOSTNAME: name, wk.REGISTERED: "true", wk.INITIALIZED: "true"},
        taints=taints,
        capacity=it.capacity,
        allocatable=it.allocatable,
        provider_id=provider_id,
    )
    world.kube.create(encode.node(node))
    return claim.name


def pod_raw(name: str, node: str = "", *, cpu: str = "500m") -> dict[str, Any]:
    """A Running pod owned by a ReplicaSet, bound to ``node`` (pending when empty)."""
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "rs",
                    "uid": "rs-1",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {
            "phase": "Running" if node else "Pending",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
        if node
        else {"phase": "Pending"},
    }


def launch(world: World, claim_name: str, *, initialize: bool = False) -> str:
    """Stand in for the lifecycle controller: launch through the fake provider, register a Node."""
    now = world.loop.now
    hydrated = world.cloud.create(world.cluster.claims[claim_name])
    node_name = f"node-{claim_name}"
    conditions = [
        {"type": "Launched", "status": "True", "lastTransitionTime": encode.time(now)},
        {"type": "Registered", "status": "True", "lastTransitionTime": encode.time(now)},
    ]
    world.kube.patch(
        "NodeClaim",
        claim_name,
        {
            "metadata": {"labels": hydrated.labels},
            "status": {
                "providerID": hydrated.provider_id,
                "nodeName": node_name,
                "capacity": encode.resources(hydrated.capacity),
                "allocatable": encode.resources(hydrated.allocatable),
                "conditions": conditions,
            },
        },
    )
    node = Node(
        node_name,
        labels={**hydrated.labels, wk.HOSTNAME: node_name, wk.REGISTERED: "true"},
        capacity=hydrated.capacity,
        allocatable=hydrated.allocatable,
        provider_id=hydrated.provider_id,
    )
    world.kube.create(encode.node(node))
    if initialize:
        initialized(world, claim_name)
    return node_name


def initialized(world: World, claim_name: str) -> None:
    """Mark a launched claim Initialized (condition + node label), as the lifecycle controller would."""
    raw = world.kube.get("NodeClaim", claim_name)
    conditions = [*raw["status"]["conditions"]]
    conditions.append(
        {"type": "Initialized", "status": "True", "lastTransitionTime": encode.time(world.loop.now)}
    )
    world.kube.patch("NodeClaim", claim_name, {"status": {"conditions": conditions}})
    node = raw["status"]["nodeName"]
    world.kube.patch("Node", node, {"metadata": {"labels": {wk.INITIALIZED: "true"}}})


def replacements(world: World) -> list[str]:
    """NodeClaims created by disruption (they carry a creation reason annotation)."""
    return [
        o["metadata"]["name"]
        for o in world.kube.objects("NodeClaim")
        if "karpy.sh/creation-reason" in o["metadata"].get("annotations", {})
    ]


def tainted(world: World, node: str) -> bool:
    return DISRUPTED in world.cluster.nodes[node].taints


def reason_condition(world: World, claim: str) -> Condition | None:
    return world.cluster.claims[claim].condition(orchestration.DISRUPTION_REASON)


def gone_or_deleting(world: World, claim: str) -> bool:
    c = world.cluster.claims.get(claim)
    return c is None or c.deleting


# -- orchestration on its own -------------------------------------------------------------------------


def _drift_world() -> tuple[World, orchestration.Orchestrator, core.Command]:
    world = World.make(TYPES, start=T0)
    world.apply(pool_raw(consolidate_after="Never"))
    managed(world, "old", conditions=(Condition("Drifted", "True", "NodeClassDrift", last_transition=T0),))
    world.apply(pod_raw("web", "old"))
    assert world.problems == []
    command = core.compute(world.cluster.snapshot(world.loop.now)).command
    assert command is not None and command.reason == core.DRIFTED and len(command.replacements) == 1
    orch = orchestration.Orchestrator(world.ctx)
    world.add(orch)
    return world, orch, command


def test_replace_waits_for_initialized_replacement_then_deletes() -> None:
    world, orch, command = _drift_world()
    assert orch.start(command)
    (new,) = replacements(world)
    assert (
        world.kube.get("NodeClaim", new)["metadata"]["annotations"]["karpy.sh/creation-reason"] == "drifted"
    )
    assert tainted(world, "old") and orch.in_queue("old")
    cond = reason_condition(world, "old-claim")
    assert cond is not None and cond.reason == "Drifted"
    assert "old" in world.cluster.marked_for_deletion
    assert world.cluster.nominations[new] > world.loop.now
    assert "DisruptionLaunching" in world.events.reasons()
    world.loop.run(until=T0 + 5)
    launch(world, new)
    world.loop.run(until=T0 + 60)
    assert not gone_or_deleting(world, "old-claim")
    assert "DisruptionWaitingReadiness" in world.events.reasons()
    initialized(world, new)
    world.loop.run(until=T0 + 61)
    assert gone_or_deleting(world, "old-claim")
    assert orch.queue == [] and orch.in_queue("old")  # deleted, its Node not gone yet
    terminating = [e for e in world.events.events if e.reason == "DisruptionTerminating"]
    assert {e.kind for e in terminating} == {"Node", "NodeClaim"} and terminating[0].time == T0 + 61
    labels = {"reason": "drifted", "nodepool": "default", "capacity_type": "on-demand"}
    assert world.ctx.metrics.value("karpy_nodeclaims_disrupted_total", labels) == 1
    world.kube.delete("Node", "old")
    world.loop.run(until=T0 + 61 + orchestration.IDLE_SECONDS)
    assert not orch.in_queue("old") and "old" not in world.cluster.marked_for_deletion


def test_replacement_that_never_initializes_times_out_and_rolls_back() -> None:
    world, orch, command = _drift_world()
    assert orch.start(command)
    (new,) = replacements(world)
    launch(world, new)
    world.loop.run(until=T0 + 600)
    assert orch.queue and tainted(world, "old")
    world.loop.run(until=T0 + 601)
    assert orch.queue == [] and not orch.in_queue("old")
    assert not tainted(world, "old") and reason_condition(world, "old-claim") is None
    assert "old" not in world.cluster.marked_for_deletion
    assert not gone_or_deleting(world, "old-claim")
    assert (
        world.ctx.metrics.value("karpy_voluntary_disruption_queue_failures_total", {"reason": "timeout"}) == 1
    )
    assert orchestration.queue_timeout(1) == 600 and orchestration.queue_timeout(10**6) == 3600


def test_vanished_replacement_fails_the_command() -> None:
    world, orch, command = _drift_world()
    assert orch.start(command)
    (new,) = replacements(world)
    world.loop.run(until=T0 + 3)
    world.kube.patch("NodeClaim", new, {"metadata": {"finalizers": None}})
    world.kube.delete("NodeClaim", new)  # insufficient capacity: the lifecycle controller deleted it
    world.loop.run(until=T0 + 4)
    assert orch.queue == [] and not tainted(world, "old")
    assert "old" not in world.cluster.marked_for_deletion and not gone_or_deleting(world, "old-claim")
    failures = "karpy_voluntary_disruption_queue_failures_total"
    assert world.ctx.metrics.value(failures, {"reason": "replacement_vanished"}) == 1


def test_replace_aborts_when_a_taint_fails() -> None:
    world, orch, command = _drift_world()
    world.kube.fail_next("patch", "Node", errors.Conflict("stale"))
    assert not orch.start(command)
    assert replacements(world) == [] and not tainted(world, "old") and orch.queue == []
    assert "old" not in world.cluster.marked_for_deletion


def test_failed_replacement_create_untaints_and_disrupts_nothing() -> None:
    world, orch, command = _drift_world()
    world.kube.fail_next("create", "NodeClaim", errors.Invalid("rejected"))
    assert not orch.start(command)
    assert replacements(world) == [] and not tainted(world, "old")
    assert reason_condition(world, "old-claim") is None and orch.queue == []
    assert "old" not in world.cluster.marked_for_deletion


def test_delete_command_deletes_at_once_and_skips_untaintable_candidates() -> None:
    world = World.make(TYPES, start=T0)
    world.apply(pool_raw())
    managed(world, "a")
    managed(world, "b")
    orch = orchestration.Orchestrator(world.ctx)
    world.kube.fail_next("patch", "Node", errors.Conflict("stale"))  # tainting "a" fails
    assert orch.start(core.Command(core.EMPTY, "emptiness", ("a", "b")))
    assert not gone_or_deleting(world, "a-claim") and not tainted(world, "a")
    assert gone_or_deleting(world, "b-claim") and tainted(world, "b")
    assert world.cluster.marked_for_deletion == {"b"}
