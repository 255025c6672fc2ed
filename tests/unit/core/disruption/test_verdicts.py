"""Consolidation verdicts carried from pass to pass (``karpy.core.disruption.verdicts``).

A verdict is reused only for the same objects, the same consolidateAfter windows and the same
candidates; anything else is solved again. The property test runs a pass, then a pass over a
changed snapshot (a pod added or gone, a node tainted, the clock moved), and compares it with the
same pass from an empty memo.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_consolidation_stop import NOW, SMALL, SPOT, clusters, full_solves
from test_methods import graceful

import builders as b
from karpy.core.disruption import compute, consolidation
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.taints import Taint

LARGE = b.instance_type("large", cpu="4", memory="4Gi")


@pytest.fixture(autouse=True)
def fresh_memo() -> Iterator[None]:
    consolidation._VERDICTS.clear()
    yield
    consolidation._VERDICTS.clear()


class Solves:
    """How many verdicts ``consolidation.compute`` really computed (a solve each) since made."""

    def __init__(self) -> None:
        self._start = consolidation._VERDICTS.computed

    def __len__(self) -> int:
        return consolidation._VERDICTS.computed - self._start


@pytest.fixture
def solves() -> Solves:
    return Solves()


def two_nodes(*, s2_pods: int = 0, s2_last_event: float | None = None, after: float = 0.0) -> Snapshot:
    """s1 (on demand) runs one 1-CPU pod; s2 (larger) runs ``s2_pods`` 1-CPU pods."""
    pool = b.disruption_pool(consolidate_after=after)
    managed = [
        b.managed_node("s1", instance_type=SMALL, claim_overrides={"last_pod_event": NOW - 600}),
        b.managed_node("s2", instance_type=LARGE, claim_overrides={"last_pod_event": s2_last_event}),
    ]
    pods = [b.running_pod("a", "s1", cpu="1")]
    pods += [b.running_pod(f"b{i}", "s2", cpu="1") for i in range(s2_pods)]
    return b.managed_snapshot(pools=[pool], types=[SMALL, LARGE], managed=managed, pods=pods, now=NOW)


def single(snap: Snapshot, name: str = "s1") -> tuple[Any, str]:
    candidate = next(c for c in graceful(snap) if c.name == name)
    return consolidation.compute(snap, [candidate], method="single-node consolidation")


def test_a_pass_over_the_same_objects_solves_nothing_again(solves: Solves) -> None:
    snap = two_nodes(s2_pods=1)
    first = compute(snap, NOW)
    assert first.command is not None
    solved = len(solves)
    assert solved > 0
    later = dataclasses.replace(snap, now=NOW + 10)  # a new snapshot object holding the same objects
    again = compute(later, NOW + 10)
    assert len(solves) == solved
    assert again.command == first.command
    assert {n: r.reasons for n, r in again.records.items()} == {
        n: r.reasons for n, r in first.records.items()
    }


def test_a_node_whose_pods_changed_is_solved_again(solves: Solves) -> None:
    roomy = two_nodes(s2_pods=1)
    command, _ = single(roomy)
    assert command is not None and command.decision == "delete"
    # s2 fills up: a new StateNode for it, every other object the same
    full_s2 = b.running_pod("b9", "s2", cpu="2500m")
    nodes = tuple(
        dataclasses.replace(n, pods=(*n.pods, full_s2)) if n.name == "s2" else n for n in roomy.nodes
    )
    full = dataclasses.replace(roomy, nodes=nodes, pods=(*roomy.pods, full_s2))
    before = len(solves)
    command, why = single(full)
    assert len(solves) == before + 1
    assert command is None or command.decision == "replace", why


def test_a_node_tainted_since_is_solved_again() -> None:
    roomy = two_nodes(s2_pods=1)
    command, _ = single(roomy)
    assert command is not None and command.decision == "delete"
    # the same pods; s2's Node now carries a NoSchedule taint the pod does not tolerate
    nodes = tuple(
        dataclasses.replace(n, node=b.replace(n.node, taints=(Taint("maintenance", "NoSchedule", ""),)))
        if n.name == "s2"
        else n
        for n in roomy.nodes
    )
    command, why = single(dataclasses.replace(roomy, nodes=nodes))
    assert command is None or command.decision == "replace", why


def test_the_consolidate_after_window_at_the_pass_time_is_part_of_the_verdict() -> None:
    # s2 had a pod event 60 s ago: inside its 300 s window at NOW, outside it 300 s later
    snap = two_nodes(s2_pods=1, s2_last_event=NOW - 60, after=300.0)
    inside, why = single(snap)
    assert inside is None or inside.decision == "replace", why
    later = dataclasses.replace(snap, now=NOW + 300)
    outside, _ = single(later)
    assert outside is not None and outside.decision == "delete"


def test_the_switches_are_part_of_the_verdict() -> None:
    pods = [b.running_pod("a", "s1", cpu="1500m"), b.running_pod("b", "s2", cpu="1500m")]
    managed = [b.managed_node(n, instance_type=SMALL, capacity_type=SPOT) for n in ("s1", "s2")]
    snap = b.managed_snapshot(
        pools=[b.disruption_pool()], types=[SMALL, LARGE], managed=managed, pods=pods, now=NOW
    )
    _, stopped = single(snap)
    assert stopped.startswith("pods would not all fit elsewhere")  # answered without a solve
    with full_solves():
        _, full = single(snap)
    assert full == consolidation._SPOT_GATE


# -- property: a memo never changes a pass ----------------------------------------------------------


def _changed(snap: Snapshot, change: str, which: int) -> Snapshot:
    nodes = list(snap.nodes)
    i = which % len(nodes)
    node = nodes[i]
    if change == "clock":
        return dataclasses.replace(snap, now=snap.now + 400)
    if change == "drop-pod" and node.pods:
        gone = node.pods[-1]
        nodes[i] = dataclasses.replace(node, pods=node.pods[:-1])
        pods = tuple(p for p in snap.pods if p is not gone)
        return dataclasses.replace(snap, nodes=tuple(nodes), pods=pods)
    if change == "add-pod":
        extra = b.running_pod(f"{node.name}-extra", node.name, cpu="250m", memory="128Mi", started=NOW)
        nodes[i] = dataclasses.replace(node, pods=(*node.pods, extra))
        return dataclasses.replace(snap, nodes=tuple(nodes), pods=(*snap.pods, extra))
    if change == "taint" and node.node is not None:
        taint = Taint("maintenance", "NoSchedule", "")
        nodes[i] = dataclasses.replace(node, node=b.replace(node.node, taints=(*node.node.taints, taint)))
        return dataclasses.replace(snap, nodes=tuple(nodes))
    if change == "rebuild":  # equal content, new objects: solved again, same answers
        nodes[i] = StateNode(node.name, node.node, node.claim, node.pods)
        return dataclasses.replace(snap, nodes=tuple(nodes))
    return dataclasses.replace(snap, now=snap.now + 10)  # same objects, new snapshot


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    st.lists(
        st.tuples(
            st.sampled_from(["same", "clock", "drop-pod", "add-pod", "taint", "rebuild"]), st.integers(0, 9)
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_a_pass_with_remembered_verdicts_decides_as_a_fresh_one(
    snap: Snapshot, changes: list[tuple[str, int]]
) -> None:
    consolidation._VERDICTS.clear()
    compute(snap, snap.now)
    for change, which in changes:
        snap = _changed(snap, change, which)
        remembered = compute(snap, snap.now)
        consolidation._VERDICTS.clear()
        fresh = compute(snap, snap.now)
        assert remembered.command == fresh.command
        assert {n: r.reasons for n, r in remembered.records.items()} == {
            n: r.reasons for n, r in fresh.records.items()
        }
