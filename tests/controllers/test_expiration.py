"""Expiration: NodeClaims are deleted, forcefully, at ``created + expireAfter`` in virtual time."""

from __future__ import annotations

import contextlib
from typing import Any

from harness import World
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders
from karpy.api import encode
from karpy.controllers.expiration import Expiration, expires_at
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClassRef
from karpy.state.events import ObjectEvent

TYPES = [builders.instance_type("medium", cpu="4", memory="8Gi")]
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def raw_pool(name: str = "default", *, expire_after: str = "1h") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"nodeClassRef": REF, "expireAfter": expire_after}},
            # budgets forbid every voluntary disruption: expiration ignores them
            "disruption": {"budgets": [{"nodes": "0"}]},
        },
    }


def add_claim(world: World, name: str, *, pool: str = "default", expire_after: float | None = 3600.0) -> None:
    model = builders.node_claim(
        name,
        pool=pool,
        labels={wk.CAPACITY_TYPE: "on-demand"},
        provider_id=f"fake://{name}",
        node_name=f"{name}-node",
        node_class_ref=NodeClassRef(**REF),
        expire_after=expire_after,
    )
    world.apply(encode.node_claim(model, finalizers=("karpenter.sh/termination",)))


def make_world(*pools: dict[str, Any]) -> tuple[World, Expiration]:
    world = World.make(TYPES)
    world.apply(*(pools or (raw_pool(),)))
    expiration = Expiration(world.ctx)
    world.add(expiration)

    def listener(event: ObjectEvent) -> None:
        if expiration.on_event(event):
            world.loop.wake(expiration.name)

    world.feed.listeners.append(listener)
    return world, expiration


def deleting(world: World, name: str) -> bool:
    return world.cluster.claims[name].deleting


def expired_count(world: World) -> float:
    labels = {"reason": "expired", "nodepool": "default", "capacity_type": "on-demand"}
    return world.ctx.metrics.value("karpy_nodeclaims_disrupted_total", labels)


def test_claims_are_deleted_when_expire_after_elapses() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    add_claim(world, "first")
    world.loop.call_at(t0 + 600, lambda: add_claim(world, "second"))
    world.loop.run(until=t0 + 3599.5)
    assert not deleting(world, "first") and not deleting(world, "second")
    assert expired_count(world) == 0
    world.loop.run(until=t0 + 3600)
    assert deleting(world, "first") and not deleting(world, "second")
    assert world.kube.get("NodeClaim", "first")["metadata"]["deletionTimestamp"] == encode.time(t0 + 3600)
    assert "first" in world.cluster.marked_for_deletion
    assert expired_count(world) == 1
    disrupted = [(e.kind, e.name, e.time) for e in world.events.events if e.reason == "Disrupted"]
    assert disrupted == [("NodeClaim", "first", t0 + 3600), ("Node", "first-node", t0 + 3600)]
    assert "Expired" in world.events.events[0].message
    world.loop.run(until=t0 + 4199.5)
    assert not deleting(world, "second")
    world.loop.run(until=t0 + 4200)
    assert deleting(world, "second") and expired_count(world) == 2
    deletes = [c for c in world.kube.calls if c[0] == "delete"]
    assert deletes == [("delete", "NodeClaim", "first"), ("delete", "NodeClaim", "second")]  # once each


def test_never_expiring_claims_and_the_pool_fallback() -> None:
    world, expiration = make_world(raw_pool(), raw_pool("forever", expire_after="Never"))
    t0 = world.loop.now
    add_claim(world, "kept", pool="forever", expire_after=None)
    add_claim(world, "inherits", expire_after=None)  # no expireAfter of its own: the NodePool's 1h
    world.loop.run(until=t0 + 3600)
    assert deleting(world, "inherits") and not deleting(world, "kept")
    world.loop.run(until=t0 + 400 * 24 * 3600)
    assert not deleting(world, "kept")
    assert expiration.reconcile().requeue_after is None
    assert expires_at(world.cluster.claims["kept"], world.cluster.node_pools["forever"]) is None


def test_a_failed_delete_is_retried() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    add_claim(world, "first")
    world.kube.fail_next("delete", "NodeClaim", errors.TooManyRequests("slow down"))
    world.loop.run(until=t0 + 3600)
    assert not deleting(world, "first") and expired_count(world) == 0
    world.loop.run(until=t0 + 3601)
    assert deleting(world, "first") and expired_count(world) == 1


def test_requeues_at_the_next_expiry() -> None:
    world, expiration = make_world()
    add_claim(world, "first")
    world.loop.run(until=world.loop.now + 1000)
    assert expiration.reconcile().requeue_after == 2600.0


def test_the_deletion_mark_is_dropped_once_the_claim_is_gone() -> None:
    world, expiration = make_world()
    add_claim(world, "first")
    world.loop.run(until=world.loop.now + 3600)
    assert "first" in world.cluster.marked_for_deletion
    world.kube.patch("NodeClaim", "first", {"metadata": {"finalizers": None}})  # termination finishes
    assert "first" not in world.cluster.claims
    expiration.reconcile()
    assert "first" not in world.cluster.marked_for_deletion


# -- the passes that look only at what changed act as a pass over every claim would -------------
_CLAIMS = ("a", "b", "c", "d")
_action = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(_CLAIMS), st.sampled_from([None, 30.0, 90.0, 400.0])),
    st.tuples(st.just("touch"), st.sampled_from(_CLAIMS)),  # a claim replaced, its expiry unchanged
    st.tuples(st.just("respec"), st.sampled_from(_CLAIMS), st.sampled_from(["45s", "3m", "Never"])),
    st.tuples(st.just("delete"), st.sampled_from(_CLAIMS)),  # deleting: its finalizer keeps it
    st.tuples(st.just("remove"), st.sampled_from(_CLAIMS)),  # termination finishes
    st.tuples(st.just("pool"), st.sampled_from(["1m", "5m", "Never"])),
    st.tuples(st.just("pool-status"), st.integers(0, 9)),
    st.tuples(st.just("fail-next-delete")),
)
_steps = st.lists(
    st.tuples(st.sampled_from([0.5, 3.0, 20.0, 61.0]), st.lists(_action, min_size=1, max_size=3)),
    min_size=3,
    max_size=20,
)


def _replay(steps: list[tuple[float, list[tuple[Any, ...]]]], *, sweep: bool) -> tuple[Any, ...]:
    world, expiration = make_world(raw_pool(expire_after="2m"))
    if sweep:
        incremental = expiration.reconcile

        def every_claim() -> Any:
            expiration._names = None  # as if claims had come or gone: every claim looked at
            return incremental()

        expiration.reconcile = every_claim  # type: ignore[method-assign]
    t = world.loop.now
    for wait, actions in steps:
        t += wait
        world.loop.call_at(t, lambda actions=actions: [_act(world, action) for action in actions])
    world.loop.run(until=t + 600)
    calls = [c for c in world.kube.calls if c[1] == "NodeClaim" and c[0] == "delete"]
    events = [(e.name, e.reason, e.time) for e in world.events.events]
    return calls, events, sorted(world.cluster.marked_for_deletion), expiration.reconcile().requeue_after


def _act(world: World, action: tuple[Any, ...]) -> None:
    kind, kube = action[0], world.kube
    with contextlib.suppress(errors.KubeError):
        if kind == "add":
            if not kube.exists("NodeClaim", action[1]):
                add_claim(world, action[1], expire_after=action[2])
        elif kind == "touch":
            kube.patch(
                "NodeClaim", action[1], {"metadata": {"annotations": {"touched": str(world.loop.now)}}}
            )
        elif kind == "respec":
            kube.patch("NodeClaim", action[1], {"spec": {"expireAfter": action[2]}})
        elif kind == "delete":
            kube.delete("NodeClaim", action[1])
        elif kind == "remove":
            kube.patch("NodeClaim", action[1], {"metadata": {"finalizers": None}})
            kube.delete("NodeClaim", action[1])
        elif kind == "pool":
            template = {"spec": {"nodeClassRef": REF, "expireAfter": action[1]}}
            kube.patch("NodePool", "default", {"spec": {"template": template}})
        elif kind == "pool-status":
            kube.patch("NodePool", "default", {"status": {"nodes": action[1]}})
        else:
            kube.fail_next("delete", "NodeClaim", errors.TooManyRequests("slow down"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps)
def test_passes_over_what_changed_act_as_passes_over_every_claim(
    steps: list[tuple[float, list[Any]]],
) -> None:
    assert _replay(steps, sweep=False) == _replay(steps, sweep=True)


def test_claims_replaced_together_all_get_their_new_expiry() -> None:
    world, expiration = make_world()
    t0 = world.loop.now
    for name in ("a", "b", "c"):
        add_claim(world, name)
    assert expiration.reconcile().requeue_after == 3600.0
    world.loop.run(until=t0 + 10)
    for name, after in (("a", "20m"), ("b", "10m"), ("c", "30m")):
        world.kube.patch("NodeClaim", name, {"spec": {"expireAfter": after}})
    assert expiration.reconcile().requeue_after == 590.0  # b's, the earliest of the three
    world.loop.run(until=t0 + 600)
    assert [n for n in ("a", "b", "c") if deleting(world, n)] == ["b"]


def test_a_failed_delete_is_tried_again_by_the_next_pass_whatever_wakes_it() -> None:
    world, _ = make_world()
    t0 = world.loop.now
    add_claim(world, "first")
    add_claim(world, "other", expire_after=7200.0)
    world.kube.fail_next("delete", "NodeClaim", errors.TooManyRequests("slow down"))
    world.loop.run(until=t0 + 3600)
    assert not deleting(world, "first")
    world.loop.call_at(
        t0 + 3600.2, lambda: world.kube.patch("NodeClaim", "other", {"metadata": {"labels": {"x": "y"}}})
    )
    world.loop.run(until=t0 + 3600.2)  # another claim's event wakes it before the 1 s retry
    assert deleting(world, "first")
