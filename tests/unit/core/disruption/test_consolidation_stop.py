"""Consolidation solves that stop early (``Results.stopped``) decide exactly what full solves do.

A solve may stop at a second new NodeClaim (``compute`` refuses more than one) and, under the
spot-to-spot gate, at a first NodeClaim of a NodePool certain to allow spot. The property
tests run whole disruption passes with and without the stop (``consolidation.EARLY_STOP``) on
random clusters with the cases the stop must stay away from: NodePools that do not allow
spot, offerings without a spot sibling, pods that prefer or require a capacity type, and
NodePools with minValues.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_methods import graceful

import builders as b
from karpy import settings as settings_mod
from karpy.core import scheduling
from karpy.core.disruption import compute, consolidation, room
from karpy.core.scheduling.podinfo import pod_requests
from karpy.core.scheduling.results import STOP_CLAIMS, STOP_POOL, StopWhen
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.catalog import Offering
from karpy.model.requirements import Requirement
from karpy.model.resources import Resources
from karpy.model.taints import Taint, Toleration

NOW = 1_000_000.0
SPOT, OD = wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND
STOPPED_AT_SPOT = "would need a new node, and " + consolidation._SPOT_GATE
NOWHERE = "pods would not all fit elsewhere: "  # and no solve ran (karpy.core.disruption.room)
SMALL = b.instance_type("small", cpu="2", memory="2Gi")
LARGE = b.instance_type("large", cpu="8", memory="8Gi")


@contextmanager
def full_solves() -> Iterator[None]:
    consolidation.EARLY_STOP = False
    try:
        yield
    finally:
        consolidation.EARLY_STOP = True


def spot_snapshot(pods: list[Any], *, pools: list[Any] | None = None, types: Any = None) -> Snapshot:
    pools = pools or [b.disruption_pool()]
    managed = [
        b.managed_node(n, pool=pools[0].name, instance_type=SMALL, capacity_type=SPOT) for n in ("s1", "s2")
    ]
    return b.managed_snapshot(
        pools=pools,
        types=types or [SMALL, LARGE],
        managed=managed,
        pods=pods,
        now=NOW,
    )


def refused_by_the_spot_gate(snap: Snapshot, chosen: Any) -> str:
    """Why consolidating ``chosen`` is refused with the stop on; asserts that the full solve is
    refused too, by the spot-to-spot gate."""
    command, why = consolidation.compute(snap, [chosen], method="test")
    assert command is None
    with full_solves():
        assert consolidation.compute(snap, [chosen], method="test") == (None, consolidation._SPOT_GATE)
    return why


# -- the solver ---------------------------------------------------------------------------------------


def test_a_solve_stops_at_the_new_claim_its_caller_named() -> None:
    pods = [b.pod(f"p{i}", cpu="7") for i in range(3)]  # one large node each
    snap = b.managed_snapshot(pools=[b.node_pool()], types=[SMALL, LARGE], pods=pods, now=NOW)
    full = scheduling.solve(snap)
    assert len(full.new_claims) == 3 and not full.stopped
    assert scheduling.solve(snap, stop=StopWhen(1)).stopped == STOP_CLAIMS
    assert scheduling.solve(snap, stop=StopWhen(5, frozenset({"default"}))).stopped == STOP_POOL
    unused = scheduling.solve(snap, stop=StopWhen(3, frozenset({"other"})))
    assert not unused.stopped and unused.placement() == full.placement()


# -- when consolidation stops --------------------------------------------------------------------------


def test_a_spot_node_whose_pods_need_a_spot_capable_node_stops_at_the_first_claim() -> None:
    web = {"app": "web"}
    anti = [b.anti_affinity_term(web)]  # room on s2, but not for a second web pod
    pods = [
        b.running_pod(n, f"s{i}", cpu="500m", labels=web, anti_affinity=anti) for i, n in ((1, "a"), (2, "b"))
    ]
    snap = spot_snapshot(pods)
    [s1, _s2] = graceful(snap)
    when = consolidation._stop_when(snap, [s1.reschedulable], True)
    assert when == StopWhen(1, frozenset({"default"}))
    assert refused_by_the_spot_gate(snap, s1) == STOPPED_AT_SPOT


# -- when no other node can take a moved pod: no solve at all ------------------------------------------


def test_a_moved_pod_too_big_for_every_other_node_is_answered_without_a_solve() -> None:
    snap = spot_snapshot([b.running_pod("a", "s1", cpu="1500m"), b.running_pod("b", "s2", cpu="1500m")])
    s1 = next(c for c in graceful(snap) if c.name == "s1")
    sim = consolidation.simulate(
        snap, [s1], consolidation=True, stop=lambda groups: consolidation._stop_when(snap, groups, True)
    )
    assert sim.nowhere == room.Nowhere("default/a", 1, 0, 0, True)
    assert refused_by_the_spot_gate(snap, s1) == (
        "pods would not all fit elsewhere: default/a fits on none of the 1 other nodes (0 inside their "
        "consolidateAfter window, 0 not initialized, the rest too full or tainted); it would need a new "
        "node, and " + consolidation._SPOT_GATE
    )


def test_nodes_inside_their_window_take_no_moved_pod_and_are_counted() -> None:
    pool = b.disruption_pool(consolidate_after=300.0)
    managed = [
        b.managed_node(
            "s1", instance_type=SMALL, capacity_type=SPOT, claim_overrides={"last_pod_event": NOW - 600}
        ),
        b.managed_node(
            "s2", instance_type=LARGE, capacity_type=SPOT, claim_overrides={"last_pod_event": NOW - 60}
        ),
    ]
    pods = [b.running_pod("a", "s1", cpu="500m"), b.running_pod("b", "s2", cpu="500m")]
    snap = b.managed_snapshot(pools=[pool], types=[SMALL, LARGE], managed=managed, pods=pods, now=NOW)
    [s1] = graceful_in_window(snap)
    why = refused_by_the_spot_gate(snap, s1)
    assert "fits on none of the 1 other nodes (1 inside their consolidateAfter window" in why


def two_pods_on_s1(cpu: str) -> tuple[Snapshot, Any, room.Nowhere | room.Crowded | None]:
    """Two pods of ``cpu`` on s1, 800m used on s2 (1200m free): the snapshot, s1, and what the
    room check says of moving s1's pods."""
    snap = spot_snapshot(
        [b.running_pod(n, "s1", cpu=cpu, memory="128Mi") for n in ("a", "b")]
        + [b.running_pod("c", "s2", cpu="800m", memory="128Mi")]
    )
    s1 = next(c for c in graceful(snap) if c.name == "s1")
    when = consolidation._stop_when(snap, [s1.reschedulable], True)
    assert when is not None
    return snap, s1, room.unplaceable(snap, frozenset({"s1"}), [s1.reschedulable], when)


def test_moved_pods_that_fit_alone_but_not_together_are_answered_without_a_solve() -> None:
    """s2 has 1200m free: either 700m pod alone fits there, both together do not."""
    snap, s1, found = two_pods_on_s1("700m")
    assert isinstance(found, room.Crowded)
    assert (found.count, found.slots, found.others, found.new_node) == (2, 1, 1, True)
    assert refused_by_the_spot_gate(snap, s1) == (
        "pods would not all fit elsewhere: 2 moved pods ask for at least cpu: 700m, memory: 128Mi, "
        "pods: 1 each, and the 1 other nodes (0 inside their consolidateAfter window, 0 not "
        "initialized, the rest too full or tainted) have room for 1; the rest would need a new node, "
        "and " + consolidation._SPOT_GATE
    )


def test_two_moved_pods_that_fit_together_keep_the_solve() -> None:
    snap, s1, found = two_pods_on_s1("600m")
    assert found is None
    command, _ = consolidation.compute(snap, [s1], method="test")
    assert command is not None and command.candidates == ("s1",)


def test_a_node_not_initialized_is_no_way_out_for_a_moved_pod() -> None:
    """The solve would place the pod on s2, and ``simulate`` would call it stranded there."""
    managed = [
        b.managed_node("s1", instance_type=SMALL, capacity_type=SPOT),
        b.managed_node("s2", instance_type=SMALL, capacity_type=SPOT, initialized=False),
    ]
    snap = b.managed_snapshot(
        pools=[b.disruption_pool()],
        types=[SMALL, LARGE],
        managed=managed,
        pods=[b.running_pod("a", "s1", cpu="500m")],
        now=NOW,
    )
    [s1] = graceful(snap)
    command, why = consolidation.compute(snap, [s1], method="test")
    assert command is None
    assert "of the 1 other nodes (0 inside their consolidateAfter window, 1 not initialized" in why
    with full_solves():
        assert consolidation.compute(snap, [s1], method="test") == (
            None,
            "pods would not all fit elsewhere: default/a: would land on uninitialized node s2",
        )


def test_a_pool_that_could_replace_the_node_keeps_the_solve() -> None:
    """An untainted on-demand NodePool could host a cheaper replacement: no shortcut."""
    od = b.disruption_pool("od", requirements=[(wk.CAPACITY_TYPE, "In", [OD])])
    batch = b.disruption_pool(
        "batch", requirements=[(wk.CAPACITY_TYPE, "In", [OD])], taints=[Taint("tier", "NoSchedule", "batch")]
    )
    pods = [b.running_pod("a", "s1", cpu="1500m"), b.running_pod("b", "s2", cpu="1500m")]
    for pools, shortcut in (([b.disruption_pool(), od], False), ([b.disruption_pool(), batch], True)):
        snap = spot_snapshot(pods, pools=pools)
        s1 = next(c for c in graceful(snap) if c.name == "s1")
        when = consolidation._stop_when(snap, [s1.reschedulable], True)
        assert when is not None
        found = room.unplaceable(snap, frozenset({"s1"}), [s1.reschedulable], when)
        assert (found is not None) == shortcut, pools
        with full_solves():
            full, _ = consolidation.compute(snap, [s1], method="test")
        assert consolidation.compute(snap, [s1], method="test")[0] == full


def test_a_kept_tuple_of_moved_pods_is_read_anew_under_other_pools_or_another_stop() -> None:
    """The room check keeps what it read of a candidate's tuple of pods per NodePools tuple and stop."""
    od = b.disruption_pool("od", requirements=[(wk.CAPACITY_TYPE, "In", [OD])])
    batch = b.disruption_pool(
        "batch", requirements=[(wk.CAPACITY_TYPE, "In", [OD])], taints=[Taint("tier", "NoSchedule", "batch")]
    )
    pods = [b.running_pod("a", "s1", cpu="1500m"), b.running_pod("b", "s2", cpu="1500m")]
    tainted = spot_snapshot(pods, pools=[b.disruption_pool(), batch])
    plain = spot_snapshot(pods, pools=[b.disruption_pool(), od])
    moved = next(c for c in graceful(tainted) if c.name == "s1").reschedulable
    stop = consolidation._stop_when(tainted, [moved], True)
    assert stop == StopWhen(1, frozenset({"default"}))
    s1 = frozenset({"s1"})
    assert isinstance(room.unplaceable(tainted, s1, [moved], stop), room.Nowhere)
    kept = room._MOVED[id(moved)][3]
    assert kept.made_sizes is None  # a kind without room answered: the slot sizes were not made
    assert room.unplaceable(plain, s1, [moved], stop) is None  # "od" could take the pod: no certainty
    assert room.unplaceable(tainted, s1, [moved], StopWhen(1, frozenset())) is None  # no claim stops
    assert isinstance(room.unplaceable(tainted, s1, [moved], stop), room.Nowhere)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["250m", "500m", "1"]), st.booleans(), st.booleans()),
        min_size=0,
        max_size=12,
    ),
    st.lists(st.integers(0, 12), max_size=4),
)
def test_the_reads_of_several_tuples_combine_into_the_read_of_their_pods(
    specs: list[tuple[str, bool, bool]], cuts: list[int]
) -> None:
    """The room check reads a multi-node prefix as its candidates' tuples, combined."""
    tolerant = (Toleration("tier", "Equal", "batch", "NoSchedule"),)
    pods = [
        b.running_pod(f"p{i}", "s1" if bound else "", cpu=cpu, tolerations=tolerant if tolerates else ())
        for i, (cpu, bound, tolerates) in enumerate(specs)
    ]
    batch = b.disruption_pool(
        "batch", requirements=[(wk.CAPACITY_TYPE, "In", [OD])], taints=[Taint("tier", "NoSchedule", "batch")]
    )
    snap = spot_snapshot([b.running_pod("x", "s2", cpu="100m")], pools=[b.disruption_pool(), batch])
    passroom = room._pass_room_of(snap, scheduling.SchedulingCaches())
    bounds = sorted({min(c, len(pods)) for c in cuts} | {0, len(pods)})
    parts = [tuple(pods[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    stop_pools = frozenset({"default"})
    flat = room._moved(passroom, pods, stop_pools)
    combined = room._combined([room._moved_of(passroom, snap.node_pools, part, stop_pools) for part in parts])
    assert combined == flat  # (kinds compare by identity: the same interned objects, in the same order)


def graceful_in_window(snap: Snapshot) -> list[Any]:
    """The candidates outside their consolidateAfter window (as the pass filters them)."""
    from karpy.core import lifecycle

    return [
        c
        for c in graceful(snap)
        if c.node.claim is not None and lifecycle.consolidatable(c.pool, c.node.claim, NOW)
    ]


def test_the_gate_never_stops_a_solve_whose_claim_could_be_on_demand() -> None:
    prefers_od = {"preferred_terms": [(1, [(wk.CAPACITY_TYPE, "In", [OD])])]}
    on_demand_only = b.disruption_pool("od", requirements=[(wk.CAPACITY_TYPE, "In", [OD])])
    no_spot_in_zone = b.instance_type("large", cpu="8", memory="8Gi", unavailable=[(b.ZONES[1], SPOT)])
    cases = {
        "pod prefers on-demand": spot_snapshot([b.running_pod("a", "s1", cpu="1500m", **prefers_od)]),
        "pool is on-demand only": spot_snapshot([b.running_pod("a", "s1")], pools=[on_demand_only]),
        "an offering lacks spot": spot_snapshot([b.running_pod("a", "s1")], types=[SMALL, no_spot_in_zone]),
    }
    for case, snap in cases.items():
        s1 = next(c for c in graceful(snap) if c.name == "s1")
        assert consolidation._stop_when(snap, [s1.reschedulable], True) == StopWhen(1), case


def test_spot_nodes_whose_pods_prefer_on_demand_still_move_to_a_cheaper_on_demand_node() -> None:
    big = b.instance_type("big", cpu="8", memory="8Gi", offerings=[Offering(z, SPOT, 1.0) for z in b.ZONES])
    big = b.instance_type(
        "big", cpu="8", memory="8Gi", offerings=[*big.offerings, *(Offering(z, OD, 1.6) for z in b.ZONES)]
    )
    prefers_od = [(1, [(wk.CAPACITY_TYPE, "In", [OD])])]
    managed = [b.managed_node(n, instance_type=big, capacity_type=SPOT) for n in ("s1", "s2")]
    pods = [b.running_pod(f"p-{n}", n, cpu="500m", preferred_terms=prefers_od) for n in ("s1", "s2")]
    snap = b.managed_snapshot(
        pools=[b.disruption_pool()], types=[SMALL, big], managed=managed, pods=pods, now=NOW
    )
    chosen = graceful(snap)
    command, _ = consolidation.compute(snap, chosen, method="test")
    assert command is not None and command.decision == "replace"
    [replacement] = command.replacements
    assert [it.name for it in replacement.instance_types] == ["small", "big"]  # on-demand, under 2.0/h
    with full_solves():
        assert consolidation.compute(snap, chosen, method="test") == (command, "")


def test_one_spot_node_moves_to_a_cheaper_on_demand_node_without_the_spot_to_spot_rule() -> None:
    """The 15-cheaper-types rule is spot-to-spot's only: a replacement that cannot be spot skips it."""
    big = b.instance_type(
        "big",
        cpu="8",
        memory="8Gi",
        offerings=[*(Offering(z, SPOT, 1.0) for z in b.ZONES), *(Offering(z, OD, 1.6) for z in b.ZONES)],
    )
    prefers_od = [(1, [(wk.CAPACITY_TYPE, "In", [OD])])]
    managed = [b.managed_node("s1", instance_type=big, capacity_type=SPOT)]
    pods = [b.running_pod("p", "s1", cpu="500m", preferred_terms=prefers_od)]
    snap = b.managed_snapshot(
        pools=[b.disruption_pool()], types=[SMALL, big], managed=managed, pods=pods, now=NOW
    )
    command, why = consolidation.compute(snap, graceful(snap), method="test")
    assert command is not None and command.decision == "replace", why
    [replacement] = command.replacements
    assert [it.name for it in replacement.instance_types] == ["small"]
    assert replacement.requirements.get(wk.CAPACITY_TYPE).values == {OD}
    with full_solves():
        assert consolidation.compute(snap, graceful(snap), method="test") == (command, "")


def test_min_values_turn_the_stop_off() -> None:
    family = Requirement(wk.INSTANCE_TYPE, False, frozenset({"small", "large"}), min_values=2)
    snap = spot_snapshot([b.running_pod("a", "s1")], pools=[b.disruption_pool(requirements=[family])])
    s1 = next(c for c in graceful(snap) if c.name == "s1")
    assert consolidation._stop_when(snap, [s1.reschedulable], True) is None


def test_two_new_nodes_stop_the_solve_and_say_so() -> None:
    web = {"app": "web"}
    anti = [b.anti_affinity_term(web)]
    managed = [b.managed_node(n, instance_type=SMALL) for n in ("n1", "n2")]
    pods = [b.running_pod(f"web-{n}", n, cpu="1", labels=web, anti_affinity=anti) for n in ("n1", "n2")]
    snap = b.managed_snapshot(
        pools=[b.disruption_pool()], types=[SMALL, LARGE], managed=managed, pods=pods, now=NOW
    )
    chosen = graceful(snap)
    assert consolidation.compute(snap, chosen, method="test") == (None, "would need more than one new node")
    with full_solves():
        assert consolidation.compute(snap, chosen, method="test") == (None, "would need 2 new nodes")


# -- properties: the same decisions with and without the stop ------------------------------------------

STOP_SETTINGS = settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def clusters(draw: st.DrawFn) -> Snapshot:
    types = []
    for name, cpu, price in (("t2", "2", 0.2), ("t4", "4", 0.4), ("t8", "8", 0.8), ("t16", "16", 1.6)):
        offerings = [
            Offering(zone, ct, price * draw(st.sampled_from([0.4, 0.9] if ct == SPOT else [0.5, 1.0, 2.0])))
            for zone in b.ZONES[:2]
            for ct in (SPOT, OD)
            if draw(st.integers(0, 5)) > 0
        ]
        if offerings:
            types.append(b.instance_type(name, cpu=cpu, memory=f"{cpu}Gi", offerings=offerings))
    if not types:
        types = [SMALL, LARGE]
    capacity_types = st.sampled_from(
        [[], [(wk.CAPACITY_TYPE, "In", [SPOT, OD])], [(wk.CAPACITY_TYPE, "In", [SPOT])]]
    )
    window = draw(st.sampled_from([0.0, 0.0, 300.0]))  # consolidateAfter: nodes inside it take no moved pod
    pools = [
        b.disruption_pool("main", weight=10, requirements=draw(capacity_types), consolidate_after=window)
    ]
    if draw(st.booleans()):
        od_weight = draw(st.sampled_from([0, 20]))
        tainted = draw(st.booleans())  # a tainted on-demand pool takes no moved pod: the shortcut holds
        pools.append(
            b.disruption_pool(
                "od",
                weight=od_weight,
                requirements=[(wk.CAPACITY_TYPE, "In", [OD])],
                taints=[Taint("tier", "NoSchedule", "batch")] if tainted else [],
            )
        )
    if draw(st.integers(0, 5)) == 0:
        family = Requirement(wk.INSTANCE_TYPE, False, frozenset(it.name for it in types), min_values=2)
        pools[0] = b.disruption_pool("main", weight=10, requirements=[family])
    managed, pods = [], []
    for i in range(draw(st.integers(2, 5))):
        it = draw(st.sampled_from(types))
        managed.append(
            b.managed_node(
                f"n{i}",
                pool=draw(st.sampled_from([p.name for p in pools])),
                instance_type=it,
                zone=b.ZONES[0],
                capacity_type=draw(st.sampled_from([SPOT, SPOT, OD])),
                claim_overrides={"last_pod_event": draw(st.sampled_from([None, NOW - 60, NOW - 600]))},
            )
        )
        free = int(it.allocatable.get("cpu") * 1000)
        for j in range(draw(st.integers(1, 3))):
            milli = draw(st.sampled_from([250, 500, 1000, 1500, 3000]))
            if milli > free:
                break
            free -= milli
            extra: dict[str, Any] = {}
            wanted = draw(st.sampled_from([None, None, None, SPOT, OD]))
            if wanted is not None and draw(st.booleans()):
                extra["preferred_terms"] = [(1, [(wk.CAPACITY_TYPE, "In", [wanted])])]
            elif wanted is not None:
                extra["node_selector"] = {wk.CAPACITY_TYPE: wanted}
            pods.append(
                b.running_pod(f"n{i}-p{j}", f"n{i}", cpu=f"{milli}m", memory="128Mi", started=NOW, **extra)
            )
    spot_to_spot = draw(st.integers(0, 3)) == 0
    return b.managed_snapshot(
        pools=pools,
        types=types,
        managed=managed,
        pods=pods,
        now=NOW,
        settings=settings_mod.Settings(
            features=settings_mod.FeatureGates(spot_to_spot_consolidation=spot_to_spot)
        ),
    )


@STOP_SETTINGS
@given(clusters())
def test_passes_decide_the_same_with_and_without_the_stop(snap: Snapshot) -> None:
    stopped = compute(snap, NOW)
    with full_solves():
        full = compute(snap, NOW)
    assert stopped.command == full.command
    assert {n: r.verdict for n, r in stopped.records.items()} == {
        n: r.verdict for n, r in full.records.items()
    }


@STOP_SETTINGS
@given(clusters())
def test_every_single_node_option_is_the_same_with_and_without_the_stop(snap: Snapshot) -> None:
    for candidate in graceful(snap):
        stopped, why = consolidation.compute(snap, [candidate], method="test")
        with full_solves():
            full, full_why = consolidation.compute(snap, [candidate], method="test")
        assert stopped == full
        if why != full_why:  # a stopped solve gives its own reason; otherwise the reasons are equal
            assert why in ("would need more than one new node", STOPPED_AT_SPOT) or why.startswith(NOWHERE), (
                why
            )


# -- the shortcut of karpy.core.disruption.room on clusters built for it -------------------------------


def shortcut_cluster(rng: random.Random) -> Snapshot:
    """Spot nodes, some full, some inside their consolidateAfter window, some not initialized;
    NodePools that allow spot everywhere, beside an on-demand one that is tainted or not (the
    shortcut must hold off then)."""
    types = [
        b.instance_type(
            name,
            cpu=cpu,
            memory=f"{cpu}Gi",
            offerings=[
                Offering(zone, ct, price * (rng.choice([0.3, 0.5]) if ct == SPOT else 1.0))
                for zone in b.ZONES[:2]
                for ct in (SPOT, OD)
            ],
        )
        for name, cpu, price in (("t2", "2", 0.2), ("t4", "4", 0.4), ("t8", "8", 0.8))
    ]
    window = rng.choice([0.0, 300.0])
    pools = [b.disruption_pool("main", weight=10, consolidate_after=window)]
    if rng.random() < 0.5:
        taints = [Taint("tier", "NoSchedule", "batch")] if rng.random() < 0.6 else []
        pools.append(
            b.disruption_pool(
                "od", weight=rng.choice([0, 20]), requirements=[(wk.CAPACITY_TYPE, "In", [OD])], taints=taints
            )
        )
    tolerate = [Toleration("tier", "Equal", "batch", "NoSchedule")] if rng.random() < 0.2 else []
    managed, pods = [], []
    for i in range(rng.randint(2, 5)):
        it = rng.choice(types)
        managed.append(
            b.managed_node(
                f"n{i}",
                pool="main",
                instance_type=it,
                zone=rng.choice(b.ZONES[:2]),
                capacity_type=rng.choice([SPOT, SPOT, SPOT, OD]),
                initialized=rng.random() < 0.8,
                claim_overrides={"last_pod_event": rng.choice([None, NOW - 60, NOW - 600])},
            )
        )
        free = int(it.allocatable.get("cpu") * 1000) - 200
        for j in range(rng.randint(1, 4)):
            milli = rng.choice([250, 500, 1000, 1500, 3000])
            if milli > free:
                break
            free -= milli
            pods.append(
                b.running_pod(
                    f"n{i}-p{j}", f"n{i}", cpu=f"{milli}m", memory="128Mi", started=NOW, tolerations=tolerate
                )
            )
    return b.managed_snapshot(pools=pools, types=types, managed=managed, pods=pods, now=NOW)


def shortcut_against_full_solves(
    monkeypatch: Any, clusters: Callable[[random.Random], Snapshot], seed: int, count: int
) -> list[room.Nowhere | room.Crowded | None]:
    """Every single-node option and every pass of ``count`` random clusters, with the shortcut
    and with full solves: the same answers. Returns what the shortcut said each time."""
    fired: list[room.Nowhere | room.Crowded | None] = []
    monkeypatch.setattr(room, "OBSERVED", fired)
    rng = random.Random(seed)
    for _ in range(count):
        snap = clusters(rng)
        for candidate in graceful(snap):
            quick, why = consolidation.compute(snap, [candidate], method="test")
            with full_solves():
                full, _ = consolidation.compute(snap, [candidate], method="test")
            assert quick == full, why
        decided = compute(snap, NOW)
        with full_solves():
            assert compute(snap, NOW).command == decided.command
    return fired


def test_the_shortcut_decides_what_the_full_solve_decides(monkeypatch: Any) -> None:
    fired = shortcut_against_full_solves(monkeypatch, shortcut_cluster, 7, 150)
    kinds = Counter(type(found).__name__ for found in fired)
    unready = sum(1 for found in fired if found is not None and found.unready)
    assert kinds["Nowhere"] >= 40 and kinds["Crowded"] >= 10 and kinds["NoneType"] >= 40, kinds
    assert unready >= 10, unready


def crowded_cluster(rng: random.Random) -> Snapshot:
    """Spot nodes of 1 to 2 allocatable CPUs; the candidates' pods are of a few sizes, so they
    often fit one by one but not all together (``room.Crowded``)."""
    types = [b.instance_type("t4", cpu="4", memory="16Gi", offerings=[Offering(b.ZONES[0], SPOT, 0.2)])]
    managed, pods = [], []
    for i in range(rng.randint(2, 6)):
        free = rng.choice([1000, 1500, 2000])
        managed.append(
            b.managed_node(
                f"n{i}",
                pool="default",
                instance_type="t4",
                capacity_type=SPOT,
                initialized=rng.random() < 0.9,
                allocatable={"cpu": f"{free}m", "memory": "8Gi", "pods": "110"},
            )
        )
        for j in range(rng.randint(1, 3)):
            milli = rng.choice([300, 500, 700])
            if milli > free:
                break
            free -= milli
            memory = rng.choice(["512Mi", "2Gi", "3Gi"])
            pods.append(b.running_pod(f"n{i}-p{j}", f"n{i}", cpu=f"{milli}m", memory=memory, started=NOW))
    return b.managed_snapshot(pools=[b.disruption_pool()], types=types, managed=managed, pods=pods, now=NOW)


def test_the_count_of_slots_decides_what_the_full_solve_decides(monkeypatch: Any) -> None:
    fired = shortcut_against_full_solves(monkeypatch, crowded_cluster, 11, 200)
    kinds = Counter(type(found).__name__ for found in fired)
    assert kinds["Crowded"] >= 40 and kinds["NoneType"] >= 40, kinds


# -- the room matrix against a node-by-node count -------------------------------------------------------

_HARD_TAINT = Taint("dedicated", "NoSchedule", "db")
_TOLERATE = (Toleration(key="dedicated", operator="Equal", value="db", effect="NoSchedule"),)
_amounts = st.sampled_from([0, 1, 250, 500, 999, 1000, 1001, 2000])


@st.composite
def open_nodes(draw: st.DrawFn) -> list[tuple[str, Any]]:
    nodes = []
    for i in range(draw(st.integers(0, 8))):
        available = {"cpu": draw(_amounts), "memory": draw(_amounts), "pods": draw(st.integers(0, 3))}
        if draw(st.booleans()):
            available["example.com/gpu"] = draw(st.integers(0, 2))
        used = {"cpu": draw(_amounts), "memory": draw(_amounts), "pods": draw(st.integers(0, 3))}
        taints = (_HARD_TAINT,) if draw(st.booleans()) else ()
        base = SimpleNamespace(available=Resources(available), requests=Resources(used), taints=taints)
        nodes.append((f"n{i % 2}", base))  # a name may repeat
    return nodes


@settings(max_examples=300, deadline=None)
@given(open_nodes(), _amounts, _amounts, st.integers(0, 2), st.booleans())
def test_room_and_slots_equal_a_node_by_node_count(
    nodes: list[tuple[str, Any]], cpu: int, memory: int, gpus: int, tolerant: bool
) -> None:
    asked = {"cpu": cpu, "memory": memory}
    if gpus:
        asked["example.com/gpu"] = gpus
    tolerations = _TOLERATE if tolerant else ()
    pod = b.pod("p", tolerations=list(tolerations), requests=Resources(asked))
    need = pod_requests(pod)  # what with_room asks for: the requests and the pod's slot
    refused = [bool(base.taints) and not tolerant for _, base in nodes]
    passroom = room._PassRoom(nodes, frozenset(), frozenset(), frozenset(n for n, _ in nodes), ())
    expected_fit = {
        name
        for (name, base), no in zip(nodes, refused, strict=True)
        if not no and base.requests.fits_with(need, base.available)
    }
    assert passroom.with_room(pod) == expected_fit
    positive = [(k, v) for k, v in need.items() if v > 0]
    expected_slots: Counter[str] = Counter()
    for (name, base), no in zip(nodes, refused, strict=True):
        free = room._free(base)
        if no or free is None:
            continue
        count = min(free.get(k, 0) // v for k, v in positive)
        if count > 0:
            expected_slots[name] += count
    slots = passroom.slots_for(need, tolerations)
    assert slots == (sum(expected_slots.values()), dict(expected_slots))


def test_pods_asking_the_same_share_one_kind_and_the_kind_tables_may_be_cleared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    free = SimpleNamespace(
        available=Resources({"cpu": 1000, "memory": 1000, "pods": 3}), requests=Resources({})
    )
    nodes: list[tuple[str, Any]] = [("n0", SimpleNamespace(**vars(free), taints=()))]
    nodes.append(("n1", SimpleNamespace(**vars(free), taints=(_HARD_TAINT,))))
    passroom = room._PassRoom(nodes, frozenset(), frozenset(), frozenset({"n0", "n1"}), ())
    half = b.pod("a", requests=Resources({"cpu": 500}))
    same = b.pod("b", requests=Resources({"cpu": 500}))
    tolerant = b.pod("t", requests=Resources({"cpu": 500}), tolerations=list(_TOLERATE))
    big = b.pod("c", requests=Resources({"cpu": 2000}))
    kind = room._kind(half)
    assert room._kind(same) is kind
    assert room._kind(tolerant) is not kind and room._kind(big) is not kind
    assert passroom.with_room(same) == {"n0"}
    assert passroom.with_room(tolerant) == {"n0", "n1"}
    assert passroom.with_room(big) == frozenset()
    monkeypatch.setattr(room, "MAX_KINDS", 1)
    room._bound_kinds()
    assert room._kind(half) is not kind  # interned anew
    assert passroom.with_room(half) == {"n0"}
    assert passroom.with_room(tolerant) == {"n0", "n1"}
    assert passroom.with_room(big) == frozenset()
