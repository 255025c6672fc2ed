"""The LP lower bound of ``karpy plan --bound`` (``karpy.core.optimize.bound``).

Exact on cases solvable by hand, never above a feasible packing built by hand or by the
scheduler, monotone in the pods, and computed over the node kinds the scheduler's own
rules allow (NodePool requirements, taints, DaemonSet overhead, existing nodes).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders as b
from karpy.core.optimize import bound
from karpy.core.scheduling import launch, solve
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.catalog import Offering
from karpy.model.objects import Pod
from karpy.model.resources import Resources
from karpy.model.taints import NO_SCHEDULE, Taint, Toleration

TAINT = Taint("dedicated", NO_SCHEDULE, "batch")
TOLERATES = Toleration(key="dedicated", operator="Equal", value="batch", effect=NO_SCHEDULE)


def _pods(n: int, cpu: str = "1", memory: str = "0", prefix: str = "p", **kw: Any) -> list[Pod]:
    return [b.pod(f"{prefix}{i}", cpu=cpu, memory=memory, **kw) for i in range(n)]


def _bound(snap: Snapshot, pods: Sequence[Pod] | None = None) -> bound.Bound:
    return bound.lower_bound(snap, list(snap.pods if pods is None else pods))


# -- exact on tiny cases ------------------------------------------------------------------------


def test_pods_that_exactly_fill_one_node_cost_that_node() -> None:
    it = b.instance_type("only", cpu="4", memory="4Gi", price=1.0)
    snap = b.snapshot(pools=[b.node_pool()], types=[it], pods=_pods(4))
    found = _bound(snap)
    assert found.status == "optimal"
    assert found.lp == pytest.approx(1.0)
    assert found.floor == pytest.approx(1.0)
    assert found.lower_bound == pytest.approx(1.0)
    assert found.mix == (("default/only", pytest.approx(1.0)),)


def test_the_cheaper_per_cpu_type_wins_fractionally() -> None:
    small = b.instance_type("small", cpu="2", memory="8Gi", price=1.0)  # 0.5 per cpu
    large = b.instance_type("large", cpu="4", memory="8Gi", price=1.5)  # 0.375 per cpu
    snap = b.snapshot(pools=[b.node_pool()], types=[small, large], pods=_pods(6))
    # 6 cpu at 0.375 = 2.25 (1.5 large nodes); whole nodes would cost 3.0 (two large)
    assert _bound(snap).lp == pytest.approx(2.25)


def test_the_pods_slot_counts() -> None:
    it = b.instance_type("few-pods", cpu="64", memory="64Gi", pods="2", price=1.0)
    snap = b.snapshot(pools=[b.node_pool()], types=[it], pods=_pods(6, cpu="100m"))
    assert _bound(snap).lp == pytest.approx(3.0)


def test_daemonset_overhead_is_taken_out_of_allocatable() -> None:
    it = b.instance_type("only", cpu="4", memory="4Gi", price=1.0)
    ds = b.daemonset("agent", cpu="100m")
    snap = b.snapshot(pools=[b.node_pool()], types=[it], pods=_pods(4), daemonsets=[ds])
    # 4 cpu of pods in 3.9 cpu per node
    assert _bound(snap).lp == pytest.approx(4000 / 3900)


def test_no_pods_bound_zero() -> None:
    snap = b.snapshot(pools=[b.node_pool()], types=[b.instance_type("only")])
    found = _bound(snap, [])
    assert (found.lower_bound, found.pods, found.groups) == (0.0, 0, 0)


# -- a valid lower bound ------------------------------------------------------------------------


def test_complementary_pods_share_a_node_in_the_bound() -> None:
    """One node holds a CPU-heavy and a memory-heavy pod: the bound must not exceed it
    (a per-group covering, each group its own fractional nodes, would say 2)."""
    it = b.instance_type("only", cpu="4", memory="16Gi", price=1.0)
    pods = [b.pod("cpu", cpu="3500m", memory="1Gi"), b.pod("mem", cpu="400m", memory="14Gi")]
    snap = b.snapshot(pools=[b.node_pool()], types=[it], pods=pods)
    found = _bound(snap)
    assert found.lower_bound <= 1.0 + 1e-9
    assert found.lp == pytest.approx(3900 / 4000)


def test_floor_never_exceeds_the_lp() -> None:
    types = [
        b.instance_type("c", cpu="8", memory="8Gi", price=0.8),
        b.instance_type("m", cpu="4", memory="16Gi", price=0.9),
        b.instance_type("r", cpu="2", memory="16Gi", price=0.7),
    ]
    pods = _pods(5, cpu="1500m", memory="1Gi", prefix="a") + _pods(7, cpu="250m", memory="3Gi", prefix="b")
    snap = b.snapshot(pools=[b.node_pool()], types=types, pods=pods)
    found = _bound(snap)
    assert 0 < found.floor <= found.lp + 1e-9


def test_adding_pods_never_lowers_the_bound() -> None:
    types = [b.instance_type("s", cpu="2", memory="4Gi"), b.instance_type("l", cpu="8", memory="32Gi")]
    pods = _pods(3, cpu="1", memory="2Gi", prefix="a") + _pods(4, cpu="500m", memory="6Gi", prefix="b")
    snap = b.snapshot(pools=[b.node_pool()], types=types, pods=pods)
    values = [_bound(snap, pods[:n]).lower_bound for n in range(len(pods) + 1)]
    assert all(later >= earlier - 1e-9 for earlier, later in itertools.pairwise(values))


def test_free_room_on_existing_nodes_costs_nothing() -> None:
    node = b.node("existing", allocatable={"cpu": "4", "memory": "8Gi", "pods": "10"})
    it = b.instance_type("only", cpu="4", memory="8Gi", price=1.0)
    pods = _pods(2, cpu="1")
    snap = b.snapshot(pools=[b.node_pool()], types=[it], pods=pods, nodes=[node])
    assert _bound(snap).lower_bound == pytest.approx(0.0)
    # without the node the pods need half a node
    assert bound.lower_bound(snap, pods, existing=False).lp == pytest.approx(0.5)


# -- node kinds follow the scheduler's compatibility rules ---------------------------------------


def test_taints_keep_pods_that_do_not_tolerate_them_off_a_pool() -> None:
    cheap = b.node_pool("cheap", taints=[TAINT])
    dear = b.node_pool("dear")
    types = {
        "cheap": [b.instance_type("cheap-it", cpu="4", price=1.0)],
        "dear": [b.instance_type("dear-it", cpu="4", price=3.0)],
    }
    plain = b.snapshot(pools=[cheap, dear], types=types, pods=_pods(4))
    assert _bound(plain).lp == pytest.approx(3.0)
    tolerant = b.snapshot(pools=[cheap, dear], types=types, pods=_pods(4, tolerations=[TOLERATES]))
    assert _bound(tolerant).lp == pytest.approx(1.0)


def test_pool_requirements_and_labels_decide_which_pods_may_use_it() -> None:
    arm = b.node_pool("arm", requirements=[(wk.ARCH, "In", ["arm64"])], labels={"team": "a"})
    amd = b.node_pool("amd", requirements=[(wk.ARCH, "In", ["amd64"])])
    types = [
        b.instance_type("graviton", cpu="4", arch="arm64", price=1.0),
        b.instance_type("intel", cpu="4", arch="amd64", price=2.0),
    ]
    anywhere = b.snapshot(pools=[arm, amd], types=types, pods=_pods(4))
    assert _bound(anywhere).lp == pytest.approx(1.0)
    team_b = b.snapshot(pools=[arm, amd], types=types, pods=_pods(4, node_selector={"team": "b"}))
    found = _bound(team_b)  # no pool defines team=b
    assert found.pods == 0 and len(found.uncovered) == 4
    on_amd = b.snapshot(pools=[arm, amd], types=types, pods=_pods(4, node_selector={wk.ARCH: "amd64"}))
    assert _bound(on_amd).lp == pytest.approx(2.0)


def test_offerings_the_pods_exclude_are_not_priced() -> None:
    it = b.instance_type(
        "only",
        cpu="4",
        offerings=[
            Offering(b.ZONES[0], "spot", 0.3),
            Offering(b.ZONES[1], "on-demand", 1.0),
            Offering(b.ZONES[2], "spot", 0.2, available=False),
        ],
    )
    pool = b.node_pool()
    spot_ok = b.snapshot(pools=[pool], types=[it], pods=_pods(4))
    assert _bound(spot_ok).lp == pytest.approx(0.3)
    od = b.snapshot(pools=[pool], types=[it], pods=_pods(4, node_selector={wk.CAPACITY_TYPE: "on-demand"}))
    assert _bound(od).lp == pytest.approx(1.0)
    mixed = b.snapshot(
        pools=[pool],
        types=[it],
        pods=_pods(2, prefix="s") + _pods(2, prefix="o", node_selector={wk.CAPACITY_TYPE: "on-demand"}),
    )
    assert _bound(mixed).lp == pytest.approx(0.5 * 0.3 + 0.5 * 1.0)


def test_a_pod_too_big_for_a_type_cannot_use_it_even_fractionally() -> None:
    small = b.instance_type("small", cpu="2", price=0.1)  # cheap per cpu, but a 3-cpu pod fits not
    large = b.instance_type("large", cpu="4", price=1.0)
    snap = b.snapshot(pools=[b.node_pool()], types=[small, large], pods=[b.pod("big", cpu="3")])
    assert _bound(snap).lp == pytest.approx(0.75)


# -- against the scheduler ----------------------------------------------------------------------

CPU_CHOICES = ("100m", "250m", "500m", "1", "1500m", "3")
MEM_CHOICES = ("128Mi", "512Mi", "1Gi", "2Gi", "6Gi")
CATALOG = [
    b.instance_type("s", cpu="2", memory="4Gi", pods="8"),
    b.instance_type("m", cpu="4", memory="16Gi", pods="16"),
    b.instance_type("c", cpu="8", memory="8Gi", pods="20", price=0.9),
    b.instance_type("r", cpu="4", memory="32Gi", pods="30", price=3.0),
]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(st.tuples(st.sampled_from(CPU_CHOICES), st.sampled_from(MEM_CHOICES)), max_size=25),
    tainted=st.booleans(),
)
def test_the_bound_never_exceeds_the_schedulers_plan(requests: list[tuple[str, str]], tainted: bool) -> None:
    pools = [b.node_pool("general"), b.node_pool("special", taints=[TAINT] if tainted else [])]
    types = {"general": CATALOG[:2], "special": CATALOG[2:]}
    pods = [b.pod(f"p{i}", cpu=c, memory=m) for i, (c, m) in enumerate(requests)]
    snap = b.snapshot(pools=pools, types=types, pods=pods)
    results = solve(snap)
    launched = [launch(c) for c in results.new_claims]
    assert all(node is not None for node in launched)
    cost = sum(node.price for node in launched if node is not None)
    placed = set(results.placement())
    found = _bound(snap, [p for p in pods if p.key in placed])
    assert found.status == "optimal"
    assert found.lower_bound <= cost + 1e-9
    # one pod per node of its cheapest fitting type is feasible too
    alone = 0.0
    for pod in pods:
        if pod.key in placed:
            fits = [
                (n.offerings[0].price)
                for pool in pools
                for n in types[pool.name]
                if (pod.requests + Resources({"pods": 1})).fits(n.allocatable)
                and not (tainted and pool.name == "special")
            ]
            alone += min(fits)
    assert found.lower_bound <= alone + 1e-9
    assert not math.isnan(found.lp)
