"""NodeClaimStatus: ``lastPodEventTime`` with its 10 s dedupe, and the Consolidatable condition."""

from __future__ import annotations

import contextlib
from typing import Any

from harness import World
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders
from karpy.api import encode
from karpy.controllers.nodeclaim_status import CONSOLIDATABLE, REQUEUE_SECONDS, NodeClaimStatus
from karpy.model import errors
from karpy.model.objects import NodeClassRef
from karpy.state.events import ObjectEvent

TYPES = [builders.instance_type("medium", cpu="4", memory="8Gi")]
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def raw_pool(name: str = "default", *, consolidate_after: str = "30s") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"nodeClassRef": REF}},
            "disruption": {"consolidateAfter": consolidate_after},
        },
    }


def raw_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending"},
    }


def add_node(
    world: World, name: str, *, pool: str = "default", initialized: bool = True, **claim: Any
) -> None:
    """A registered NodeClaim ``<name>-claim`` (created and initialized now) and its Node ``name``."""
    provider_id = f"fake://{name}"
    model = builders.node_claim(
        f"{name}-claim",
        pool=pool,
        created=world.loop.now,
        initialized=initialized,
        provider_id=provider_id,
        node_name=name,
        node_class_ref=NodeClassRef(**REF),
        **claim,
    )
    world.apply(encode.node_claim(model), encode.node(builders.node(name, provider_id=provider_id)))


def make_world(*pools: dict[str, Any]) -> tuple[World, NodeClaimStatus]:
    world = World.make(TYPES)
    world.apply(*(pools or (raw_pool(),)))
    add_node(world, "n1")
    add_node(world, "n2")
    status = NodeClaimStatus(world.ctx)
    world.add(status)

    def listener(event: ObjectEvent) -> None:
        if status.on_event(event):
            world.loop.wake(status.name)

    world.feed.listeners.append(listener)
    return world, status


def at(world: World, when: float, action: Any) -> None:
    world.loop.call_at(when, action)


def bind(world: World, pod: str, node: str) -> None:
    world.apply(raw_pod(pod))
    world.kube.bind(pod, "default", node)


def last_event(world: World, claim: str = "n1-claim") -> float | None:
    return world.cluster.claims[claim].last_pod_event


def consolidatable(world: World, claim: str = "n1-claim") -> Any:
    return world.cluster.claims[claim].condition(CONSOLIDATABLE)


def test_last_pod_event_time_follows_binds_removals_and_terminal_pods_with_a_10s_dedupe() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    at(world, t0 + 1, lambda: bind(world, "p1", "n1"))
    at(world, t0 + 5, lambda: bind(world, "p2", "n1"))  # 4 s later: dropped (dedupe)
    at(world, t0 + 12, lambda: world.kube.delete("Pod", "p1", "default"))
    at(world, t0 + 15, lambda: world.kube.patch("Pod", "p2", {"status": {"phase": "Succeeded"}}, "default"))
    at(world, t0 + 26, lambda: world.kube.delete("Pod", "p2", "default"))
    at(world, t0 + 27, lambda: bind(world, "other", "n2"))  # another node: n1 untouched
    world.loop.run(until=t0 + 0.5)
    assert last_event(world) is None
    world.loop.run(until=t0 + 1)
    assert last_event(world) == t0 + 1
    assert world.kube.get("NodeClaim", "n1-claim")["status"]["lastPodEventTime"] == encode.time(t0 + 1)
    world.loop.run(until=t0 + 11)
    assert last_event(world) == t0 + 1
    world.loop.run(until=t0 + 12)
    assert last_event(world) == t0 + 12
    world.loop.run(until=t0 + 25)
    assert last_event(world) == t0 + 12  # the terminal pod at +15 fell inside the dedupe
    world.loop.run(until=t0 + 60)
    assert last_event(world) == t0 + 26
    assert last_event(world, "n2-claim") == t0 + 27


def test_a_restarted_controller_does_not_count_what_it_finds_as_an_event() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool())
    add_node(world, "n1")
    bind(world, "p1", "n1")
    world.loop.run(until=world.loop.now + 100)
    status = NodeClaimStatus(world.ctx)
    status.reconcile()
    assert last_event(world) is None
    world.kube.delete("Pod", "p1", "default")
    status.reconcile()
    assert last_event(world) == world.loop.now


def test_consolidatable_flips_after_consolidate_after_and_back_on_a_pod_event() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    at(world, t0 + 40, lambda: bind(world, "p1", "n1"))
    world.loop.run(until=t0 + 29.9)
    assert consolidatable(world) is None
    world.loop.run(until=t0 + 30)  # requeued for exactly the flip: initialized at t0, consolidateAfter 30 s
    cond = consolidatable(world)
    assert cond is not None and cond.status == "True" and cond.last_transition == t0 + 30
    assert [c.type for c in world.cluster.claims["n1-claim"].conditions][:3] == [
        "Launched",
        "Registered",
        "Initialized",
    ]
    world.loop.run(until=t0 + 40)
    assert consolidatable(world) is None  # a pod bound: the quiet period starts again
    assert consolidatable(world, "n2-claim") is not None
    world.loop.run(until=t0 + 69.9)
    assert consolidatable(world) is None
    world.loop.run(until=t0 + 70)
    assert consolidatable(world) is not None


def test_never_and_uninitialized_claims_are_not_consolidatable() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool(), raw_pool("never", consolidate_after="Never"))
    add_node(world, "fresh", initialized=False)
    stale = encode.condition(builders.node_claim("x").conditions[0])  # any condition to carry along
    add_node(world, "kept", pool="never")
    world.kube.patch(
        "NodeClaim",
        "kept-claim",
        {
            "status": {
                "conditions": [
                    *world.kube.get("NodeClaim", "kept-claim")["status"]["conditions"],
                    {**stale, "type": CONSOLIDATABLE, "status": "True"},
                ]
            }
        },
    )
    status = NodeClaimStatus(world.ctx)
    world.add(status)
    world.loop.run(until=world.loop.now + 3600)
    assert consolidatable(world, "fresh-claim") is None
    assert consolidatable(world, "kept-claim") is None  # cleared: consolidation is off for its pool
    assert world.cluster.claims["kept-claim"].is_true("Initialized")  # other conditions kept


def test_requeue_is_at_most_five_minutes() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool(consolidate_after="1h"))
    status = NodeClaimStatus(world.ctx)
    assert status.reconcile().requeue_after == REQUEUE_SECONDS
    add_node(world, "n1")
    assert status.reconcile().requeue_after == REQUEUE_SECONDS
    world.loop.run(until=world.loop.now + 3300)
    assert status.reconcile().requeue_after == 300.0
    world.loop.run(until=world.loop.now + 100)
    assert status.reconcile().requeue_after == 200.0


def test_on_event_filter() -> None:
    world, status = make_world()
    pod = builders.pod("p")
    assert not status.on_event(ObjectEvent("MODIFIED", pod))
    assert status.on_event(ObjectEvent("MODIFIED", builders.replace(pod, node_name="n1")))
    assert status.on_event(ObjectEvent("DELETED", pod))
    assert status.on_event(ObjectEvent("MODIFIED", world.cluster.claims["n1-claim"]))
    assert not status.on_event(ObjectEvent("MODIFIED", world.cluster.nodes["n1"]))


def test_a_pod_starting_to_terminate_is_a_pod_event_after_quiet_passes() -> None:
    world = World.make(TYPES)
    world.apply(raw_pool())
    add_node(world, "n1")
    bind(world, "p1", "n1")
    world.loop.run(until=world.loop.now + 100)
    status = NodeClaimStatus(world.ctx)
    status.reconcile()  # an older claim: what it finds is no event
    calls = len(world.kube.calls)
    for _ in range(3):
        status.reconcile()  # nothing changed: nothing written
    assert len(world.kube.calls) == calls
    assert last_event(world) is None
    pod = world.kube.get("Pod", "p1", "default")
    pod["metadata"]["deletionTimestamp"] = encode.time(world.loop.now)
    world.kube.update(pod)  # same pods on the node, one of them now terminating
    status.reconcile()
    assert last_event(world) == world.loop.now


def test_a_node_pool_consolidate_after_change_judges_every_claim_again_a_status_write_nothing() -> None:
    world, _ = make_world(raw_pool(consolidate_after="1h"))
    t0 = world.loop.now
    world.loop.run(until=t0 + 100)
    assert consolidatable(world) is None
    calls = len(world.kube.calls)
    world.kube.patch("NodePool", "default", {"status": {"nodes": 2}})
    world.loop.run(until=t0 + 200)
    assert [c for c in world.kube.calls[calls:] if c[1] == "NodeClaim"] == []  # nothing to write
    world.kube.patch("NodePool", "default", {"spec": {"disruption": {"consolidateAfter": "30s"}}})
    world.loop.run(until=t0 + 201)
    assert consolidatable(world) is not None and consolidatable(world, "n2-claim") is not None
    world.kube.patch("NodePool", "default", {"spec": {"disruption": {"consolidateAfter": "Never"}}})
    world.loop.run(until=t0 + 202)
    assert consolidatable(world) is None and consolidatable(world, "n2-claim") is None


# -- the passes that look only at what changed write what a sweep over every claim writes -------
_NODES = ("n1", "n2", "n3")
_action = st.one_of(
    st.tuples(st.just("bind"), st.integers(0, 5), st.sampled_from(_NODES)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("finish"), st.integers(0, 5)),
    st.tuples(st.just("pool-status"), st.integers(0, 9)),
    st.tuples(st.just("pool-after"), st.sampled_from(["20s", "45s", "Never"])),
    st.tuples(st.just("add-node"), st.sampled_from(("n3", "n4"))),
    st.tuples(st.just("delete-claim"), st.sampled_from(("n2-claim", "n3-claim"))),
    st.tuples(st.just("fail-next-patch")),
)
# each step: a wait, then one to three actions at the same instant (one pass sees them all)
_steps = st.lists(
    st.tuples(st.sampled_from([0.5, 1.0, 5.0, 12.0, 31.0]), st.lists(_action, min_size=1, max_size=3)),
    min_size=3,
    max_size=20,
)


def _replay(steps: list[tuple[float, list[tuple[Any, ...]]]], *, sweep: bool) -> tuple[list[Any], Any]:
    world, status = make_world()
    if sweep:
        status._changed = lambda *_args: None  # type: ignore[method-assign]
    t = world.loop.now
    for wait, actions in steps:
        t += wait
        at(world, t, lambda actions=actions: [_act(world, action) for action in actions])
    world.loop.run(until=t + 120)
    claims = {c["metadata"]["name"]: c.get("status") for c in world.kube.objects("NodeClaim")}
    return [c for c in world.kube.calls if c[1] == "NodeClaim"], claims


def _act(world: World, action: tuple[Any, ...]) -> None:
    kind, kube = action[0], world.kube
    with contextlib.suppress(errors.KubeError):
        if kind == "bind":
            name = f"p{action[1]}"
            if not kube.exists("Pod", name, "default"):
                world.apply(raw_pod(name))
            if action[2] in world.cluster.nodes:
                kube.bind(name, "default", action[2])
        elif kind == "delete":
            kube.delete("Pod", f"p{action[1]}", "default")
        elif kind == "finish":
            kube.patch("Pod", f"p{action[1]}", {"status": {"phase": "Succeeded"}}, "default")
        elif kind == "pool-status":
            kube.patch("NodePool", "default", {"status": {"nodes": action[1]}})
        elif kind == "pool-after":
            kube.patch("NodePool", "default", {"spec": {"disruption": {"consolidateAfter": action[1]}}})
        elif kind == "add-node":
            if not kube.exists("NodeClaim", f"{action[1]}-claim"):
                add_node(world, action[1])
        elif kind == "delete-claim":
            kube.delete("NodeClaim", action[1])
        else:  # the controller's next status write fails: it must retry
            kube.fail_next("patch", "NodeClaim", errors.Conflict("injected"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps)
def test_passes_over_what_changed_write_what_sweeps_write(steps: list[tuple[float, list[Any]]]) -> None:
    assert _replay(steps, sweep=False) == _replay(steps, sweep=True)
