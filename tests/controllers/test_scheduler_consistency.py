"""Scheduler consistency: karpy's nomination of each pod against where it was bound.

The provisioner runs for real (its nominations feed the check as the wiring connects them);
kube-scheduler's binding is played by ``MemoryKube.bind``.
"""

from __future__ import annotations

from typing import Any

from harness import World
from test_orchestration import managed
from test_provisioning import TYPES, at, events, make_world, raw_pod

import builders
from karpy.api import encode
from karpy.controllers.provisioning import Provisioner
from karpy.controllers.scheduler_consistency import SchedulerConsistency
from karpy.model.objects import Node
from karpy.runtime import wiring
from karpy.state.events import DELETED, ObjectEvent


def _listen(world: World, check: SchedulerConsistency) -> None:
    """Feed every applied event to the check, as the wiring does."""

    def listener(event: ObjectEvent) -> None:
        check.on_event(event)

    world.feed.listeners.append(listener)


def _world() -> tuple[World, Provisioner, SchedulerConsistency]:
    world, prov = make_world()
    check = SchedulerConsistency(world.ctx)
    prov.nomination_listeners.append(check.nominated)
    _listen(world, check)
    return world, prov, check


def _pending(world: World, *names: str) -> None:
    """Pending pods that fit a small node, then one batch."""
    t0 = world.loop.now
    at(world, 0, *(raw_pod(name, cpu="500m", memory="256Mi") for name in names))
    world.loop.run(until=t0 + 1.5)


def _claim(world: World) -> str:
    (name,) = [str(o["metadata"]["name"]) for o in world.kube.objects("NodeClaim")]
    return name


def _register(world: World, claim: str, node: str, *, with_node_name: bool = True) -> None:
    """The claim's instance joins as ``node`` (the NodeClaim's status names it, or only its providerID)."""
    world.kube.create(encode.node(Node(node, provider_id=f"fake://{node}")))
    status: dict[str, Any] = {"providerID": f"fake://{node}"}
    if with_node_name:
        status["nodeName"] = node
    world.kube.patch("NodeClaim", claim, {"status": status})


def _bare_node(world: World, name: str) -> None:
    world.kube.create(encode.node(Node(name)))


def _divergences(world: World) -> list[tuple[str, str, str]]:
    return [(e.name, e.type, e.message) for e in events(world, "SchedulerDivergence")]


def _metric(world: World, name: str, reason: str | None = None) -> float:
    return world.ctx.metrics.value(name, {"reason": reason} if reason else None)


# -- bound where nominated -----------------------------------------------------------------------


def test_binding_on_the_nominated_nodeclaims_node_counts_as_bound() -> None:
    world, _, check = _world()
    _pending(world, "web")
    claim = _claim(world)
    assert check.tracked == 1
    _register(world, claim, "ip-1")
    world.kube.bind("web", "default", "ip-1")
    assert (check.bound, check.diverged, check.tracked) == (1, 0, 0)
    assert _metric(world, "karpy_scheduler_nominations_bound_total") == 1
    assert _divergences(world) == []
    assert check.divergence == {"gone": 0, "not-ready": 0, "scoring": 0}


def test_the_nodeclaims_node_is_found_by_provider_id_before_the_claim_names_it() -> None:
    world, _, check = _world()
    _pending(world, "web")
    _register(world, _claim(world), "ip-1", with_node_name=False)
    world.kube.bind("web", "default", "ip-1")
    assert (check.bound, check.diverged) == (1, 0)


# -- divergences -----------------------------------------------------------------------------------


def test_binding_elsewhere_while_the_nodeclaim_has_no_node_is_not_ready() -> None:
    world, _, check = _world()
    _pending(world, "web")
    claim = _claim(world)
    _bare_node(world, "other")  # appears after the solve: kube-scheduler takes it
    world.kube.bind("web", "default", "other")
    assert (check.bound, check.diverged, check.tracked) == (0, 1, 0)
    assert check.divergence == {"gone": 0, "not-ready": 1, "scoring": 0}
    assert _metric(world, "karpy_scheduler_nomination_divergence_total", "not-ready") == 1
    assert _metric(world, "karpy_scheduler_nomination_divergence_total", "scoring") == 0
    assert _divergences(world) == [
        (
            "web",
            "Warning",
            f"karpy nominated nodeclaim/{claim}, kube-scheduler bound node/other (reason: not-ready)",
        )
    ]


def _nominated_node(world: World) -> str:
    (nominated,) = events(world, "Nominated")
    ref = nominated.message.removeprefix("Pod should schedule on: ")
    assert ref.startswith("node/"), ref
    return str(ref.removeprefix("node/"))


def test_binding_elsewhere_when_the_nominated_node_is_ready_is_scoring() -> None:
    world, _, check = _world()
    managed(world, "a")
    managed(world, "b")
    _pending(world, "web")
    assert len(world.kube.objects("NodeClaim")) == 2  # a-claim and b-claim: no new one
    chosen = _nominated_node(world)
    other = "b" if chosen == "a" else "a"
    world.kube.bind("web", "default", other)
    assert check.divergence == {"gone": 0, "not-ready": 0, "scoring": 1} and check.diverged == 1
    assert _divergences(world)[0][2] == (
        f"karpy nominated node/{chosen}, kube-scheduler bound node/{other} (reason: scoring)"
    )


def test_binding_on_the_nominated_existing_node_counts_as_bound() -> None:
    world, _, check = _world()
    managed(world, "a")
    _pending(world, "web")
    assert _nominated_node(world) == "a"
    world.kube.bind("web", "default", "a")
    assert (check.bound, check.diverged) == (1, 0)


def test_binding_elsewhere_after_the_nominated_node_was_deleted_is_gone() -> None:
    world, _, check = _world()
    managed(world, "a")
    _pending(world, "web")
    assert _nominated_node(world) == "a"
    world.kube.delete("Node", "a")
    _bare_node(world, "b")
    world.kube.bind("web", "default", "b")
    assert check.divergence == {"gone": 1, "not-ready": 0, "scoring": 0}
    assert _metric(world, "karpy_scheduler_nomination_divergence_total", "gone") == 1


def test_binding_elsewhere_while_the_nominated_nodeclaim_is_deleting_is_gone() -> None:
    world, _, check = _world()
    _pending(world, "web")
    world.kube.delete("NodeClaim", _claim(world))  # held by its finalizer: deleting
    _bare_node(world, "b")
    world.kube.bind("web", "default", "b")
    assert check.divergence["gone"] == 1


def test_binding_elsewhere_when_the_nominated_node_turned_not_ready_is_not_ready() -> None:
    world, _, check = _world()
    managed(world, "a")
    _pending(world, "web")
    assert _nominated_node(world) == "a"
    world.kube.patch("Node", "a", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not world.cluster.nodes["a"].ready
    _bare_node(world, "b")
    world.kube.bind("web", "default", "b")
    assert check.divergence == {"gone": 0, "not-ready": 1, "scoring": 0}


def test_the_latest_nomination_is_the_one_compared() -> None:
    world, _, check = _world()
    _pending(world, "web")
    first = _claim(world)
    world.kube.patch("NodeClaim", first, {"metadata": {"finalizers": []}})
    world.kube.delete("NodeClaim", first)  # gone: the next batch (10 s later) nominates a new claim
    world.loop.run_for(11)
    second = next(
        o["metadata"]["name"] for o in world.kube.objects("NodeClaim") if o["metadata"]["name"] != first
    )
    _register(world, second, "ip-2")
    world.kube.bind("web", "default", "ip-2")
    assert (check.bound, check.diverged) == (1, 0)


# -- memory --------------------------------------------------------------------------------------


def test_memory_is_capped_and_forgets_deleted_and_bound_pods() -> None:
    world = World.make(TYPES)
    check = SchedulerConsistency(world.ctx, max_tracked=2)
    _listen(world, check)
    _bare_node(world, "n")
    for name in ("p1", "p2", "p3"):
        world.apply(raw_pod(name))
        check.nominated(builders.pod(name), "nodeclaim", f"claim-{name}")
    assert check.tracked == 2  # p1, the oldest, forgotten
    world.kube.bind("p1", "default", "n")
    assert (check.bound, check.diverged) == (0, 0)
    world.kube.delete("Pod", "p2", "default")
    assert check.tracked == 1
    world.kube.bind("p3", "default", "n")
    assert (check.diverged, check.tracked) == (1, 0)
    world.kube.patch("Pod", "p3", {"metadata": {"labels": {"again": "yes"}}}, "default")
    assert check.diverged == 1  # compared once


def test_a_pod_already_bound_is_not_remembered() -> None:
    world = World.make(TYPES)
    check = SchedulerConsistency(world.ctx)
    _bare_node(world, "n")
    world.apply(raw_pod("moving", nodeName="n"))
    check.nominated(builders.pod("moving"), "node", "elsewhere")
    assert check.tracked == 0


def test_deleted_targets_are_remembered_within_the_cap() -> None:
    world = World.make(TYPES)
    check = SchedulerConsistency(world.ctx, max_tracked=1)
    for name in ("x", "y"):
        check.on_event(ObjectEvent(DELETED, Node(name)))
    assert list(check._gone) == [("node", "y")]


# -- wiring --------------------------------------------------------------------------------------


def test_the_wiring_connects_the_check_to_the_provisioner_and_the_feed() -> None:
    world = World.make(TYPES)
    controllers = wiring.build(world.ctx, world.loop, world.feed)
    check = controllers.scheduler_consistency
    assert check.nominated in controllers.provisioner.nomination_listeners
    assert check not in controllers.all()  # no loop task: it is driven by events
    world.apply(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"}
                    }
                }
            },
        }
    )
    _pending(world, "web")
    assert check.tracked == 1
    _bare_node(world, "elsewhere")
    world.kube.bind("web", "default", "elsewhere")
    assert (check.diverged, check.divergence["not-ready"]) == (1, 1)
    assert (
        world.ctx.metrics.value("karpy_scheduler_nomination_divergence_total", {"reason": "not-ready"}) == 1
    )
