"""The scheduler's fast paths give exactly the one-by-one results.

The fast paths: numpy instance-type masks (``TypeIndex``) instead of the per-type filter,
bucketed claim order instead of a sort per pod, and grouped rejection (a pod skips the places
that rejected an identical sibling for good: taints, host ports, requirement conflicts,
resources, anti-affinity, hostname spread; and, within one pod, existing nodes with the same
topology domains as one that failed). The reference algorithm
(:mod:`karpy.core.scheduling.reference`) tries every place one by one with the straightforward
filter and re-sorts the claims before every pod, as upstream. Random scenarios favour many identical
replicas (deployments) so that the grouped paths are exercised, with spreads, (anti-)affinity,
preferences that need relaxing, taints, host ports, limits, existing nodes and DaemonSets.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders as b
from karpy.core.scheduling import reference, scheduler
from karpy.core.scheduling.results import Results
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType, Offering
from karpy.model.objects import NodePool, Pod, PodAffinityTerm, WeightedPodAffinityTerm
from karpy.model.requirements import Requirement
from karpy.model.selectors import LabelSelector
from karpy.model.taints import NO_SCHEDULE, Taint, Toleration

ZONES = b.ZONES
TAINT = Taint("team", NO_SCHEDULE, "a")


def digest(results: Results) -> dict[str, Any]:
    """The placements: every claim's pool, requirements, options (in order), pods, requests and
    labels, and every error. Claim names are placeholders (``<pool>-NNNNN`` in opening order):
    the fast paths may open the same claims in another order when a pod's retries are cut
    short, so claims are compared as a sorted list without their names."""
    return {
        "claims": sorted(
            (
                c.node_pool,
                str(c.requirements),
                [it.name for it in c.instance_types],
                [p.key for p in c.pods],
                c.requests,
                sorted(c.labels.items()),
            )
            for c in results.new_claims
        ),
        "existing": sorted(results.existing.items()),
        "errors": [(e.pod.key, sorted(e.reasons.items()), e.relaxations) for e in results.errors],
        "relaxations": sorted(results.relaxations.items()),
    }


def solve_both(snapshot: Snapshot, pods: list[Pod]) -> tuple[dict[str, Any], dict[str, Any]]:
    fast = digest(scheduler.solve(snapshot, pods))
    slow = digest(reference.solve(snapshot, pods))
    return fast, slow


@st.composite
def catalogs(draw: st.DrawFn) -> list[InstanceType]:
    types = []
    for index in range(draw(st.integers(1, 6))):
        zones = draw(st.lists(st.sampled_from(ZONES), min_size=1, max_size=3, unique=True))
        offerings = [
            Offering(zone, ct, draw(st.integers(1, 4)) / 10, available=draw(st.integers(0, 6)) > 0)
            for zone, ct in itertools.product(sorted(zones), ("spot", "on-demand"))
        ]
        types.append(
            b.instance_type(
                f"type-{index}",
                cpu=draw(st.sampled_from(["1", "2", "4", "8"])),
                memory=draw(st.sampled_from(["2Gi", "4Gi", "16Gi"])),
                pods=draw(st.sampled_from(["3", "5", "20"])),
                offerings=offerings,
            )
        )
    return types


@st.composite
def pools(draw: st.DrawFn) -> list[NodePool]:
    out = []
    for name in draw(st.lists(st.sampled_from(["alpha", "beta"]), min_size=1, max_size=2, unique=True)):
        reqs = []
        if draw(st.booleans()):
            reqs.append(
                Requirement.of(wk.ZONE, "In", sorted(draw(st.sets(st.sampled_from(ZONES), min_size=1))))
            )
        if draw(st.booleans()):
            reqs.append(
                Requirement.of(wk.CAPACITY_TYPE, "In", [draw(st.sampled_from(["spot", "on-demand"]))])
            )
        limit = draw(st.none() | st.sampled_from(["6", "12", "40"]))
        out.append(
            b.node_pool(
                name,
                weight=draw(st.integers(0, 1)),
                requirements=reqs,
                taints=[TAINT] if draw(st.integers(0, 3)) == 0 else [],
                limits={"cpu": limit} if limit else None,
            )
        )
    return out


def _term(key: str, match: dict[str, str]) -> PodAffinityTerm:
    return PodAffinityTerm(key, LabelSelector.from_labels(match))


@st.composite
def deployments(draw: st.DrawFn) -> list[Pod]:
    pods: list[Pod] = []
    for d in range(draw(st.integers(1, 4))):
        app = {"app": f"d{d}"}
        kind = draw(
            st.sampled_from(["plain", "zone-spread", "host-spread", "anti", "affinity", "prefs", "ports"])
        )
        spec: dict[str, Any] = {"labels": app}
        if kind == "zone-spread":
            spec["spread"] = [b.spread(wk.ZONE, max_skew=draw(st.integers(1, 2)), match_labels=app)]
        elif kind == "host-spread":
            spec["spread"] = [b.spread(wk.HOSTNAME, match_labels=app)]
        elif kind == "anti":
            spec["anti_affinity"] = [_term(draw(st.sampled_from([wk.HOSTNAME, wk.ZONE])), app)]
        elif kind == "affinity":
            spec["affinity"] = [_term(wk.ZONE, app)]
        elif kind == "prefs":
            spec["preferred_terms"] = [(1, [(wk.ZONE, "In", (draw(st.sampled_from(ZONES)),))])]
            spec["anti_affinity_preferred"] = (
                WeightedPodAffinityTerm(10, _term(wk.ZONE, app)),
                WeightedPodAffinityTerm(1, _term(wk.HOSTNAME, app)),
            )
        elif kind == "ports":
            spec["host_ports"] = [8080]
        if draw(st.integers(0, 3)) == 0:
            spec["tolerations"] = [Toleration("team", "Exists")]
        if draw(st.integers(0, 4)) == 0:
            spec["node_selector"] = {wk.ZONE: draw(st.sampled_from(ZONES))}
        cpu = draw(st.sampled_from(["100m", "500m", "1", "3"]))
        memory = draw(st.sampled_from(["128Mi", "1Gi", "3Gi"]))
        for r in range(draw(st.integers(1, 12))):
            pod = b.pod(f"d{d}-{r:02d}", cpu=cpu, memory=memory, **spec)
            if "anti_affinity_preferred" in spec:
                pod = b.replace(pod, anti_affinity_preferred=spec["anti_affinity_preferred"])
            pods.append(pod)
    return pods


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Snapshot, list[Pod]]:
    types = draw(catalogs())
    node_pools = draw(pools())
    pods = draw(deployments())
    nodes = [
        b.node(
            f"node-{i}",
            labels={wk.ZONE: draw(st.sampled_from(ZONES))},
            allocatable={"cpu": draw(st.sampled_from(["1", "2", "4"])), "memory": "4Gi", "pods": "8"},
            taints=[TAINT] if draw(st.integers(0, 4)) == 0 else [],
        )
        for i in range(draw(st.integers(0, 5)))
    ]
    daemonsets = [b.daemonset("agent", cpu="100m", memory="64Mi")] if draw(st.booleans()) else []
    snap = b.snapshot(pools=node_pools, types=types, nodes=nodes, pods=pods, daemonsets=daemonsets)
    return snap, pods


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_fast_paths_equal_one_by_one(scenario: tuple[Snapshot, list[Pod]]) -> None:
    snapshot, pods = scenario
    fast, slow = solve_both(snapshot, pods)
    assert fast == slow


@pytest.mark.parametrize(
    ("shape", "pods"),
    [("upstream-diverse", 150), ("upstream-preferences", 60), ("aws-deployments", 150)],
)
def test_benchmark_shapes_equal_one_by_one(shape: str, pods: int) -> None:
    import scheduling as bench  # benchmarks/scheduling.py, put on sys.path below

    snapshot, pending = bench.SHAPES[shape][0](pods)
    fast, slow = solve_both(snapshot, pending)
    assert fast == slow


@pytest.fixture(autouse=True)
def _benchmarks_on_path() -> None:
    import sys
    from pathlib import Path

    path = str(Path(__file__).resolve().parents[3] / "benchmarks")
    if path not in sys.path:
        sys.path.insert(0, path)


# Some pods get a capacity-type nodeSelector too. With them the fast paths can open the same
# claims in another order (a pod's retries are cut short), hence the name-free digest above.
CT_SELECTORS = True


@st.composite
def zonal_scenarios(draw: st.DrawFn) -> tuple[Snapshot, list[Pod]]:
    """Many claims pinned to zones (zonal spreads and affinity beside hostname anti-affinity), so
    that zonal pods skip whole zones of the claim order (``ClaimOrder.ordered_unpinned``)."""
    types = draw(catalogs())
    node_pools = draw(pools())
    pods: list[Pod] = []
    for d in range(draw(st.integers(2, 6))):
        app = {"app": f"z{d}"}
        kind = draw(st.sampled_from(["zone-spread", "zone-spread", "affinity", "anti-host", "plain"]))
        spec: dict[str, Any] = {"labels": app}
        if kind == "zone-spread":
            spec["spread"] = [b.spread(wk.ZONE, max_skew=draw(st.integers(1, 2)), match_labels=app)]
        elif kind == "affinity":
            spec["affinity"] = [_term(wk.ZONE, app)]
        elif kind == "anti-host":
            spec["anti_affinity"] = [_term(wk.HOSTNAME, app)]
        if CT_SELECTORS and draw(st.integers(0, 4)) == 0:
            spec["node_selector"] = {wk.CAPACITY_TYPE: draw(st.sampled_from(["spot", "on-demand"]))}
        cpu = draw(st.sampled_from(["100m", "500m", "1", "3"]))
        for r in range(draw(st.integers(3, 20))):
            pods.append(b.pod(f"z{d}-{r:02d}", cpu=cpu, memory="128Mi", **spec))
    snap = b.snapshot(pools=node_pools, types=types, nodes=[], pods=pods, daemonsets=[])
    return snap, pods


@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(zonal_scenarios())
def test_zone_indexed_claim_walk_equals_one_by_one(scenario: tuple[Snapshot, list[Pod]]) -> None:
    snapshot, pods = scenario
    fast, slow = solve_both(snapshot, pods)
    assert fast == slow


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 50), st.sampled_from("abc")), min_size=1, max_size=60),
    st.sets(st.sampled_from("abc")),
)
def test_claim_order_unpinned_is_ordered_minus_skipped(
    steps: list[tuple[bool, int, str]], skip: set[str]
) -> None:
    from karpy.core.scheduling.claimorder import ClaimOrder

    class Claim:
        def __init__(self, zone: str) -> None:
            self.pods = 1
            self.zone: str | None = zone

    order: ClaimOrder[Claim] = ClaimOrder(lambda c: c.pods, pin=lambda c: c.zone)
    claims: list[Claim] = []
    for new, pick, zone in steps:
        if new or not claims:
            claims.append(Claim(zone))
            order.opened(claims[-1])
        else:
            claim = claims[pick % len(claims)]
            claim.pods += 1
            claim.zone = None if zone == "c" else zone
            order.grew(claim, claim.pods - 1)
        expected = list(order.ordered())
        assert list(order.ordered_unpinned(set())) == expected
        left = list(order.ordered_unpinned(set(skip)))
        assert left == [c for c in expected if c.zone is None or c.zone not in skip]
