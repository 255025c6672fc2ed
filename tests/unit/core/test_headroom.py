"""Headroom (``karpy.sh/headroom``): the annotation, its window, the virtual pods and what nodes hold.

Also the disruption pass's side (``karpy.core.disruption.headroom_guard``): empty nodes holding the
headroom stay, a delete that would leave too little room is refused, and ``karpy explain node``
names the reason class ``headroom``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

import builders as b
from karpy.core import headroom
from karpy.core.disruption import EMPTY, compute, consolidation, headroom_guard, horizon
from karpy.core.disruption import candidates as cand
from karpy.core.disruption.memo import Memo
from karpy.core.disruption.methods import Pass
from karpy.core.explain.node import explain_node
from karpy.core.scheduling import solve
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.resources import Resources
from karpy.model.taints import NO_SCHEDULE, Taint

MONDAY = datetime(2026, 3, 2, tzinfo=UTC).timestamp()  # a Monday, 00:00 UTC
H = 3600.0
WINDOW = {"schedule": "0 7 * * 1-5", "duration": "3h"}
BIG = b.instance_type("big", cpu="32", memory="64Gi", pods="110")
SMALL = b.instance_type("small", cpu="4", memory="8Gi", pods="110")
TYPES = [SMALL, BIG]


def annotated(value: dict[str, Any] | str, name: str = "default", **overrides: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value)
    return b.disruption_pool(name, meta_annotations={headroom.ANNOTATION: text}, **overrides)


# -- the annotation ------------------------------------------------------------------------------


def test_the_documented_example_parses() -> None:
    spec = headroom.parse(
        '{"cpu": "8", "memory": "16Gi", "perZone": true, "schedule": "0 7 * * 1-5", "duration": "3h"}'
    )
    assert spec.resources == Resources.parse({"cpu": "8", "memory": "16Gi"})
    assert (spec.per_zone, spec.schedule, spec.duration) == (True, "0 7 * * 1-5", 3 * H)


def test_without_a_schedule_the_headroom_is_whole_pool_and_always_on() -> None:
    spec = headroom.parse('{"cpu": 2, "nvidia.com/gpu": "1"}')
    assert spec.resources == Resources({"cpu": 2000, "nvidia.com/gpu": 1})
    assert (spec.per_zone, spec.window) == (False, None)
    assert headroom.is_open(spec, MONDAY) and headroom.is_open(spec, MONDAY + 5 * 24 * H)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("cpu: 8", "not JSON"),
        ('["cpu", "8"]', "JSON object"),
        ('{"cpu": "8", "perZone": "yes"}', "perZone must be true or false"),
        ('{"cpu": "8", "schedule": "0 7 * * *"}', "schedule and duration must be set together"),
        ('{"cpu": "8", "duration": "3h"}', "schedule and duration must be set together"),
        ('{"cpu": "8", "schedule": "0 7 * *", "duration": "3h"}', "not a 5-field cron"),
        ('{"cpu": "8", "schedule": "0 7 * * *", "duration": "three hours"}', "is not a duration"),
        ('{"cpu": "8", "schedule": "0 7 * * *", "duration": "0m"}', "above zero"),
        ('{"cpu": "-1"}', "negative"),
        ('{"cpu": true}', "not a quantity"),
        ('{"cpu": {"value": 8}}', "not a quantity"),
        ('{"cpu": "eight"}', "not a quantity"),
        ('{"perZone": true}', "asks for no resource"),
        ('{"cpu": "0"}', "asks for no resource"),
    ],
)
def test_a_bad_value_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(headroom.HeadroomError, match=says):
        headroom.parse(text)
    pool = annotated(text)
    assert headroom.spec_of(pool) is None
    assert says in (headroom.problem(pool) or "")


def test_absent_annotation_and_static_pools_keep_no_headroom() -> None:
    assert headroom.spec_of(b.disruption_pool()) is None
    assert headroom.problem(b.disruption_pool()) is None
    assert headroom.spec_of(annotated({"cpu": "1"}, replicas=3)) is None
    assert headroom.spec_of(annotated({"cpu": "1"})) is not None


# -- the window ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hours", "open_"),
    [(6.99, False), (7.0, True), (9.99, True), (10.0, False), (24 + 8, True), (5 * 24 + 8, False)],
)
def test_the_window_follows_the_cron_schedule_like_a_budget(hours: float, open_: bool) -> None:
    spec = headroom.parse(json.dumps({"cpu": "1", **WINDOW}))
    assert headroom.is_open(spec, MONDAY + hours * H) is open_  # day 5 is Saturday
    pools = [annotated({"cpu": "1", **WINDOW})]
    assert headroom.open_pools(pools, MONDAY + hours * H) == (("default",) if open_ else ())


def test_the_next_edge_is_the_next_opening_or_closing() -> None:
    pools = [annotated({"cpu": "1", **WINDOW}), annotated({"cpu": "1"}, "always"), b.disruption_pool("plain")]
    assert headroom.next_edge(pools, MONDAY + 6 * H) == MONDAY + 7 * H
    assert headroom.next_edge(pools, MONDAY + 8 * H) == MONDAY + 10 * H
    assert headroom.next_edge(pools[1:], MONDAY) == float("inf")


def test_the_disruption_horizon_includes_the_window_edges() -> None:
    snap = b.managed_snapshot(pools=[annotated({"cpu": "1", **WINDOW})], types=TYPES, now=MONDAY + 6 * H)
    assert horizon.next_change(snap, MONDAY + 6 * H) == MONDAY + 7 * H


# -- the virtual pods ------------------------------------------------------------------------------


def test_pieces_are_equal_small_parts_of_the_largest_type_and_cover_the_ask() -> None:
    pool = annotated({"cpu": "8", "memory": "16Gi"})
    (need,) = headroom.needs([pool], {"default": TYPES}, MONDAY)
    assert need.zone == "" and need.asked == Resources.parse({"cpu": "8", "memory": "16Gi"})
    # a sixteenth of the big type: 2 cpu and 4Gi, so 4 pieces of 2 cpu, 4Gi
    assert len(need.pods) == 4 and need.piece == Resources.parse({"cpu": "2", "memory": "4Gi"})
    assert all(p.requests == need.piece for p in need.pods)
    odd = annotated({"cpu": "5"})
    (need,) = headroom.needs([odd], {"default": TYPES}, MONDAY)
    assert len(need.pods) == 3 and need.piece == Resources({"cpu": 1667})  # rounded up: 5001m in all


def test_virtual_pods_select_their_pool_and_zone_and_tolerate_its_taints() -> None:
    taint = Taint("tier", NO_SCHEDULE, "batch")
    pool = annotated(
        {"cpu": "2", "perZone": True},
        taints=[taint],
        requirements=[(wk.ZONE, "In", ["test-zone-1", "test-zone-2"])],
    )
    found = headroom.needs([pool], {"default": TYPES}, MONDAY)
    assert [n.zone for n in found] == ["test-zone-1", "test-zone-2"]
    pod = found[1].pods[0]
    assert headroom.is_virtual(pod) and pod.namespace == headroom.NAMESPACE
    assert pod.node_selector == {wk.NODEPOOL: "default", wk.ZONE: "test-zone-2"}
    assert pod.labels == {headroom.POD_LABEL: "default"}
    assert [(t.key, t.operator, t.effect) for t in pod.tolerations] == [("tier", "Exists", NO_SCHEDULE)]
    assert not any(headroom.is_virtual(p) for p in [b.pod("real")])


def test_closed_windows_ask_nothing_and_open_ones_reuse_the_same_pods() -> None:
    pool = annotated({"cpu": "2", **WINDOW})
    assert headroom.needs([pool], {"default": TYPES}, MONDAY + 12 * H) == ()
    first = headroom.needs([pool], {"default": TYPES}, MONDAY + 8 * H)
    again = headroom.needs([pool], {"default": TYPES}, MONDAY + 9 * H)
    assert first[0].pods[0] is again[0].pods[0]


def test_the_scheduler_places_virtual_pods_on_room_then_on_new_claims() -> None:
    pool = annotated({"cpu": "8", "memory": "16Gi"})
    small = b.managed_node("n1", instance_type=SMALL)
    snap = b.managed_snapshot(pools=[pool], types=TYPES, managed=[small], now=MONDAY)
    pods = headroom.virtual_pods(headroom.needs(snap.node_pools, snap.instance_types, MONDAY))
    results = solve(snap, pods)
    assert sorted(results.existing.values()).count("n1") == 2  # two 2-cpu pieces fit on the 4-cpu node
    assert len(results.new_claims) == 1 and len(results.new_claims[0].pods) == 2
    assert not results.errors


# -- what nodes hold -------------------------------------------------------------------------------


def _need(value: dict[str, Any]) -> headroom.Need:
    return headroom.needs([annotated(value)], {"default": TYPES}, MONDAY)[0]


def test_held_counts_whole_pieces_in_a_nodes_free_room() -> None:
    need = _need({"cpu": "8", "memory": "16Gi"})  # 4 pieces of 2 cpu, 4Gi
    n, c = b.managed_node("n1", instance_type=BIG)
    used = [b.running_pod("p", "n1", cpu="25", memory="10Gi")]
    snap = b.managed_snapshot(pools=[annotated({"cpu": "8"})], types=TYPES, managed=[(n, c)], pods=used)
    (state,) = snap.nodes
    assert headroom.held(state, need) == 3  # 7 cpu left
    assert headroom.free(snap.nodes, need) == Resources.parse({"cpu": "7", "memory": "54Gi"})
    tainted = b.replace(state, node=b.replace(n, taints=(Taint("x", NO_SCHEDULE),)))
    assert headroom.held(tainted, need) == 0


def test_members_are_the_pools_initialized_nodes_in_the_zone() -> None:
    need = headroom.needs([annotated({"cpu": "1", "perZone": True})], {"default": TYPES}, MONDAY)[0]
    managed = [
        b.managed_node("in-zone", zone=need.zone),
        b.managed_node("other-zone", zone="test-zone-2"),
        b.managed_node("launching", zone=need.zone, initialized=False),
        b.managed_node("other-pool", zone=need.zone, pool="other"),
        b.managed_node("leaving", zone=need.zone),
    ]
    snap = b.managed_snapshot(
        pools=[annotated({"cpu": "1"})], types=TYPES, managed=managed, marked_for_deletion=["leaving"]
    )
    assert [n.name for n in headroom.members(snap.nodes, need)] == ["in-zone"]


# -- the disruption pass ---------------------------------------------------------------------------


def _node(name: str, **kwargs: Any) -> Any:
    """A managed node created on Monday at midnight (not expired at the pass's time)."""
    return b.managed_node(name, created=MONDAY, **kwargs)


def _pass_snapshot(pool: Any, managed: list[Any], pods: list[Any] | None = None) -> Snapshot:
    return b.managed_snapshot(pools=[pool], types=TYPES, managed=managed, pods=pods or [], now=MONDAY + 8 * H)


def test_empty_nodes_holding_the_headroom_stay_and_say_why() -> None:
    pool = annotated({"cpu": "6", **WINDOW})  # 3 pieces of 2 cpu: two fit on one small node
    managed = [_node(f"n{i}", instance_type=SMALL) for i in range(1, 4)]
    decision = compute(_pass_snapshot(pool, managed))
    assert decision.command is not None and decision.command.reason == EMPTY
    assert decision.command.candidates == ("n3",)  # n1 and n2 hold the 3 pieces
    for name in ("n1", "n2"):
        record = decision.records[name]
        assert record.verdict == "blocked" and record.reasons[-1].startswith("headroom: holds ")
    closed = compute(b.replace(_pass_snapshot(pool, managed), now=MONDAY + 12 * H))
    assert closed.command is not None and closed.command.candidates == ("n1", "n2", "n3")


def test_nodes_that_stay_hold_the_headroom_first() -> None:
    pool = annotated({"cpu": "4"})  # 2 pieces: the busy node's room holds both
    managed = [_node("busy", instance_type=BIG), _node("empty", instance_type=SMALL)]
    pods = [b.running_pod("p", "busy", cpu="4", memory="1Gi")]
    snap = _pass_snapshot(pool, managed, pods)
    classes = Pass(snap, snap.now, Memo()).candidates()
    assert {c.name for c in classes.graceful} == {"busy", "empty"}


def test_without_the_annotation_the_guard_returns_the_very_same_candidates() -> None:
    managed = [_node("n1", instance_type=SMALL)]
    snap = _pass_snapshot(b.disruption_pool(), managed)
    graceful = cand.build_classes(
        snap.nodes,
        pools={"default": snap.node_pools[0]},
        instance_types={"default": {it.name: it for it in TYPES}},
        limits=Memo().limits(snap.pdbs, snap.pods),
        now=snap.now,
    ).graceful
    again = headroom_guard.keep(snap.nodes, graceful, {}, {"default": snap.node_pools[0]}, {}, snap.now)
    assert again is graceful
    assert headroom_guard.pods(snap) == [] and headroom_guard.key(snap) == ""


def test_consolidation_keeps_the_room_of_the_pieces() -> None:
    # two small nodes, 2 cpu used on each: either one's pods fit on the other, but then no piece does
    pool = annotated({"cpu": "4", **WINDOW})  # 2 pieces of 2 cpu
    managed = [_node(f"n{i}", instance_type=SMALL) for i in (1, 2)]
    pods = [b.running_pod(f"p{i}", f"n{i}", cpu="1500m", memory="1Gi") for i in (1, 2)]
    snap = _pass_snapshot(pool, managed, pods)
    decision = compute(snap)
    assert decision.command is None or decision.command.decision == "replace"
    for name in ("n1", "n2"):
        assert any("headroom:" in reason for reason in decision.records[name].reasons)
    closed = compute(b.replace(snap, now=MONDAY + 12 * H))
    assert closed.command is not None and closed.command.decision == "delete"


def test_a_delete_is_refused_when_moved_pods_would_take_the_emptiest_room() -> None:
    # the simulation fits the moved pods into the fragments and the pieces into the empty node, but
    # kube-scheduler's default scoring sends moved pods to the emptiest node
    pool = annotated({"cpu": "4", **WINDOW})  # 2 pieces of 2 cpu
    managed = [_node(n, instance_type=SMALL) for n in ("a-frag", "b-frag", "c-empty", "d-gone")]
    pods = [b.running_pod(f"f{i}", n, cpu="2500m", memory="1Gi") for i, n in enumerate(("a-frag", "b-frag"))]
    pods += [b.running_pod(f"g{i}", "d-gone", cpu="1", memory="1Gi") for i in range(2)]
    snap = _pass_snapshot(pool, managed, pods)
    chosen = [c for c in Pass(snap, snap.now, Memo()).candidates().graceful if c.name == "d-gone"]
    command, reason = consolidation.compute(
        snap, chosen, all_candidates=chosen, method="single-node consolidation"
    )
    assert command is None
    assert reason.startswith("headroom: NodePool default keeps 2 pieces") and "would hold 1" in reason
    closed = b.replace(snap, now=MONDAY + 12 * H)
    command, _ = consolidation.compute(
        closed, chosen, all_candidates=chosen, method="single-node consolidation"
    )
    assert command is not None and command.decision == "delete"


def test_explain_node_names_the_headroom_reason_class() -> None:
    pool = annotated({"cpu": "6", **WINDOW})
    managed = [_node(f"n{i}", instance_type=SMALL) for i in range(1, 4)]
    found = explain_node(_pass_snapshot(pool, managed), "n1")
    assert found.verdict == "blocked" and found.reason == "headroom"
    assert "headroom" in found.blockers
    assert any(r.startswith("headroom: holds 2 of the 3 pieces") for r in found.pass_reasons)
