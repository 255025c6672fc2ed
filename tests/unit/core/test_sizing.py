"""DaemonSet-aware sizing (``karpy.sh/sizing: usable-price``): the ranking and what solve makes of it.

The catalog is linear (0.1 $/h per vCPU and per GiB) and one DaemonSet takes 1 vCPU and 1 GiB
of every node: half the CPU of the 2-vCPU type, a quarter of the 4-vCPU one's.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import builders as b
from karpy.api import load as api_load
from karpy.core.scheduling import launch, sizing, solve
from karpy.core.scheduling.daemons import DaemonOverhead
from karpy.core.scheduling.results import PlannedClaim
from karpy.core.scheduling.typeindex import TypeIndex
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType, Offering
from karpy.model.objects import SIZING_ANNOTATION, SIZING_USABLE_PRICE, DaemonSet, NodePool, Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources

C2 = b.instance_type("c2", cpu="2", memory="4Gi", pods="110")  # 0.60 $/h
C4 = b.instance_type("c4", cpu="4", memory="8Gi", pods="110")  # 1.20 $/h
C8 = b.instance_type("c8", cpu="8", memory="16Gi", pods="110")  # 2.40 $/h
C16 = b.instance_type("c16", cpu="16", memory="32Gi", pods="110")  # 4.80 $/h
TYPES = [C2, C4, C8, C16]
DAEMON = b.daemonset("agent", cpu="1", memory="1Gi")
SIZED = {SIZING_ANNOTATION: SIZING_USABLE_PRICE}
NO_REQS = Requirements(())


def _pool(annotations: dict[str, str] | None = None, requirements: Sequence[Requirement] = ()) -> NodePool:
    return b.node_pool(meta_annotations=dict(annotations or {}), requirements=requirements)


def _pods(count: int, cpu: str = "500m", memory: str = "512Mi") -> list[Pod]:
    return [b.pod(f"p{i}", cpu=cpu, memory=memory) for i in range(count)]


def _claims(
    pool: NodePool, pods: Sequence[Pod], types: Sequence[InstanceType] = TYPES, daemon: bool = True
) -> tuple[PlannedClaim, ...]:
    snap = b.snapshot(pools=[pool], types=types, pods=pods, daemonsets=[DAEMON] if daemon else [])
    results = solve(snap)
    assert results.errors == ()
    return results.new_claims


def _launched(claim: PlannedClaim) -> str:
    chosen = launch(claim)
    assert chosen is not None
    return chosen.instance_type.name


def _index(types: Sequence[InstanceType]) -> TypeIndex:
    """The index of a template whose DaemonSets take 1 vCPU, 1 GiB and a pod slot of every type."""
    daemon = DaemonOverhead(Resources.parse({"cpu": "1", "memory": "1Gi", "pods": "1"}))
    return TypeIndex(types, {it.name: daemon for it in types})


def _demand(cpu: str, memory: str, pods: int) -> Resources:
    return Resources.parse({"cpu": cpu, "memory": memory, "pods": str(pods)})


# -- the opt-in ----------------------------------------------------------------------------------


def test_the_pool_opts_in_with_the_annotation_only() -> None:
    assert sizing.enabled(_pool(SIZED))
    assert not sizing.enabled(_pool())
    assert not sizing.enabled(_pool({SIZING_ANNOTATION: "biggest"}))
    assert _pool({SIZING_ANNOTATION: "biggest"}).sizing() == ""


def test_without_the_annotation_the_claim_launches_the_cheapest_fitting_type() -> None:
    [claim] = _claims(_pool(), _pods(2))
    assert [it.name for it in claim.instance_types] == ["c2", "c4", "c8", "c16"]
    assert _launched(claim) == "c2"


def test_an_unknown_value_is_warned_about_once_and_means_the_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: sizing-typo, annotations: {karpy.sh/sizing: usable_price}}
spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}
"""
    with caplog.at_level(logging.WARNING, logger="karpy.api"):
        first = api_load.load_text(text)
        second = api_load.load_text(text)
    assert [p.sizing() for p in first.node_pools + second.node_pools] == ["", ""]
    warned = [r.getMessage() for r in caplog.records if "karpy.sh/sizing" in r.getMessage()]
    assert warned == [
        "NodePool sizing-typo: karpy.sh/sizing 'usable_price' is unknown (known: usable-price);"
        " the pool keeps the default sizing"
    ]


def test_an_unknown_value_keeps_the_default_order() -> None:
    default = _claims(_pool(), _pods(2))
    unknown = _claims(_pool({SIZING_ANNOTATION: "largest"}), _pods(2))
    assert unknown == default


# -- ranking by price per usable resource --------------------------------------------------------


def test_units_count_the_claims_worth_of_usable_room_at_the_bottleneck() -> None:
    index = _index(TYPES)
    got = sizing.units(index, index.all, _demand("1", "1Gi", 2))
    # usable CPU 1, 3, 7, 15 vCPU (the bottleneck); memory 3, 7, 15, 31 GiB; 109 pod slots
    assert got is not None and got.tolist() == [1.0, 3.0, 7.0, 15.0]
    few_slots = _index([b.instance_type("c8", cpu="8", memory="16Gi", pods="6")])
    got = sizing.units(few_slots, few_slots.all, _demand("1", "1Gi", 2))
    assert got is not None and got.tolist() == [2.5]  # 5 pod slots left: two claims and a half


def test_two_pods_launch_the_four_vcpu_type_best_price_per_usable_cpu() -> None:
    # c2 keeps 1 vCPU for pods at 0.60 $/h (0.60 per claim's worth), c4 keeps 3 at 1.20 (0.40)
    [claim] = _claims(_pool(SIZED), _pods(2))
    assert [it.name for it in claim.instance_types] == ["c4", "c8", "c16"]
    assert _launched(claim) == "c4"
    requirement = claim.requirements.get(wk.INSTANCE_TYPE)
    assert requirement is not None and requirement.values == {"c4", "c8", "c16"}


def test_the_pods_of_each_claim_are_the_same_with_and_without_the_annotation() -> None:
    pods = _pods(7, cpu="700m", memory="1Gi")
    default = _claims(_pool(), pods)
    sized = _claims(_pool(SIZED), pods)
    assert [[p.name for p in c.pods] for c in sized] == [[p.name for p in c.pods] for c in default]


def test_memory_heavy_pods_are_ranked_by_usable_memory_cpu_heavy_ones_by_usable_cpu() -> None:
    m2 = b.instance_type("m2", cpu="2", memory="4Gi", price=0.5)  # 1 vCPU, 3 GiB usable
    m4 = b.instance_type("m4", cpu="2", memory="8Gi", price=0.8)  # 1 vCPU, 7 GiB usable
    # a 2.5 GiB pod: m2 keeps 1.2 of them (0.42 $ each), m4 2.8 (0.29 $ each)
    [claim] = _claims(_pool(SIZED), [b.pod("mem", cpu="100m", memory="2560Mi")], types=[m2, m4])
    assert _launched(claim) == "m4"
    # a 900m pod: both keep 1.1 of them, m2 is cheaper per pod
    [claim] = _claims(_pool(SIZED), [b.pod("cpu", cpu="900m", memory="100Mi")], types=[m2, m4])
    assert _launched(claim) == "m2"


# -- fill floor, margin, ties --------------------------------------------------------------------


def test_types_the_pods_fill_below_the_floor_do_not_compete() -> None:
    # two pods: c8 (7 claim's worth of usable CPU, 0.34 $ each) beats c4 (3, 0.40 $) per unit,
    # but the pods would fill less than a quarter of it
    index = _index(TYPES)
    demand = _demand("1", "1Gi", 2)
    assert sizing.best_position(index, index.all, NO_REQS, demand) == 1  # c4
    assert sizing.MIN_FILL == 0.25


def test_one_small_pod_stays_on_the_cheapest_type() -> None:
    # c2 keeps two of these pods; c4 would keep six: beyond the fill floor
    [claim] = _claims(_pool(SIZED), _pods(1))
    assert _launched(claim) == "c2"
    assert [it.name for it in claim.instance_types] == ["c2", "c4", "c8", "c16"]


@pytest.mark.parametrize(("price", "position"), [(2.4, 1), (2.6, 1), (2.8, 0), (3.0, 0)])
def test_a_bigger_type_must_be_cheaper_per_usable_resource_by_the_margin(price: float, position: int) -> None:
    small = b.instance_type("small", cpu="2", memory="64Gi", price=1.0)  # 1 usable vCPU: 1.00 a unit
    big = b.instance_type("big", cpu="4", memory="64Gi", price=price)  # 3 usable vCPU
    index = _index([small, big])
    # big wins when price / 3 <= (1 - MARGIN) * 1.00, i.e. price <= 2.70
    assert sizing.MARGIN == 0.10
    assert sizing.best_position(index, index.all, NO_REQS, _demand("1", "1Gi", 1)) == position


def test_equal_scores_go_to_the_cheaper_type() -> None:
    small = b.instance_type("a-small", cpu="2", memory="64Gi", price=1.0)  # 1.00 per unit
    mid = b.instance_type("b-mid", cpu="4", memory="64Gi", price=1.5)  # 3 units: 0.50
    big = b.instance_type("c-big", cpu="5", memory="64Gi", price=2.0)  # 4 units: 0.50, a tie
    index = _index([small, mid, big])
    ordered = index.order_by_price(index.all, NO_REQS)
    assert sizing.best_position(index, ordered, NO_REQS, _demand("1", "1Gi", 1)) == 1


def test_equal_prices_and_scores_go_to_the_first_name() -> None:
    small = b.instance_type("small", cpu="2", memory="64Gi", price=1.0)
    twins = [b.instance_type(name, cpu="4", memory="64Gi", price=1.5) for name in ("z-four", "a-four")]
    index = _index([small, *twins])
    ordered = index.order_by_price(index.all, NO_REQS)
    kept = sizing.sized(index, ordered, NO_REQS, _demand("1", "1Gi", 1))
    assert [index.types[i].name for i in kept] == ["a-four"]  # the other costs the same: not kept


def test_the_sized_options_are_the_best_type_then_only_pricier_ones() -> None:
    index = _index(TYPES)
    ordered = index.order_by_price(index.all, NO_REQS)
    kept = sizing.sized(index, ordered, NO_REQS, _demand("1", "1Gi", 2))
    assert [index.types[i].name for i in kept] == ["c4", "c8", "c16"]


# -- pods requesting nothing, nothing to rank ------------------------------------------------------


def test_a_demand_of_nothing_leaves_the_default_order() -> None:
    index = _index(TYPES)
    ordered = index.order_by_price(index.all, NO_REQS)
    assert sizing.units(index, ordered, Resources()) is None
    assert sizing.best_position(index, ordered, NO_REQS, Resources()) is None
    assert sizing.sized(index, ordered, NO_REQS, Resources()) is ordered


def test_pods_requesting_nothing_but_a_slot_stay_on_the_cheapest_type() -> None:
    pods = [b.pod(f"empty-{i}") for i in range(3)]
    [claim] = _claims(_pool(SIZED), pods)
    assert _launched(claim) == "c2"
    assert claim.instance_types == _claims(_pool(), pods)[0].instance_types


def test_a_single_option_is_left_alone() -> None:
    index = _index([C4])
    assert sizing.sized(index, index.all, NO_REQS, _demand("1", "1Gi", 1)) is index.all


def test_a_resource_no_type_has_means_nothing_fits() -> None:
    index = _index(TYPES)
    got = sizing.units(index, index.all, Resources({"example.com/gpu": 1}))
    assert got is not None and got.tolist() == [0.0, 0.0, 0.0, 0.0]


# -- minValues -----------------------------------------------------------------------------------


def _min_values_pool(count: int) -> NodePool:
    requirement = Requirement.of(wk.INSTANCE_TYPE, "Exists", (), min_values=count)
    return _pool(SIZED, requirements=[requirement])


def test_sized_options_that_meet_min_values_are_kept() -> None:
    [claim] = _claims(_min_values_pool(3), _pods(2))
    assert [it.name for it in claim.instance_types] == ["c4", "c8", "c16"]
    assert _launched(claim) == "c4"


def test_sized_options_that_miss_min_values_fall_back_to_the_default_order() -> None:
    [claim] = _claims(_min_values_pool(4), _pods(2))
    assert [it.name for it in claim.instance_types] == ["c2", "c4", "c8", "c16"]
    assert _launched(claim) == "c2"
    requirement = claim.requirements.get(wk.INSTANCE_TYPE)
    assert requirement is not None and requirement.min_values == 4


# -- the sized claim's requests ------------------------------------------------------------------


def test_the_claim_requests_carry_the_daemonset_overhead_of_the_kept_types() -> None:
    [claim] = _claims(_pool(SIZED), _pods(2))
    assert claim.requests == Resources.parse({"cpu": "2", "memory": "2Gi", "pods": "3"})


# -- what the module promises, on random catalogs ----------------------------------------------------

ZONES = ("zone-a", "zone-b")


@st.composite
def _catalog(draw: st.DrawFn) -> list[InstanceType]:
    """One or two families of a few sizes each, priced about linearly (within 15%), spot at 40%."""
    out = []
    for family in range(draw(st.integers(1, 2))):
        gib_per_cpu = draw(st.sampled_from([1, 2, 4, 8]))
        sizes = draw(st.sampled_from([(2, 4, 8, 16), (1, 2, 4, 8), (2, 4), (4, 8, 16, 32), (1, 4, 16)]))
        for cpu in sizes:
            gib = cpu * gib_per_cpu
            base = (0.04 * cpu + 0.005 * gib) * draw(st.integers(85, 115)) / 100
            offerings = [
                Offering(zone, ct, round(base * (0.4 if ct == "spot" else 1), 5))
                for zone, ct in itertools.product(ZONES, ("spot", "on-demand"))
            ]
            name = f"f{family}.{cpu}x"
            out.append(b.instance_type(name, cpu=str(cpu), memory=f"{gib}Gi", pods="30", offerings=offerings))
    return out


@st.composite
def _workload(draw: st.DrawFn) -> tuple[list[InstanceType], DaemonSet, list[Pod]]:
    types = draw(_catalog())
    daemon = b.daemonset(
        "agent", cpu=f"{draw(st.integers(200, 1500))}m", memory=f"{draw(st.integers(0, 2048))}Mi"
    )
    # a few pods at a time, as claims are opened between scale-ups (where sizing matters)
    pods = [
        b.pod(f"p{i}", cpu=f"{draw(st.integers(250, 1500))}m", memory=f"{draw(st.integers(256, 3072))}Mi")
        for i in range(draw(st.integers(1, 3)))
    ]
    return types, daemon, pods


def _usable_units(it: InstanceType, daemon: Resources, demand: Resources) -> float:
    """An independent count of how many times ``demand`` fits ``it`` after the DaemonSet."""
    out = math.inf
    for name, value in demand.items():
        if value > 0:
            room = it.allocatable.get(name) - daemon.get(name)
            out = min(out, max(room, 0) / value)
    return out


def _cheapest(it: InstanceType, claim: PlannedClaim) -> float:
    offering = it.cheapest_offering(claim.requirements)
    return math.inf if offering is None else offering.price


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_workload())
def test_the_sized_type_fits_the_pods_within_the_floor_and_beats_the_cheapest_per_usable_unit(
    case: tuple[list[InstanceType], DaemonSet, list[Pod]],
) -> None:
    types, daemon, pods = case
    snap_default = b.snapshot(pools=[_pool()], types=types, pods=pods, daemonsets=[daemon])
    snap_sized = b.snapshot(pools=[_pool(SIZED)], types=types, pods=pods, daemonsets=[daemon])
    default, sized = solve(snap_default), solve(snap_sized)
    # packing is untouched: the same pods per claim, the same errors
    assert [[p.name for p in c.pods] for c in sized.new_claims] == [
        [p.name for p in c.pods] for c in default.new_claims
    ]
    assert [e.pod.name for e in sized.errors] == [e.pod.name for e in default.errors]
    overhead = daemon.template.requests + Resources.parse({"pods": "1"})
    for before, after in zip(default.new_claims, sized.new_claims, strict=True):
        cheapest, chosen = before.instance_types[0], after.instance_types[0]
        assert _launched(before) == cheapest.name
        assert _launched(after) == chosen.name  # the launch rule takes the sized type
        demand = after.requests - overhead
        # the sized type holds the claim's pods and its DaemonSet pods
        assert after.requests.fits(chosen.allocatable)
        assert _usable_units(chosen, overhead, demand) >= 1
        event("sized" if chosen.name != cheapest.name else "default order")
        if chosen.name == cheapest.name:
            assert after.instance_types == before.instance_types  # the default order stands
            continue
        # every other option costs more (so nothing launches a smaller type instead)
        assert all(_cheapest(it, after) > _cheapest(chosen, after) for it in after.instance_types[1:])
        fill = _usable_units(chosen, overhead, demand)
        assert fill <= 1 / sizing.MIN_FILL  # never more than four times what the pods need
        score = _cheapest(chosen, after) / fill
        bar = _cheapest(cheapest, before) / _usable_units(cheapest, overhead, demand)
        assert score <= bar * (1 - sizing.MARGIN) * (1 + 1e-9)
        assert _cheapest(chosen, after) <= 4 * (1 - sizing.MARGIN) * _cheapest(cheapest, before) * (1 + 1e-9)


def test_when_the_cheapest_option_is_best_the_options_come_back_as_given() -> None:
    index = _index(TYPES)
    subset = np.array([1, 2, 3], dtype=np.intp)  # c4, c8, c16: one 1-vCPU pod fills a third of c4
    assert sizing.sized(index, subset, NO_REQS, _demand("1", "1Gi", 1)) is subset


@pytest.mark.parametrize("where", ["daemonset", "kubelet-reserved", "neither"])
def test_usable_is_allocatable_after_reserved_resources_and_daemonsets(where: str) -> None:
    # A linear catalog with nothing taken off: every size costs the same per usable vCPU, so the
    # cheapest type stays. One vCPU and GiB taken by a DaemonSet or by the kubelet reserve alike
    # makes the 4-vCPU type the better buy for two 500m pods.
    reserve = {"cpu": "1", "memory": "1Gi"} if where == "kubelet-reserved" else None
    types = [
        b.instance_type(f"c{cpu}", cpu=str(cpu), memory=f"{2 * cpu}Gi", pods="110", overhead=reserve)
        for cpu in (2, 4, 8, 16)
    ]
    [claim] = _claims(_pool(SIZED), _pods(2), types=types, daemon=where == "daemonset")
    assert _launched(claim) == ("c2" if where == "neither" else "c4")
