"""Existing nodes across solves: the solves of a disruption pass see the same StateNodes,
so each node keeps, per kind of pod, the verdict of its checks before topology, and NodePool usage
is counted from the difference to the last full count. A warm solve must give exactly what a cold
one gives, rejection messages included."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders as b
from karpy.core import lifecycle, scheduling
from karpy.core.scheduling import existing, limits, reference, scheduler
from karpy.core.scheduling.nodeclaim import Unfit
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.objects import Pod
from karpy.model.resources import Resources
from karpy.model.taints import NO_SCHEDULE, Taint, Toleration

TYPES = [b.instance_type("m", cpu="2", memory="4Gi")]
TAINT = Taint("team", NO_SCHEDULE, "a")
TOLERATE = Toleration("team", "Exists")


def forget() -> None:
    existing._BASES.clear()
    existing._KINDS.clear()
    limits._LAST.clear()


def digest(results: scheduling.Results) -> dict[str, Any]:
    """Claims without their names (the reference path may open them in another order)."""
    return {
        "claims": sorted(
            (c.node_pool, str(c.requirements), [p.key for p in c.pods]) for c in results.new_claims
        ),
        "existing": sorted(results.existing.items()),
        "errors": [(e.pod.key, sorted(e.reasons.items()), e.relaxations) for e in results.errors],
    }


def verdicts(snap: Snapshot) -> list[Unfit | None]:
    """The verdicts the snapshot's nodes remember (a solver finds their shared parts)."""
    return [v for base in scheduler.Solver(snap, []).bases for v in base.verdicts.values()]


CACHES = scheduling.SchedulingCaches()  # shared by the warm solves, as a controller's are


def solves(snapshot: Snapshot, pods: Sequence[Pod], **kw: Any) -> list[dict[str, Any]]:
    """The same solve warm (what earlier solves left), cold, and one by one (the reference path
    runs every check: no remembered verdicts)."""
    warm = digest(scheduling.solve(snapshot, pods, caches=CACHES, **kw))
    forget()
    cold = digest(scheduling.solve(snapshot, pods, caches=scheduling.SchedulingCaches(), **kw))
    one_by_one = digest(reference.solve(snapshot, pods, **kw))
    return [warm, cold, one_by_one]


def _cluster() -> Snapshot:
    room = {"cpu": "2", "memory": "4Gi", "pods": "10"}
    nodes = [
        b.node("a-taint", allocatable=room, taints=[TAINT]),
        b.node("b-full", allocatable={"cpu": "1", "memory": "4Gi", "pods": "10"}),
        b.node("c-port", allocatable=room),
        b.node("d-open", allocatable=room),
    ]
    bound = [
        b.pod("busy", cpu="900m", node_name="b-full"),
        b.pod("web", cpu="100m", host_ports=[8080], node_name="c-port"),
    ]
    return b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=nodes, pods=bound)


def _kinds() -> list[list[Pod]]:
    """Pods that differ from the plain one in exactly one thing the checks before topology read."""
    return [
        [b.pod(f"plain-{i}", cpu="500m") for i in range(3)],
        [b.pod(f"tolerant-{i}", cpu="500m", tolerations=[TOLERATE]) for i in range(3)],
        [b.pod(f"big-{i}", cpu="1500m") for i in range(2)],
        [b.pod(f"port-{i}", cpu="500m", host_ports=[8080]) for i in range(2)],
        [b.pod("ba", cpu="500m", node_selector={"b": "1", "a": "2"}, tolerations=[TOLERATE])],
        [b.pod("ab", cpu="500m", node_selector={"a": "2", "b": "1"}, tolerations=[TOLERATE])],
        [b.pod(f"plain-{i}", cpu="500m") for i in range(3)],
    ]


def _pass(snap: Snapshot) -> list[Snapshot]:
    """The snapshots of a disruption pass: the same StateNodes, minus one candidate each time."""
    return [
        dataclasses.replace(snap, nodes=snap.nodes[:i] + snap.nodes[i + 1 :]) for i in range(len(snap.nodes))
    ]


def test_warm_solves_of_a_pass_equal_cold_ones() -> None:
    forget()
    snap = _cluster()
    for reduced in [snap, *_pass(snap)]:
        for pods in _kinds():
            warm, cold, reference = solves(reduced, pods)
            assert warm == cold == reference
    # the cases above do reach the remembered verdicts, and the message order of the requirements
    ba, ab = (scheduling.solve(snap, _kinds()[k]).errors[0].reasons["existing nodes"] for k in (4, 5))
    assert ba.endswith(
        'a-taint: incompatible requirements: label "b" does not have known values; '
        'label "a" does not have known values'
    )
    assert ab.endswith(
        'a-taint: incompatible requirements: label "a" does not have known values; '
        'label "b" does not have known values'
    )
    assert verdicts(snap)


def test_remembered_verdicts_follow_what_the_pod_asks() -> None:
    """After plain pods were rejected by the tainted and the full node, a pod that tolerates the
    taint lands on the tainted node and a small one on the full node."""
    forget()
    snap = _cluster()
    scheduling.solve(snap, [b.pod("plain", cpu="500m")])
    placed = scheduling.solve(snap, [b.pod("tolerant", cpu="500m", tolerations=[TOLERATE])]).existing
    assert placed == {"default/tolerant": "a-taint"}
    scheduling.solve(snap, [b.pod("mid", cpu="200m")])  # rejected by b-full, fits c-port
    placed = scheduling.solve(snap, [b.pod("tiny", cpu="50m")]).existing
    assert placed == {"default/tiny": "b-full"}


def test_a_node_that_took_pods_is_checked_again() -> None:
    """The remembered verdict is of the node as it came: once it took a pod, the message names
    what is short now."""
    pool = b.node_pool(limits={"cpu": "1"})  # used up by the node: no new claims
    node = b.node(
        "n",
        allocatable={"cpu": "1", "memory": "4Gi", "pods": "10"},
        labels={"karpenter.sh/nodepool": "default"},
    )
    snap = b.snapshot(pools=[pool], types=TYPES, nodes=[node])
    wide = b.pod("wide", cpu="200m", memory="5Gi")
    forget()
    assert scheduling.solve(snap, [wide]).errors[0].reasons["existing nodes"] == "n: not enough memory"
    first = b.pod("first", cpu="900m", memory="1Gi")  # queued first (more cpu) and placed on n
    for results in solves(snap, [first, wide]):
        assert results["existing"] == [("default/first", "n")]
        assert dict(results["errors"][0][1])["existing nodes"] == "n: not enough cpu, memory"


def test_other_daemonsets_make_other_nodes() -> None:
    snap = _cluster()
    agent = b.daemonset("agent", cpu="1600m")
    forget()
    for daemonsets in ((), (agent,), ()):
        with_ds = dataclasses.replace(snap, daemonsets=daemonsets)
        for pods in _kinds():
            warm, cold, reference = solves(with_ds, pods)
            assert warm == cold == reference


def test_bounded_tables_still_give_cold_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(existing, "MAX_VERDICTS", 1)
    monkeypatch.setattr(existing, "MAX_KINDS", 2)
    forget()
    snap = _cluster()
    for reduced in _pass(snap):
        for pods in _kinds():
            warm, cold, reference = solves(reduced, pods)
            assert warm == cold == reference
    assert len(existing._KINDS) <= 2


def test_remembered_verdicts_are_never_raised() -> None:
    """A raised exception keeps its traceback (and the solve's frames) alive."""
    forget()
    snap = _cluster()
    for pods in _kinds():
        scheduling.solve(snap, pods)
    remembered = verdicts(snap)
    assert any(v is not None for v in remembered)
    assert all(v is None or v.__traceback__ is None for v in remembered)


def test_the_consolidate_after_window_is_checked_per_solve() -> None:
    """A node inside its window takes no running pods, whatever else it would say; the window
    moves with ``now``."""
    pool = b.disruption_pool(consolidate_after=300.0, limits={"cpu": "1"})  # used up: no new claims
    managed = [
        b.managed_node("n1", created=1000.0, allocatable={"cpu": "500m", "memory": "4Gi", "pods": "10"}),
        b.managed_node("n2", created=1000.0),
        b.managed_node("n3", created=1000.0),
    ]
    moved = b.running_pod("moved", "n2", cpu="1")
    snap = b.managed_snapshot(pools=[pool], types=TYPES, managed=managed, pods=[moved])
    reduced = dataclasses.replace(snap, nodes=(snap.nodes[0], snap.nodes[2]))  # n2 is the candidate
    forget()
    for now in (1100.0, 1400.0, 1200.0):
        warm, cold, reference = solves(dataclasses.replace(reduced, now=now), [moved], consolidation=True)
        assert warm == cold == reference
        if now - 1000.0 < 300.0:
            assert "n1: node is still inside its consolidateAfter window" in str(warm["errors"])
        else:
            assert warm["existing"] == [("default/moved", "n3")]


@pytest.mark.parametrize("after", [None, 0.0, 300.0])
@pytest.mark.parametrize("initialized", [True, False])
@pytest.mark.parametrize("last_pod_event", [None, 1250.0])
@pytest.mark.parametrize("now", [1000.0, 1299.0, 1300.0, 1600.0])
def test_window_equals_the_lifecycle_rule(
    after: float | None, initialized: bool, last_pod_event: float | None, now: float
) -> None:
    pool = b.disruption_pool(consolidate_after=after)
    claim = b.node_claim("c", created=1000.0, initialized=initialized, last_pod_event=last_pod_event)
    since = lifecycle.consolidatable_since(claim)
    expected = lifecycle.under_consolidate_after(pool, claim, now)
    assert existing.in_consolidate_window(since, pool.disruption.consolidate_after, now) == expected
    assert not existing.in_consolidate_window(None, after, now)  # no claim
    assert not existing.in_consolidate_window(since, None, now)  # no pool, or no window
    state = StateNode("c", b.node("c"), claim)
    assert state.initialized == (initialized or claim.is_true("Initialized"))
    assert state.initialized is state.initialized


def _usage_cases() -> list[Sequence[StateNode]]:
    def managed(prefix: str, count: int, pool: str, cpu: str) -> tuple[StateNode, ...]:
        pairs = [b.managed_node(f"{prefix}{i}", pool=pool, allocatable={"cpu": cpu}) for i in range(count)]
        return b.managed_snapshot(pools=[b.node_pool(pool)], types=TYPES, managed=pairs).nodes

    full = managed("a", 5, "a", "4") + managed("b", 3, "b", "8")
    claim = full[2].claim
    assert claim is not None
    grown = dataclasses.replace(
        full[2], claim=dataclasses.replace(claim, capacity=Resources.parse({"cpu": "64"}))
    )
    many = managed("x", 20, "a", "2")
    big = full + managed("y", 70, "a", "2")
    # every node a new object counting the same (its pods changed): more than MAX_DIFFERENCE pairs
    repodded = tuple(dataclasses.replace(n, pods=()) for n in big)
    # the same names, one now in pool b, one with another capacity, among nodes counting the same
    moved_claim = repodded[3].claim
    assert moved_claim is not None
    moved = dataclasses.replace(repodded[3], claim=dataclasses.replace(moved_claim, node_pool="b"))
    regrown = dataclasses.replace(grown, pods=())
    shifted = tuple(
        moved if i == 3 else regrown if i == 2 else dataclasses.replace(n, pods=()) for i, n in enumerate(big)
    )
    assert len(big) > limits.MAX_DIFFERENCE
    return [
        big,
        repodded,
        shifted,
        full,
        full[1:],  # a pass: one candidate out ...
        full[:3] + full[4:],  # ... then another
        (*full[:2], grown, *full[3:]),  # a changed node is a new object
        full[:5],  # every node of pool b gone
        full + many,  # more new nodes than the difference allows: a new full count
        full + many[:1],
        full[:1] + full,  # the same node twice
        list(full[1:]),
        (),
        full,
    ]


def test_pool_usages_equal_a_full_count() -> None:
    limits._LAST.clear()
    pools = [b.node_pool("a"), b.node_pool("b"), b.node_pool("c")]
    for nodes in _usage_cases():
        usages = limits.pool_usages(nodes)
        for pool in pools:
            assert Resources(usages.get(pool.name, {})) == limits.pool_usage(pool, nodes), (
                pool.name,
                len(nodes),
            )


@st.composite
def passes(draw: st.DrawFn) -> tuple[Snapshot, list[list[Pod]]]:
    """Nodes with taints, bound pods (requests, host ports) and labels; deployments of pods that
    differ in tolerations, requests, host ports and selectors (keys in either order)."""
    nodes, bound = [], []
    for i in range(draw(st.integers(1, 5))):
        name = f"n{i}"
        labels = {k: "1" for k in draw(st.lists(st.sampled_from(["a", "b"]), unique=True))}
        nodes.append(
            b.node(
                name,
                labels=labels,
                allocatable={"cpu": draw(st.sampled_from(["1", "2"])), "memory": "4Gi", "pods": "4"},
                taints=[TAINT] if draw(st.integers(0, 3)) == 0 else [],
            )
        )
        for j in range(draw(st.integers(0, 2))):
            ports = [8080] if draw(st.integers(0, 3)) == 0 else []
            bound.append(
                b.pod(
                    f"{name}-{j}",
                    cpu=draw(st.sampled_from(["100m", "700m"])),
                    host_ports=ports,
                    node_name=name,
                )
            )
    rounds = []
    for r in range(draw(st.integers(1, 4))):
        spec: dict[str, Any] = {"cpu": draw(st.sampled_from(["100m", "500m", "1500m"]))}
        if draw(st.booleans()):
            spec["tolerations"] = [TOLERATE]
        if draw(st.integers(0, 3)) == 0:
            spec["host_ports"] = [8080]
        keys = draw(st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=2))
        spec["node_selector"] = {k: "1" for k in keys}
        rounds.append([b.pod(f"r{r}-{k}", **spec) for k in range(draw(st.integers(1, 3)))])
    snap = b.snapshot(pools=[b.node_pool()], types=TYPES, nodes=nodes, pods=bound)
    return snap, rounds


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(passes())
def test_random_passes_equal_cold_solves(case: tuple[Snapshot, list[list[Pod]]]) -> None:
    snap, rounds = case
    forget()
    for reduced in [snap, *_pass(snap)]:
        for pods in rounds:
            warm, cold, reference = solves(reduced, pods)
            assert warm == cold == reference


def test_limit_helpers_equal_their_plain_definitions() -> None:
    types = [
        b.instance_type("small", cpu="2", memory="4Gi"),
        b.instance_type("wide", cpu="1", memory="16Gi", pods="30"),
        b.instance_type("big", cpu="8", memory="8Gi"),
    ]
    folded = Resources()
    for it in types:
        folded = folded.max(it.capacity)
    assert limits.max_capacity(types) == folded
    assert list(limits.max_capacity(types).items()) == list(folded.items())
    assert limits.max_capacity([]) == Resources()
    for remaining in ({"cpu": 2000}, {"cpu": 1999, "nodes": 3}, {"memory": -1}, {"gpu": -5}, {}):
        for it in types:
            plain = all(it.capacity.get(k, 0) <= left for k, left in remaining.items() if k in it.capacity)
            assert limits.within_limits(it, remaining) == plain, (it.name, remaining)


def test_only_nodes_a_pod_gets_past_the_remembered_checks_of_are_built() -> None:
    """A solve builds an existing node when a pod passes the checks its NodeBase answers; the
    others (full, tainted) stay unbuilt and still give the same placements and reasons."""
    forget()
    full = [b.node(f"full-{i}", allocatable={"cpu": "1", "memory": "1Gi", "pods": "10"}) for i in range(4)]
    roomy = b.node("roomy", allocatable={"cpu": "4", "memory": "4Gi", "pods": "10"})
    busy = [b.pod(f"busy-{i}", cpu="900m", node_name=f"full-{i}") for i in range(4)]
    snap = b.snapshot(pools=[], types=[], nodes=[*full, roomy], pods=busy)
    pods = [b.pod("big", cpu="2"), b.pod("huge", cpu="8")]
    solver = scheduler.Solver(snap, pods)
    results = solver.solve(pods)
    assert results.existing == {"default/big": "roomy"}
    assert [node is not None for node in solver.existing] == [False, False, False, False, True]
    [error] = results.errors
    assert error.reasons["existing nodes"].startswith("5 nodes did not fit, e.g. full-0: not enough cpu")
    one_by_one = reference.solve(snap, pods)
    assert (one_by_one.existing, one_by_one.errors) == (results.existing, results.errors)


def test_the_walk_skips_only_nodes_with_a_lasting_objection() -> None:
    """``Places.fitting`` keeps the nodes whose NodeBase does not reject a kind of pod for good: a
    taint, a used host port or too little room leave a node out; a requirement on a label the node
    lacks does not (a topology narrowing may still define it), nor does no objection at all."""
    forget()
    snap = _cluster()
    places = existing.existing_places(snap, scheduling.SchedulingCaches().places)
    assert [n.name for n in places.active] == ["a-taint", "b-full", "c-port", "d-open"]

    def fitting(pod: Pod, windows: tuple[bool, ...] | None = None) -> list[str]:
        data = scheduler.Solver(snap, [pod]).pod_data(pod)
        kept = places.fitting(windows, pod, data, existing.pod_kind(pod, data))
        return [places.active[i].name for i in kept]

    assert fitting(b.pod("plain", cpu="50m")) == ["b-full", "c-port", "d-open"]
    assert fitting(b.pod("big", cpu="1500m")) == ["c-port", "d-open"]
    assert fitting(b.pod("port", cpu="50m", host_ports=[8080])) == ["b-full", "d-open"]
    assert fitting(b.pod("tolerant", cpu="50m", tolerations=[TOLERATE])) == [
        "a-taint",
        "b-full",
        "c-port",
        "d-open",
    ]
    picky = b.pod("picky", cpu="50m", node_selector={"disk": "ssd"})
    assert fitting(picky) == ["b-full", "c-port", "d-open"]
    data = scheduler.Solver(snap, [picky]).pod_data(picky)
    objection = places.bases[3].known_unfit(False, picky, data, existing.pod_kind(picky, data))
    assert objection is not None and not objection.monotone  # rejected now, kept all the same
    # a running pod in a consolidation solve skips the nodes inside their consolidateAfter window;
    # the windows keep no pending pod off
    windows = (False, False, True, False)
    assert fitting(b.pod("moved", cpu="50m", node_name="x"), windows) == ["b-full", "d-open"]
    assert fitting(b.pod("moved", cpu="50m"), windows) == ["b-full", "c-port", "d-open"]


def test_nodes_without_keeps_the_order_of_the_rest() -> None:
    """``Places.nodes_without`` is the snapshot's node tuple filtered by name (every node of a
    repeated name goes), in the snapshot's order."""
    forget()
    nodes = [b.node(name) for name in ("d", "a", "c", "a", "b")]
    snap = b.snapshot(pools=[], types=[], nodes=nodes)
    assert [n.name for n in snap.nodes] == ["d", "a", "c", "a", "b"]
    places = existing.existing_places(snap, scheduling.SchedulingCaches().places)
    for names in (frozenset(), frozenset({"a"}), frozenset({"d", "b", "gone"}), frozenset("abcd")):
        assert places.nodes_without(names) == tuple(n for n in snap.nodes if n.name not in names), names
