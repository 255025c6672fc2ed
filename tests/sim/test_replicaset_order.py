"""kube-controller-manager's scale-down order (ActivePodsWithRanks), rule by rule."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from karpy.sim import replicaset_order

NOW = 1_000_000.0


@dataclass(frozen=True)
class _Pod:
    name: str
    node: str = "n1"
    phase: str = "Running"
    ready: bool = True
    ready_since: float | None = NOW - 100
    created: float = NOW - 200
    uid: str = ""
    deletion_cost: int = 0
    active: bool = True

    @property
    def shuffle(self) -> bytes:
        return replicaset_order.shuffle(self.uid)


def _first(pods: list[_Pod], related: list[_Pod] | None = None) -> str:
    """The name of the pod deleted first."""
    everyone = related if related is not None else pods
    key = replicaset_order.deletion_order(everyone, now=NOW, active=lambda p: p.active)
    return min(pods, key=key).name


BASE = _Pod("base")


@pytest.mark.parametrize(
    ("other", "rule"),
    [
        (replace(BASE, name="x", node=""), "1: not assigned to a node"),
        (replace(BASE, name="x", phase="Pending", ready=False), "2: Pending before Running"),
        (replace(BASE, name="x", phase="Unknown"), "2: Unknown before Running"),
        (replace(BASE, name="x", ready=False), "3: not Ready before Ready"),
        (replace(BASE, name="x", deletion_cost=-5), "4: the lower deletion cost"),
        (replace(BASE, name="x", ready_since=NOW - 1), "6: Ready more recently"),
        (replace(BASE, name="x", created=NOW - 1, ready_since=NOW - 1), "8: created more recently"),
    ],
)
def test_each_rule_puts_its_pod_first(other: _Pod, rule: str) -> None:
    assert _first([BASE, other]) == "x", rule
    assert _first([other, BASE]) == "x", rule  # (whatever the input order)


def test_the_rules_apply_in_order() -> None:
    unassigned_but_costly = replace(BASE, name="a", node="", deletion_cost=100)
    assert _first([BASE, unassigned_but_costly]) == "a"  # rule 1 before rule 4
    pending_old = replace(BASE, name="p", phase="Pending", ready=False, created=NOW - 10_000)
    assert _first([replace(BASE, name="new", created=NOW - 1), pending_old]) == "p"  # 2 before 8
    costly_recent = replace(BASE, name="c", deletion_cost=10, ready_since=NOW - 1)
    assert _first([BASE, costly_recent]) == "base"  # 4 before 6


def test_doubled_up_pods_go_first() -> None:
    # rule 5 counts the active pods of the whole Deployment on each node (old ReplicaSets too)
    alone = replace(BASE, name="alone", node="n2", ready_since=NOW - 1)  # more recently Ready
    crowded = replace(BASE, name="crowded", node="n1")
    neighbour = replace(BASE, name="old-rs", node="n1")  # another ReplicaSet's pod on n1
    assert _first([alone, crowded], related=[alone, crowded, neighbour]) == "crowded"
    gone = replace(neighbour, active=False)  # an inactive neighbour does not count
    assert _first([alone, crowded], related=[alone, crowded, gone]) == "alone"


def test_times_compare_on_a_logarithmic_scale_then_by_uid() -> None:
    assert replicaset_order.log_rank(NOW, NOW - 1) == 29  # 1e9 ns: 2**29.9
    assert replicaset_order.log_rank(NOW, NOW - 2) == 30
    assert replicaset_order.log_rank(NOW, NOW - 2**30 / 1e9) == 30  # (a power of two is its own rank)
    assert replicaset_order.log_rank(NOW, NOW - (2**30 - 1) / 1e9) == 29
    assert replicaset_order.log_rank(NOW, NOW) == -1 and replicaset_order.log_rank(NOW, NOW + 5) == -1
    # 70 s and 100 s ago share rank 36 (2**36 ns is 68.7 s, 2**37 is 137 s): age no longer decides
    a = replace(BASE, name="a", ready_since=NOW - 70, uid="uid-1")
    b = replace(BASE, name="b", ready_since=NOW - 100, uid="uid-2")
    assert replicaset_order.log_rank(NOW, NOW - 70) == replicaset_order.log_rank(NOW, NOW - 100) == 36
    order = replicaset_order.deletion_order([a, b], now=NOW, active=lambda p: p.active)
    assert (order(a) < order(b)) == (replicaset_order.shuffle("uid-1") < replicaset_order.shuffle("uid-2"))
    c = replace(BASE, name="c", ready_since=NOW - 150, uid="uid-1")  # rank 37: b goes first
    assert _first([b, c]) == "b"


def test_numbered_uids_are_picked_in_no_order_of_age() -> None:
    # pods alike but for their (numbered, as the simulated API server hands them out) uids: the
    # first deleted is not simply the oldest or the newest
    pods = [replace(BASE, name=f"p{i}", uid=f"uid-{i:08d}") for i in range(40)]
    key = replicaset_order.deletion_order(pods, now=NOW, active=lambda p: p.active)
    ranked = [int(p.name[1:]) for p in sorted(pods, key=key)]
    assert ranked != sorted(ranked) and ranked != sorted(ranked, reverse=True)
    assert ranked == [int(p.name[1:]) for p in sorted(reversed(pods), key=key)]  # deterministic


@pytest.mark.parametrize(
    ("annotations", "cost"),
    [
        ({}, 0),
        ({replicaset_order.DELETION_COST: "7"}, 7),
        ({replicaset_order.DELETION_COST: "-3"}, -3),
        ({replicaset_order.DELETION_COST: "x"}, 0),
        ({replicaset_order.DELETION_COST: str(2**31)}, 0),
    ],
)
def test_deletion_cost_annotation(annotations: dict[str, str], cost: int) -> None:
    assert replicaset_order.deletion_cost(annotations) == cost
