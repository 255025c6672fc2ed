"""Disruption candidates (karpy.core.disruption.candidates): blockers, reschedulable pods, costs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import builders as b
from karpy.core.disruption import candidates as cand
from karpy.core.disruption.memo import Memo
from karpy.core.disruption.pdbs import Limits
from karpy.model import labels as wk
from karpy.model.catalog import Offering
from karpy.model.objects import OwnerRef

NOW = 10_000.0
MINUTE = 60.0
SMALL = b.instance_type("small", cpu="2", memory="2Gi")  # 0.4/h
DND = wk.DO_NOT_DISRUPT


def build(
    managed: list,
    pods: list | None = None,
    *,
    pdbs: list | None = None,
    disruption_class: str = cand.GRACEFUL,
    pools: list | None = None,
    types: list | None = None,
    **snap_kwargs: Any,
) -> tuple[list, dict[str, str]]:
    pools = pools or [b.disruption_pool()]
    snap = b.managed_snapshot(
        pools=pools,
        types=types or [SMALL],
        managed=managed,
        pods=pods or [],
        pdbs=pdbs or [],
        now=NOW,
        **snap_kwargs,
    )
    return cand.build_all(
        snap.nodes,
        pools={p.name: p for p in pools},
        instance_types={name: {it.name: it for it in its} for name, its in snap.instance_types.items()},
        limits=Limits(snap.pdbs, snap.pods),
        now=NOW,
        disruption_class=disruption_class,
    )


def one(managed: tuple, pods: list | None = None, **kwargs: Any) -> tuple[Any, str]:
    found, why = build([managed], pods, **kwargs)
    name = managed[0].name
    return (found[0] if found else None), why.get(name, "")


# -- do-not-disrupt -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "started", "active"),
    [
        ("true", NOW - 10 * 24 * 3600, True),
        ("30m", NOW - 10 * MINUTE, True),
        ("30m", NOW - 40 * MINUTE, False),
        ("30m", NOW - 30 * MINUTE, False),  # exactly elapsed
        ("1h30m", NOW - 80 * MINUTE, True),
        ("1h30m", NOW - 95 * MINUTE, False),
        ("90s", NOW - 60, True),
        ("false", NOW, False),
        ("yes", NOW, False),
        ("30 minutes", NOW, False),
        ("-5m", NOW, False),
        ("", NOW, False),
    ],
)
def test_do_not_disrupt_values(value: str, started: float, active: bool) -> None:
    pod = b.running_pod("p", "n", annotations={DND: value}, started=started)
    assert cand.do_not_disrupt_active(pod, NOW) is active


def test_do_not_disrupt_duration_counts_from_pod_start_not_creation() -> None:
    pod = b.running_pod("p", "n", annotations={DND: "30m"}, created=NOW - 3600, started=NOW - 60)
    assert cand.do_not_disrupt_active(pod, NOW)
    pod = b.running_pod("p", "n", annotations={DND: "30m"}, created=NOW - 60, started=NOW - 3600)
    assert not cand.do_not_disrupt_active(pod, NOW)


def test_do_not_disrupt_on_terminal_pod_is_inactive() -> None:
    pod = b.running_pod("p", "n", annotations={DND: "true"}, phase="Succeeded")
    assert not cand.do_not_disrupt_active(pod, NOW)


def test_active_do_not_disrupt_pod_blocks_the_node() -> None:
    pod = b.running_pod("batch", "n1", cpu="1", annotations={DND: "true"})
    found, why = one(b.managed_node("n1"), [pod])
    assert found is None
    assert "default/batch" in why and DND in why


def test_expired_do_not_disrupt_duration_does_not_block() -> None:
    pod = b.running_pod("batch", "n1", cpu="1", annotations={DND: "5m"}, started=NOW - 600)
    found, _ = one(b.managed_node("n1"), [pod])
    assert found is not None


def test_invalid_do_not_disrupt_value_is_ignored() -> None:
    pod = b.running_pod("batch", "n1", cpu="1", annotations={DND: "forever"})
    found, _ = one(b.managed_node("n1"), [pod])
    assert found is not None


def test_do_not_disrupt_daemonset_pod_blocks_too() -> None:
    pod = b.running_pod("agent", "n1", owner_kind="DaemonSet", annotations={DND: "true"})
    found, why = one(b.managed_node("n1"), [pod])
    assert found is None and "agent" in why


def test_node_annotation_blocks() -> None:
    found, why = one(b.managed_node("n1", node_annotations={DND: "true"}))
    assert found is None
    assert "node annotated" in why and DND in why


def test_node_annotation_other_value_does_not_block() -> None:
    found, _ = one(b.managed_node("n1", node_annotations={DND: "false"}))
    assert found is not None


# -- base conditions ------------------------------------------------------------------------------


def test_uninitialized_node_is_not_a_candidate() -> None:
    found, why = one(b.managed_node("n1", initialized=False))
    assert found is None and why == "not initialized"


def test_unmanaged_node_is_not_a_candidate() -> None:
    found, why = build([], unmanaged=[b.node("plain")])
    assert found == []
    assert why["plain"].startswith("not managed")


def test_claim_without_node_is_not_a_candidate() -> None:
    claim = b.node_claim("c1")
    snap = b.managed_snapshot(pools=[b.disruption_pool()], types=[SMALL])
    from karpy.core.snapshot import StateNode

    node = StateNode(name="c1", claim=claim)
    candidate, why = cand.build(
        node,
        pools={"default": snap.node_pools[0]},
        instance_types={},
        limits=Limits([], []),
        now=NOW,
        disruption_class=cand.GRACEFUL,
    )
    assert candidate is None and "not registered" in why


@pytest.mark.parametrize(
    "kwargs",
    [
        {"claim_overrides": {"deleting": True}},
        {"node_overrides": {"deleting": True}},
    ],
)
def test_deleting_node_is_not_a_candidate(kwargs: dict) -> None:
    found, why = one(b.managed_node("n1", **kwargs))
    assert found is None and why == "already being deleted"


def test_marked_for_deletion_node_is_not_a_candidate() -> None:
    found, why = build([b.managed_node("n1")], marked_for_deletion=["n1"])
    assert found == [] and why["n1"] == "already being deleted"


def test_nominated_node_is_not_a_candidate() -> None:
    found, why = build([b.managed_node("n1"), b.managed_node("n2")], nominated=["n1"])
    assert [c.name for c in found] == ["n2"]
    assert "nominated" in why["n1"]


def test_node_of_unknown_pool_is_not_a_candidate() -> None:
    found, why = one(b.managed_node("n1", pool="gone"))
    assert found is None and "gone" in why


# -- reschedulable pods ---------------------------------------------------------------------------


def test_daemonset_and_mirror_pods_are_not_reschedulable() -> None:
    ds = b.running_pod("agent", "n1", owner_kind="DaemonSet")
    mirror = b.running_pod("static", "n1", owner_kind="Node")
    app = b.running_pod("app", "n1", cpu="1")
    assert not cand.reschedulable(ds)
    assert not cand.reschedulable(mirror)
    assert cand.reschedulable(app)
    found, _ = one(b.managed_node("n1"), [ds, mirror, app])
    assert [p.name for p in found.reschedulable] == ["app"]
    assert {p.name for p in found.pods} == {"agent", "static", "app"}


def test_only_daemonset_pods_leave_the_node_empty() -> None:
    found, _ = one(b.managed_node("n1"), [b.running_pod("agent", "n1", owner_kind="DaemonSet")])
    assert found.reschedulable == ()


def test_terminal_and_deleting_pods_are_not_reschedulable() -> None:
    done = b.running_pod("done", "n1", phase="Succeeded")
    leaving = b.running_pod("leaving", "n1", deleting=True)
    assert not cand.reschedulable(done)
    assert not cand.reschedulable(leaving)


def test_bare_pods_are_reschedulable_and_do_not_block() -> None:
    bare = b.running_pod("bare", "n1", cpu="1", owner_kind=None)
    assert bare.owners == ()
    found, why = one(b.managed_node("n1"), [bare])
    assert found is not None, why
    assert [p.name for p in found.reschedulable] == ["bare"]


def test_non_controller_owner_is_used_when_no_controller() -> None:
    pod = b.pod("p", node_name="n1", owners=[OwnerRef("DaemonSet", "ds")])
    assert not cand.reschedulable(pod)


def test_pdb_blocked_pod_blocks_the_node_with_the_pdb_named() -> None:
    pod = b.running_pod("ledger-0", "n1", cpu="1", labels={"app": "ledger"})
    pdb = b.pdb("ledger", match_labels={"app": "ledger"}, min_available=1)
    found, why = one(b.managed_node("n1"), [pod], pdbs=[pdb])
    assert found is None
    assert "PDB default/ledger" in why


def test_pdb_on_evictable_daemonset_pod_blocks() -> None:
    # Upstream pdb.Limits.CanEvictPods checks every *evictable* pod (active, not a mirror pod,
    # not tolerating karpenter.sh/disrupted:NoSchedule); DaemonSet pods are drained too (their
    # own tier), so a DaemonSet pod whose PDB allows nothing blocks graceful disruption.
    pod = b.running_pod("agent", "n1", owner_kind="DaemonSet", labels={"app": "agent"})
    pdb = b.pdb("agent", match_labels={"app": "agent"}, disruptions_allowed=0)
    found, why = one(b.managed_node("n1"), [pod], pdbs=[pdb])
    assert found is None
    assert "PDB default/agent" in why


def test_pdb_on_mirror_pod_does_not_block() -> None:
    pod = b.running_pod("static", "n1", owner_kind="Node", labels={"app": "static"})
    pdb = b.pdb("static", match_labels={"app": "static"}, disruptions_allowed=0)
    found, _ = one(b.managed_node("n1"), [pod], pdbs=[pdb])
    assert found is not None


# -- eviction cost, reschedule cost, savings ratio ------------------------------------------------


DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


@pytest.mark.parametrize(
    ("annotations", "priority", "expected"),
    [
        ({}, 0, 1.0),
        ({DELETION_COST: str(2**27)}, 0, 2.0),
        ({DELETION_COST: str(-(2**27))}, 0, 0.0),
        ({}, 2**25, 2.0),
        ({DELETION_COST: str(2**26)}, 2**24, 2.0),
        ({}, 2**30, 10.0),  # 1 + 32 clamped
        ({DELETION_COST: str(-(2**31))}, 0, -10.0),  # 1 - 16 clamped
        ({}, -(2**31), -10.0),
        ({DELETION_COST: "not-a-number"}, 0, 1.0),
    ],
)
def test_eviction_cost_formula_and_clamp(annotations: dict, priority: int, expected: float) -> None:
    pod = b.running_pod("p", "n", annotations=annotations, priority=priority)
    assert cand.eviction_cost(pod) == pytest.approx(expected)


def test_reschedule_cost_sums_positive_costs_of_reschedulable_pods() -> None:
    pods = [
        b.running_pod("a", "n1", priority=2**25),  # 2
        b.running_pod("b", "n1"),  # 1
        b.running_pod("neg", "n1", annotations={DELETION_COST: str(-(2**29))}),  # -3 -> 0
        b.running_pod("agent", "n1", owner_kind="DaemonSet", priority=2**28),  # not reschedulable
    ]
    found, _ = one(b.managed_node("n1", instance_type=SMALL), pods)
    assert found.reschedule_cost == pytest.approx(1 + 2 + 1 + 0)


def test_disruption_cost_scales_with_lifetime_remaining() -> None:
    pool = b.disruption_pool(expire_after=4 * 3600.0)
    pods = [b.running_pod("a", "n1"), b.running_pod("b", "n1")]
    found, _ = one(b.managed_node("n1", created=NOW - 3600), pods, pools=[pool])
    assert found.disruption_cost(NOW) == pytest.approx(2 * 0.75)
    assert found.disruption_cost(NOW + 3600) == pytest.approx(2 * 0.5)
    assert found.disruption_cost(NOW + 10 * 3600) == 0.0


def test_a_candidate_is_the_same_object_while_its_parts_are() -> None:
    """With a memo, a pass over the same StateNode gives the same Candidate object, at any time; a
    new NodePool object, price or blocker gives a new one, with the new value (the claim has a
    terminationGracePeriod, so the blocked node is an eventual candidate too)."""
    pool = b.disruption_pool(expire_after=4 * 3600.0)
    pods = [b.running_pod("a", "n1"), b.running_pod("dnd", "n1", annotations={DND: "5m"}, started=NOW - 60)]
    snap = b.managed_snapshot(
        pools=[pool],
        types=[SMALL],
        managed=[
            b.managed_node("n1", created=NOW - 3600, claim_overrides={"termination_grace_period": 60.0})
        ],
        pods=pods,
        now=NOW,
    )
    memo = Memo()
    types = memo.types_by_name(snap.instance_types)

    def classes(now: float, pools: list, price_of: Any = memo.price) -> cand.Classes:
        memo.begin(snap)
        return cand.build_classes(
            snap.nodes,
            pools={p.name: p for p in pools},
            instance_types=types,
            limits=memo.limits(snap.pdbs, snap.pods),
            now=now,
            facts=memo.node,
            price_of=price_of,
        )

    first = classes(NOW, [pool]).eventual[0]
    assert first.blocked_eviction  # do-not-disrupt for 5 minutes after the pod started
    later = classes(NOW + 3600, [pool]).eventual[0]
    assert later.blocked_eviction == ""  # the blocker lapsed: a new candidate
    assert classes(NOW + 7200, [pool]).eventual[0] is later  # nothing changed but the time
    assert later.disruption_cost(NOW + 7200) == pytest.approx(2 * 0.25)
    other_pool = dataclasses.replace(pool)
    moved = classes(NOW + 7200, [other_pool]).eventual[0]
    assert moved is not later and moved.pool is other_pool
    cheaper = classes(NOW + 7200, [other_pool], price_of=lambda _it, _labels: 0.01).eventual[0]
    assert cheaper is not moved and cheaper.price == 0.01


def test_price_is_the_cheapest_offering_matching_zone_and_capacity_type() -> None:
    offerings = [
        Offering("test-zone-1", "on-demand", 1.0),
        Offering("test-zone-1", "on-demand", 0.9),
        Offering("test-zone-1", "spot", 0.3),
        Offering("test-zone-2", "on-demand", 0.5),
    ]
    it = b.instance_type("mixed", cpu="4", memory="4Gi", offerings=offerings)
    found, _ = one(
        b.managed_node("n1", instance_type=it, zone="test-zone-1", capacity_type="on-demand"),
        [b.running_pod("a", "n1", cpu="1")],
        types=[it],
    )
    assert found.price == pytest.approx(0.9)
    assert found.instance_type is it
    assert (found.zone, found.capacity_type) == ("test-zone-1", "on-demand")


def test_savings_ratio_is_price_over_reschedule_cost() -> None:
    pods = [b.running_pod("a", "n1", cpu="1"), b.running_pod("b", "n1", cpu="500m", priority=2**25)]
    found, _ = one(b.managed_node("n1", instance_type=SMALL), pods)
    assert found.price == pytest.approx(0.4)
    assert found.savings_ratio == pytest.approx(0.4 / (1 + 1 + 2))


def test_unknown_instance_type_has_no_price() -> None:
    found, _ = one(b.managed_node("n1", instance_type="gone"), [b.running_pod("a", "n1")])
    assert found.instance_type is None and found.price is None
    assert found.savings_ratio == 0.0


# -- eventual disruption ----------------------------------------------------------------------------


def test_eventual_class_with_termination_grace_period_keeps_a_blocked_node() -> None:
    tgp = b.managed_node("n1", claim_overrides={"termination_grace_period": 3600.0})
    pod = b.running_pod("batch", "n1", cpu="1", annotations={DND: "true"})
    graceful, why = one(tgp, [pod], disruption_class=cand.GRACEFUL)
    assert graceful is None and DND in why
    eventual, _ = one(tgp, [pod], disruption_class=cand.EVENTUAL)
    assert eventual is not None
    assert DND in eventual.blocked_eviction
    assert [p.name for p in eventual.reschedulable] == ["batch"]


def test_eventual_class_keeps_a_pdb_blocked_node_with_termination_grace_period() -> None:
    tgp = b.managed_node("n1", claim_overrides={"termination_grace_period": 60.0})
    pod = b.running_pod("ledger", "n1", labels={"app": "ledger"})
    pdb = b.pdb("ledger", match_labels={"app": "ledger"}, disruptions_allowed=0)
    eventual, _ = one(tgp, [pod], pdbs=[pdb], disruption_class=cand.EVENTUAL)
    assert eventual is not None and "PDB default/ledger" in eventual.blocked_eviction


def test_eventual_class_without_termination_grace_period_is_still_blocked() -> None:
    pod = b.running_pod("batch", "n1", cpu="1", annotations={DND: "true"})
    eventual, why = one(b.managed_node("n1"), [pod], disruption_class=cand.EVENTUAL)
    assert eventual is None and DND in why


def test_eventual_class_with_tgp_still_respects_the_node_annotation() -> None:
    tgp = b.managed_node(
        "n1", node_annotations={DND: "true"}, claim_overrides={"termination_grace_period": 60.0}
    )
    eventual, why = one(tgp, disruption_class=cand.EVENTUAL)
    assert eventual is None and "node annotated" in why
