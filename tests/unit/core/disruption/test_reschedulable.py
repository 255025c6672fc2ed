"""Which pods move and which nodes are empty (karpy.core.disruption.candidates, upstream
``pkg/utils/pod/scheduling.go`` IsReschedulable / IsEvictable, ``pkg/utils/pdb`` IsCurrentlyReschedulable,
``Candidate.IsEmpty``), and what a disruption pass plans for them (karpy.core.disruption.methods)."""

from __future__ import annotations

from typing import Any

import pytest

import builders as b
from karpy.core.disruption import candidates as cand
from karpy.core.disruption import methods
from karpy.core.disruption.pdbs import Limits, fully_blocking
from karpy.model import labels as wk
from karpy.model.objects import Condition, OwnerRef
from karpy.model.taints import Toleration

NOW = 10_000.0
SMALL = b.instance_type("small", cpu="2", memory="2Gi")
LARGE = b.instance_type("large", cpu="16", memory="16Gi")
DND = {wk.DO_NOT_DISRUPT: "true"}
STS = OwnerRef("StatefulSet", "db", "apps/v1", True)


def owned(name: str, node: str, *owners: OwnerRef, **overrides: Any) -> Any:
    """A running pod on ``node`` with exactly these owner references."""
    return b.replace(b.running_pod(name, node, **overrides), owners=owners)


def candidates(managed: list, pods: list, *, pdbs: list | None = None, klass: str = cand.GRACEFUL) -> tuple:
    pool = b.disruption_pool()
    snap = b.managed_snapshot(
        pools=[pool], types=[SMALL, LARGE], managed=managed, pods=pods, pdbs=pdbs or [], now=NOW
    )
    return cand.build_all(
        snap.nodes,
        pools={pool.name: pool},
        instance_types={pool.name: {it.name: it for it in (SMALL, LARGE)}},
        limits=Limits(snap.pdbs, snap.pods),
        now=NOW,
        disruption_class=klass,
    )


# -- IsReschedulable --------------------------------------------------------------------------------


def test_a_terminating_statefulset_pod_is_reschedulable() -> None:
    pod = owned("db-0", "n1", STS, deleting=True)
    assert cand.reschedulable(pod)
    found, _ = candidates([b.managed_node("n1")], [pod])
    assert [p.name for p in found[0].reschedulable] == ["db-0"]
    assert not found[0].empty


def test_a_terminating_pod_of_another_owner_is_not_reschedulable() -> None:
    pod = b.running_pod("web-0", "n1", deleting=True)  # ReplicaSet-owned
    assert not cand.reschedulable(pod)
    found, _ = candidates([b.managed_node("n1")], [pod])
    assert found[0].reschedulable == ()
    assert found[0].empty


def test_a_finished_terminating_statefulset_pod_still_counts_as_upstream_reads_it() -> None:
    # (IsActive || (IsOwnedByStatefulSet && IsTerminating)): the phase does not enter the second half
    pod = owned("db-0", "n1", STS, deleting=True, phase="Succeeded")
    assert cand.reschedulable(pod)
    found, _ = candidates([b.managed_node("n1")], [pod])
    assert [p.name for p in found[0].reschedulable] == ["db-0"]


@pytest.mark.parametrize(
    ("owner", "moves"),
    [
        (
            OwnerRef("DaemonSet", "agent", "apps/v1", False),
            False,
        ),  # any owner reference, not only the controller
        (OwnerRef("Node", "n1", "v1", True), False),
        (OwnerRef("DaemonSet", "agent", "", True), False),  # matched by kind (karpy ignores the API version)
        (OwnerRef("Job", "batch", "batch/v1", True), True),
    ],
)
def test_daemonset_and_node_owners_are_matched_among_all_owner_references(
    owner: OwnerRef, moves: bool
) -> None:
    pod = owned("p", "n1", OwnerRef("ReplicaSet", "rs", "apps/v1", True), owner)
    assert cand.reschedulable(pod) is moves


def test_a_pod_tolerating_the_disrupted_taint_moves_but_is_not_evicted() -> None:
    pod = b.running_pod("tolerant", "n1", tolerations=[Toleration("", "Exists")])
    assert cand.reschedulable(pod)
    assert not cand.evictable(pod)


def test_a_mirror_pod_under_any_owner_position_is_not_evicted() -> None:
    pod = owned("static", "n1", OwnerRef("Node", "n1", "v1", False))
    assert not cand.evictable(pod)


# -- IsEmpty ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "priority", "empty"),
    [
        ({"controller.kubernetes.io/pod-deletion-cost": str(-(2**31))}, 0, True),  # 1 - 16, clamped
        ({"controller.kubernetes.io/pod-deletion-cost": str(-(2**27))}, 0, True),  # exactly 0
        ({"controller.kubernetes.io/pod-deletion-cost": str(-(2**27) + 2**20)}, 0, False),  # just above 0
        ({}, -(2**25), True),
        ({}, 0, False),
    ],
)
def test_a_node_whose_pods_cost_nothing_to_move_is_empty(
    annotations: dict, priority: int, empty: bool
) -> None:
    pod = b.running_pod("p", "n1", annotations=annotations, priority=priority)
    found, _ = candidates([b.managed_node("n1")], [pod])
    assert found[0].reschedulable == (pod,)
    assert found[0].empty is empty


def _pass(managed: list, pods: list, *, policy: str = "WhenEmpty", **kw: Any) -> Any:
    pool = b.disruption_pool(policy=policy)
    snap = b.managed_snapshot(pools=[pool], types=[SMALL, LARGE], managed=managed, pods=pods, now=NOW, **kw)
    return methods.compute(snap, NOW)


def test_emptiness_deletes_a_node_whose_only_pod_costs_nothing_and_consolidation_leaves_it() -> None:
    cheap = b.running_pod(
        "cheap", "n1", cpu="1", annotations={"controller.kubernetes.io/pod-deletion-cost": "-2147483648"}
    )
    decision = _pass([b.managed_node("n1", instance_type=LARGE)], [cheap], policy="WhenEmptyOrUnderutilized")
    assert decision.command is not None
    assert (decision.command.reason, decision.command.candidates) == ("Empty", ("n1",))
    assert decision.command.replacements == ()


# -- IsCurrentlyReschedulable -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_unavailable", "min_available", "blocking"),
    [("0", None, True), ("0%", None, True), (None, "100%", True), ("1", None, False), (None, "1", False)],
)
def test_fully_blocking_pdbs(max_unavailable: str | None, min_available: str | None, blocking: bool) -> None:
    pdb = b.pdb(match_labels={"app": "x"}, max_unavailable=max_unavailable, min_available=min_available)
    assert fully_blocking(pdb) is blocking


def test_currently_reschedulable_leaves_out_held_pods() -> None:
    pdbs = [b.pdb("zero", match_labels={"app": "held"}, max_unavailable=0)]
    limits = Limits(pdbs, ())
    assert cand.currently_reschedulable(b.running_pod("free", "n1"), NOW, limits)
    assert not cand.currently_reschedulable(b.running_pod("dnd", "n1", annotations=DND), NOW, limits)
    assert not cand.currently_reschedulable(b.running_pod("held", "n1", labels={"app": "held"}), NOW, limits)
    # an unready pod under AlwaysAllow may go; a pod that tolerates karpenter.sh/disrupted is never evicted
    always = Limits(
        [
            b.pdb(
                "zero",
                match_labels={"app": "held"},
                max_unavailable=0,
                unhealthy_pod_eviction_policy="AlwaysAllow",
            )
        ],
        (),
    )
    assert cand.currently_reschedulable(
        b.running_pod("sick", "n1", labels={"app": "held"}, ready=False), NOW, always
    )
    tolerant = b.running_pod("t", "n1", labels={"app": "held"}, tolerations=[Toleration("", "Exists")])
    assert cand.currently_reschedulable(tolerant, NOW, limits)
    # two PDBs: the Eviction API refuses the pod, whatever each allows
    two = Limits(
        [
            b.pdb("a", match_labels={"app": "x"}, max_unavailable=1),
            b.pdb("b", match_labels={"app": "x"}, max_unavailable=1),
        ],
        (),
    )
    assert not cand.currently_reschedulable(b.running_pod("x", "n1", labels={"app": "x"}), NOW, two)


def test_an_eventual_candidate_moves_only_its_currently_reschedulable_pods() -> None:
    tgp = b.managed_node("n1", instance_type=LARGE, claim_overrides={"termination_grace_period": 300.0})
    free = b.running_pod("free", "n1", cpu="1")
    held = b.running_pod("held", "n1", cpu="1", annotations=DND)
    found, why = candidates([tgp], [free, held], klass=cand.EVENTUAL)
    assert found, why
    c = found[0]
    assert [p.name for p in c.reschedulable] == ["free", "held"]
    assert [p.name for p in c.moved] == ["free"]
    graceful, why = candidates([tgp], [free, held])
    assert graceful == [] and "do-not-disrupt" in why["n1"]


def test_a_candidate_without_held_pods_moves_all_of_them() -> None:
    found, _ = candidates([b.managed_node("n1")], [b.running_pod("a", "n1"), b.running_pod("b", "n1")])
    assert found[0].moving is None
    assert found[0].moved is found[0].reschedulable


def test_drift_with_a_grace_period_leaves_the_held_pod_and_needs_no_replacement() -> None:
    drifted = Condition("Drifted", "True", last_transition=NOW - 60)
    node = b.managed_node(
        "n1",
        instance_type=LARGE,
        claim_conditions=[drifted],
        claim_overrides={"termination_grace_period": 300.0},
    )
    decision = _pass(
        [node], [b.running_pod("held", "n1", cpu="4", annotations=DND)], policy="WhenEmptyOrUnderutilized"
    )
    assert decision.command is not None
    assert (decision.command.reason, decision.command.candidates) == ("Drifted", ("n1",))
    assert decision.command.replacements == ()


def test_pods_of_a_leaving_node_are_planned_unless_held() -> None:
    going = b.managed_node("gone", instance_type=LARGE)
    pods = [
        b.running_pod("moves", "gone", cpu="1"),
        b.running_pod("held", "gone", cpu="1", annotations=DND),
        b.running_pod("agent", "gone", owner_kind="DaemonSet"),
    ]
    pool = b.disruption_pool()
    snap = b.managed_snapshot(
        pools=[pool], types=[SMALL], managed=[going], pods=pods, now=NOW, marked_for_deletion=["gone"]
    )
    assert [(name, [p.name for p in moving]) for name, moving in cand.leaving_pods(snap)] == [
        ("gone", ["moves"])
    ]
    assert cand.leaving_pods(snap) is cand.leaving_pods(snap)  # once per snapshot
