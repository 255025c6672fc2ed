"""The shadow controller on a virtual loop: karpy's decisions beside a stand-in installed autoscaler.

The test itself plays the installed autoscaler (Karpenter: NodeClaims and their Nodes; Cluster
Autoscaler: bare Nodes) through the in-memory API server; the shadow must decide once per pending
pod or command, count what the stand-in did, and write nothing.
"""

from __future__ import annotations

from harness import World
from test_orchestration import T0, TYPES, managed, pod_raw, pool_raw

from karpy.api import encode
from karpy.controllers import shadow as shadow_mod
from karpy.model import labels as wk
from karpy.model.objects import Condition, Node, NodeClaim, NodeClassRef
from karpy.model.taints import Taint
from karpy.runtime import wiring

SMALL, LARGE = 0.4, 1.6  # the catalog's prices ($/h) of TYPES: small (2 CPU), large (8 CPU)


def _world(*, consolidate_after: str = "Never") -> tuple[World, shadow_mod.Shadow]:
    """A NodePool, the clock moved past the objects made before the shadow starts, the shadow wired."""
    world = World.make(TYPES, start=T0)
    world.apply(pool_raw(consolidate_after=consolidate_after))
    world.loop.run(until=T0 + 5)
    return world, wiring.build_shadow(world.ctx, world.loop, world.feed, catalog=TYPES)


def run(world: World, until: float) -> None:
    """Run the loop; the shadow must have made no write meanwhile."""
    before = len(world.kube.calls)
    world.loop.run(until=until)
    writes = [c for c in world.kube.calls[before:] if c[0] not in ("get", "list")]
    assert writes == []


def value(world: World, name: str, **labels: str) -> float:
    return world.ctx.metrics.value(name, labels)


def events(world: World, reason: str) -> list[tuple[str, str, str]]:
    return [(e.kind, e.name, e.message) for e in world.events.events if e.reason == reason]


def installed_node(world: World, name: str, *, instance_type: str, taints: tuple[Taint, ...] = ()) -> None:
    """A Node launched by Cluster Autoscaler (no NodePool label)."""
    it = next(t for t in TYPES if t.name == instance_type)
    node_labels = {
        wk.INSTANCE_TYPE: instance_type,
        wk.ZONE: "test-zone-1",
        wk.HOSTNAME: name,
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }
    node = Node(name, labels=node_labels, capacity=it.capacity, allocatable=it.allocatable, taints=taints)
    world.kube.create(encode.node(node))


def bind(world: World, pod: str, node: str) -> None:
    world.kube.patch("Pod", pod, {"spec": {"nodeName": node}, "status": {"phase": "Running"}}, "default")


def test_a_pod_pending_for_minutes_is_one_would_launch_decision() -> None:
    world, shadow = _world()
    world.apply(pod_raw("web-1", cpu="1"))
    run(world, T0 + 300)
    (decision,) = shadow.launches
    assert (decision.node_pool, decision.instance_type, decision.capacity_type) == (
        "default",
        "small",
        "on-demand",
    )
    assert decision.pods == ("default/web-1",) and decision.price == SMALL
    assert decision.time == T0 + 6  # after the 1 s batch window
    assert value(world, "karpy_shadow_launches_total", nodepool="default", instance_type="small") == 1
    ((kind, name, message),) = events(world, "ShadowWouldLaunch")
    assert (kind, name) == ("Pod", "web-1")
    assert message == (
        "karpy would launch a new NodeClaim from NodePool default: small in test-zone-1 "
        "(on-demand, $0.4000/h) for 1 pod(s) (shadow mode: not launched)"
    )
    # a pod that fits the room left on the would-be claim is no new launch; one that does not is
    world.apply(pod_raw("web-2", cpu="500m"))
    run(world, T0 + 320)
    assert len(shadow.launches) == 1 and shadow._covered["default/web-2"] == decision.name
    world.apply(pod_raw("big", cpu="4"))
    run(world, T0 + 340)
    assert [d.instance_type for d in shadow.launches] == ["small", "large"]
    assert world.kube.objects("NodeClaim") == [] and world.kube.objects("Node") == []


def test_the_installed_karpenters_launches_are_counted_and_matched_with_karpys_choice() -> None:
    world, shadow = _world()
    world.apply(pod_raw("web-1", cpu="1"))
    run(world, T0 + 20)
    world.apply(pod_raw("web-2", cpu="4"))
    run(world, T0 + 40)
    assert [d.instance_type for d in shadow.launches] == ["small", "large"]
    # Karpenter launches a large node for both; its NodeClaim without a Node yet is not capacity karpy counts
    managed(world, "theirs", instance_type="large")
    assert value(world, "karpy_shadow_installed_launches_total", instance_type="large") == 1
    bind(world, "web-1", "theirs")
    bind(world, "web-2", "theirs")
    run(world, T0 + 50)
    assert shadow.matched == {"same_type": 1, "other_type": 1, "existing_node": 0}
    assert value(world, "karpy_shadow_pods_matched_total", result="other_type") == 1
    assert value(world, "karpy_shadow_launch_agreement_ratio") == 0.5
    run(world, T0 + 400)  # the decisions end once their pods run and the hold is over
    assert shadow._live == {} and len(shadow.launches) == 2


def test_an_empty_node_is_one_would_disrupt_decision_and_karpenters_removal_agrees() -> None:
    world = World.make(TYPES, start=T0)
    world.apply(pool_raw(consolidate_after="30s"))
    managed(world, "empty")
    world.loop.run(until=T0 + 5)
    shadow = wiring.build_shadow(world.ctx, world.loop, world.feed, catalog=TYPES)
    run(world, T0 + 49)  # a candidate from T0 + 30; the pass every 10 s from T0 + 5 finds it at T0 + 35
    assert list(shadow.disruptions) == [] and shadow._pending is not None  # validated 15 s after
    run(world, T0 + 600)  # held, then found again: still one decision
    (decision,) = shadow.disruptions
    assert (decision.reason, decision.decision, decision.nodes) == ("Empty", "delete", ("empty",))
    assert decision.time == T0 + 50
    assert value(world, "karpy_shadow_disruptions_total", reason="empty") == 1
    ((kind, name, message),) = events(world, "ShadowWouldDisrupt")
    assert (kind, name) == ("Node", "empty")
    assert (
        message
        == "karpy would disrupt this node: emptiness (empty): delete empty (shadow mode: not disrupted)"
    )
    # Karpenter removes it: its DisruptionReason condition says why
    reason = Condition("DisruptionReason", "True", "Empty", last_transition=world.loop.now)
    claim = world.kube.get("NodeClaim", "empty-claim")
    conditions = [*claim["status"]["conditions"], encode.condition(reason)]
    world.kube.patch("NodeClaim", "empty-claim", {"status": {"conditions": conditions}})
    world.kube.delete("NodeClaim", "empty-claim")
    world.kube.delete("Node", "empty")
    assert value(world, "karpy_shadow_installed_disruptions_total", reason="empty") == 1
    assert value(world, "karpy_shadow_disruptions_agreed_total", reason="empty") == 1
    assert value(world, "karpy_shadow_installed_launches_total", instance_type="small") == 0  # there before


def test_cluster_autoscaler_nodes_and_the_fleets_costs() -> None:
    world, shadow = _world()
    installed_node(world, "ca-1", instance_type="large")
    world.apply(pod_raw("web-1", "ca-1", cpu="1"))
    run(world, T0 + 70)
    assert value(world, "karpy_shadow_installed_launches_total", instance_type="large") == 1
    assert value(world, "karpy_shadow_fleet_cost_per_hour", fleet="installed") == LARGE
    assert value(world, "karpy_shadow_fleet_cost_per_hour", fleet="karpy") == SMALL  # 1 CPU: a small node
    assert value(world, "karpy_shadow_fleet_nodes", fleet="karpy") == 1
    assert shadow.launches == type(shadow.launches)()  # the pod runs: nothing to launch
    # CA drains and removes it (its taint says so); a Node it does not know the price of is counted apart
    world.kube.patch(
        "Node",
        "ca-1",
        {"spec": {"taints": [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}]}},
    )
    world.kube.delete("Node", "ca-1")
    world.kube.delete("Pod", "web-1", "default")
    installed_node(world, "odd", instance_type="small")
    world.kube.patch("Node", "odd", {"metadata": {"labels": {wk.INSTANCE_TYPE: "m9.huge"}}})
    run(world, T0 + 140)
    assert value(world, "karpy_shadow_installed_disruptions_total", reason="scale-down") == 1
    assert value(world, "karpy_shadow_fleet_unpriced_nodes") == 1
    assert value(world, "karpy_shadow_fleet_cost_per_hour", fleet="installed") == 0
    assert value(world, "karpy_shadow_fleet_cost_per_hour", fleet="karpy") == 0


def test_a_drifted_node_is_replaced_once_and_its_pods_wait_for_the_replacement() -> None:
    world = World.make(TYPES, start=T0)
    world.apply(pool_raw())
    drifted = Condition("Drifted", "True", "NodeClassDrift", last_transition=T0)
    managed(world, "old", instance_type="large", conditions=(drifted,))
    world.apply(pod_raw("web", "old"))
    world.loop.run(until=T0 + 5)
    shadow = wiring.build_shadow(world.ctx, world.loop, world.feed, catalog=TYPES)
    run(world, T0 + 700)  # past the hold: the command is found again, not counted again
    (decision,) = shadow.disruptions
    assert (decision.reason, decision.decision, decision.nodes, decision.replacements) == (
        "Drifted",
        "replace",
        ("old",),
        ("small",),
    )
    # the replacement is the only launch: the node's pod waits for it, not for a claim of its own
    assert [(d.instance_type, d.reason) for d in shadow.launches] == [("small", "drifted")]
    assert value(world, "karpy_shadow_launches_total", nodepool="default", instance_type="small") == 1
    assert value(world, "karpy_shadow_disruptions_total", reason="drifted") == 1
    assert [n for _, n, _ in events(world, "ShadowWouldDisrupt")] == ["old"]


def test_the_installed_autoscalers_claim_in_flight_is_not_capacity_karpy_counts_on() -> None:
    world, shadow = _world()
    world.apply(pod_raw("web-1", cpu="1"))
    large = TYPES[1]
    theirs = NodeClaim(  # Karpenter's claim for the pod, launched, its Node not registered yet
        name="theirs",
        node_pool="default",
        labels={wk.NODEPOOL: "default", wk.INSTANCE_TYPE: "large", wk.ZONE: "test-zone-1"},
        node_class_ref=NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default"),
        provider_id="fake://theirs",
        requests=large.allocatable,
        capacity=large.capacity,
        allocatable=large.allocatable,
        conditions=(Condition("Launched", "True", last_transition=T0),),
    )
    world.kube.create(encode.node_claim(theirs))
    run(world, T0 + 30)
    assert [d.instance_type for d in shadow.launches] == ["small"]  # karpy decides as if alone
    assert value(world, "karpy_shadow_installed_launches_total", instance_type="large") == 1
