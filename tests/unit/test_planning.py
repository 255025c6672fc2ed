"""karpy plan over the upstream example manifests (vendored in tests/data/upstream-examples)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from karpy import planning
from karpy.api import load
from karpy.model import labels

EXAMPLES = Path(__file__).resolve().parent.parent / "data" / "upstream-examples"
NODEPOOL_FILES = sorted((EXAMPLES / "nodepools").glob("*.yaml"))
WORKLOAD_FILES = sorted((EXAMPLES / "workloads").glob("*.yaml"))


def _scaled(loaded: load.Loaded, replicas: int = 2) -> load.Loaded:
    """Deployments written with replicas: 0 are scaled up so that there is something to plan."""
    loaded.deployments = [
        dataclasses.replace(w, replicas=max(w.replicas, replicas)) for w in loaded.deployments
    ]
    return loaded


@pytest.mark.parametrize("nodepool_file", NODEPOOL_FILES, ids=lambda p: p.stem)
def test_every_workload_gets_a_plan_or_a_reason(nodepool_file: Path) -> None:
    loaded = _scaled(load.load_paths([nodepool_file, *WORKLOAD_FILES]))
    assert loaded.problems == []
    plan = planning.make_plan(loaded)
    placed = plan.results.placement()
    errors = {e.pod.key: e for e in plan.results.errors}
    assert plan.pending > 0
    assert len(placed) + len(errors) == plan.pending
    pools = {p.name for p in loaded.node_pools}
    for error in errors.values():
        tried = {where.removeprefix("nodepool/") for where in error.reasons if where.startswith("nodepool/")}
        assert tried == pools or "validation" in error.reasons, error.summary()
        assert all(reason for reason in error.reasons.values())
    assert not plan.unlaunchable
    for node in plan.launched:
        for pod in node.claim.pods:
            for key, value in pod.node_selector.items():
                assert node.labels.get(key) == value, (pod.key, key)


def test_arm64_workload_lands_on_graviton_in_the_multi_arch_pool() -> None:
    loaded = _scaled(
        load.load_paths([EXAMPLES / "nodepools/multiple-arch.yaml", EXAMPLES / "workloads/arm64.yaml"])
    )
    plan = planning.make_plan(loaded)
    assert plan.results.errors == ()
    assert {n.labels[labels.ARCH] for n in plan.launched} == {"arm64"}


def test_spot_workload_gets_spot_capacity() -> None:
    loaded = _scaled(load.load_paths([EXAMPLES / "nodepools/spot.yaml", EXAMPLES / "workloads/spot.yaml"]))
    plan = planning.make_plan(loaded)
    assert plan.results.errors == ()
    assert {n.offering.capacity_type for n in plan.launched} == {"spot"}


def test_zone_spread_uses_distinct_zones() -> None:
    loaded = _scaled(
        load.load_paths(
            [EXAMPLES / "nodepools/general-purpose.yaml", EXAMPLES / "workloads/spread-zone.yaml"]
        ),
        3,
    )
    plan = planning.make_plan(loaded)
    assert plan.results.errors == ()
    zones = [n.labels[labels.ZONE] for n in plan.launched for _ in n.claim.pods]
    counts = sorted(zones.count(z) for z in set(zones))
    assert counts[-1] - counts[0] <= 1


def test_cpu_limit_stops_launches_with_a_reason() -> None:
    loaded = _scaled(
        load.load_paths(
            [EXAMPLES / "nodepools/100-cpu-limit.yaml", EXAMPLES / "workloads/spread-hostname.yaml"]
        )
    )
    plan = planning.make_plan(loaded)
    launched_cpu = sum(n.instance_type.capacity.get("cpu") for n in plan.launched)
    assert launched_cpu <= 100_000
    assert plan.results.errors
    assert all("would exceed NodePool limit cpu" in e.summary() for e in plan.results.errors)
