"""``solve(snapshot, pods, without=names)`` is the solve of the snapshot minus those nodes.

A disruption pass solves one snapshot without one candidate after another; the solver then
shares the work of the snapshot's nodes (their order and NodeBases, the NodePool usage) across
those solves. Each answer must equal the solve of a snapshot built without the nodes, on
clusters with bound pods that spread over zones and hostnames, anti-affinity, DaemonSets and
NodePool limits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_scheduling_perf_equivalence import ZONES, catalogs, deployments, digest

import builders as b
from karpy.core.scheduling import limits, scheduler
from karpy.core.snapshot import Snapshot
from karpy.model.objects import Pod


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, list[Pod]]:
    types = draw(catalogs())
    pools = [
        b.node_pool(name, limits={"cpu": draw(st.sampled_from(["6", "40"]))} if draw(st.booleans()) else None)
        for name in ("alpha", "beta")
    ]
    pending = draw(deployments())
    managed, bound = [], []
    for i in range(draw(st.integers(1, 6))):
        name = f"n{i}"
        managed.append(
            b.managed_node(
                name,
                pool=draw(st.sampled_from(["alpha", "beta"])),
                instance_type=draw(st.sampled_from(types)),
                zone=draw(st.sampled_from(ZONES)),
                initialized=draw(st.integers(0, 4)) > 0,
            )
        )
        for j in range(draw(st.integers(0, 3))):
            template = draw(st.sampled_from(pending)) if pending else None
            extra: dict[str, Any] = {}
            if template is not None:  # a running copy of a pending pod: its spreads count it
                extra = {"labels": dict(template.labels), "anti_affinity": template.anti_affinity}
            bound.append(b.running_pod(f"{name}-p{j}", name, cpu="100m", memory="64Mi", **extra))
    daemonsets = [b.daemonset("agent", cpu="100m", memory="64Mi")] if draw(st.booleans()) else []
    snap = b.managed_snapshot(
        pools=pools,
        types=types,
        managed=managed,
        pods=[*bound, *pending],
        daemonsets=tuple(daemonsets),
        marked_for_deletion=[n.name for n, _ in managed if draw(st.integers(0, 5)) == 0],
    )
    return snap, pending


def _reduced(snap: Snapshot, names: frozenset[str]) -> Snapshot:
    return dataclasses.replace(snap, nodes=tuple(n for n in snap.nodes if n.name not in names))


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(clusters())
def test_a_solve_without_nodes_equals_the_solve_of_the_snapshot_without_them(
    cluster: tuple[Snapshot, list[Pod]],
) -> None:
    snap, pending = cluster
    scheduler.solve(snap, pending)  # the pass's first solve: the shared node work is now warm
    for node in snap.nodes:
        names = frozenset({node.name})
        moved = [p for p in node.pods if p.owners]
        pods = [*pending, *moved]
        got = scheduler.solve(snap, pods, consolidation=True, without=names)
        want = scheduler.solve(_reduced(snap, names), pods, consolidation=True)
        assert digest(got) == digest(want), node.name
    names = frozenset(n.name for n in snap.nodes[:2])
    assert digest(scheduler.solve(snap, pending, without=names)) == digest(
        scheduler.solve(_reduced(snap, names), pending)
    )


def test_pool_usage_without_nodes_is_the_sum_over_the_rest() -> None:
    types = [b.instance_type("small", cpu="2", memory="2Gi"), b.instance_type("large", cpu="8", memory="8Gi")]
    managed = [
        b.managed_node("a1", pool="alpha", instance_type=types[0]),
        b.managed_node("a2", pool="alpha", instance_type=types[1]),
        b.managed_node("b1", pool="beta", instance_type=types[1]),
    ]
    snap = b.managed_snapshot(pools=[b.node_pool("alpha"), b.node_pool("beta")], types=types, managed=managed)
    for names in (frozenset({"a2"}), frozenset({"a1", "b1"}), frozenset({"b1"})):
        rest = [n for n in snap.nodes if n.name not in names]
        want = {
            pool: dict(limits.pool_usage(b.node_pool(pool), rest).items())
            for pool in ("alpha", "beta")
            if any(n.node_pool == pool for n in rest)
        }
        got = limits.pool_usages(snap.nodes, without=names)
        nonzero = {pool: {k: v for k, v in counts.items() if v} for pool, counts in got.items()}
        assert {pool: counts for pool, counts in nonzero.items() if counts} == want, names  # zero: absent
    assert limits.pool_usages(snap.nodes, without=frozenset({"a1"}))["alpha"]["nodes"] == 1
