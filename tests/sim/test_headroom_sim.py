"""Headroom end to end: the simulator (the controllers on the virtual clock) and the operator.

A NodePool annotated ``karpy.sh/headroom`` keeps free room ready for a burst: in the simulator the
burst's pods bind at once instead of waiting for new nodes, at the price of the spare node, with
the same result for the same seed; the shipped hospital twin turns it on for the same trace; the
operator (kwok provider, against the kmock emulator over HTTP) launches a NodeClaim for headroom
while no pod is pending.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import operator_harness
import pytest
import yaml
from emulator import EmulatorThread
from operator_harness import RunningOperator, wait_for

import builders
from karpy.adapters.kube.client import KubeClient
from karpy.api import load as api_load
from karpy.controllers.claims import REASON_ANNOTATION
from karpy.core import headroom
from karpy.sim import runner, scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples/sim"

# 40 minutes around a burst: 1 replica, then 30 more at 09:00 (6 vCPU, 7.5 GiB); headroom of 7 vCPU
# and 8 GiB from 08:45 for an hour.
HEADROOM = {"cpu": "7", "memory": "8Gi", "schedule": "45 8 * * *", "duration": "1h"}


def _run(tmp_path: Path, name: str, annotations: dict[str, str], seed: int = 3) -> runner.RunResult:
    raw = builders.simulation(
        name,
        start="2026-03-02T08:50:00Z",
        duration="40m",
        pool="web",
        annotations=annotations,
        consolidate_after="2m",
        requests={"cpu": "200m", "memory": "256Mi"},
        replicas=[("08:50", 1), ("09:00", 31)],
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return runner.run(scenario.load(path), seed=seed)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[runner.RunResult, runner.RunResult]:
    tmp = tmp_path_factory.mktemp("headroom")
    return _run(tmp, "plain", {}), _run(tmp, "headroom", {headroom.ANNOTATION: json.dumps(HEADROOM)})


def test_the_burst_binds_at_once_on_the_headroom(runs: tuple[runner.RunResult, runner.RunResult]) -> None:
    plain, kept = (r.figures for r in runs)
    assert plain["pending_seconds"]["p95"] >= 30  # without: the burst waits for new nodes
    assert kept["pending_seconds"]["p95"] <= 1  # with: it lands on the room kept ready
    assert kept["pods_pending_at_end"] == plain["pods_pending_at_end"] == 0


def test_the_headroom_costs_its_spare_room_and_is_refilled(
    runs: tuple[runner.RunResult, runner.RunResult],
) -> None:
    plain, kept = runs
    # the spare room is paid for before the burst: each node is twice the size, not more nodes
    assert plain.figures["cost_usd"] < kept.figures["cost_usd"] <= 2.5 * plain.figures["cost_usd"]
    assert kept.figures["peak_nodes"] <= plain.figures["peak_nodes"]
    launched = sorted(b.launched_at - kept.start for b in kept.billing)
    assert len(launched) == 2 and launched[0] < 60 and 600 <= launched[1] < 660  # the burst took it: refilled


def test_the_same_scenario_and_seed_give_the_same_headroom_run(
    runs: tuple[runner.RunResult, runner.RunResult], tmp_path: Path
) -> None:
    again = _run(tmp_path, "headroom", {headroom.ANNOTATION: json.dumps(HEADROOM)})
    assert again.figures == runs[1].figures


def test_the_shipped_twin_turns_headroom_on_for_the_same_trace() -> None:
    base = scenario.load(EXAMPLES / "hospital-booking-spikes.yaml")
    twin = base.with_karpy_config(scenario.load(EXAMPLES / "hospital-booking-spikes-headroom.yaml"))
    pools = {raw["metadata"]["name"]: api_load.convert_node_pool(raw) for raw in twin.node_pools}
    spec = headroom.spec_of(pools["web"])
    assert spec is not None and spec.per_zone and spec.schedule is not None
    assert headroom.spec_of(pools["batch"]) is None
    assert (twin.deployments, twin.jobs, twin.daemon_sets) == (base.deployments, base.jobs, base.daemon_sets)
    assert (twin.start, twin.duration, twin.cloud, twin.baseline) == (
        base.start,
        base.duration,
        base.cloud,
        base.baseline,
    )


# -- the operator: kwok provider against the kmock emulator ------------------------------------------


def _pool(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "web", "annotations": annotations},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c6a"]},
                        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["4", "8"]},
                    ],
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"},
        },
    }


def test_the_operator_launches_a_nodeclaim_for_headroom_with_no_pending_pod(
    emu: EmulatorThread, kubectl: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operator_harness, "CATALOG", "aws:us-east-1")  # the operator's default catalog
    kubectl.create(
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}
    )
    kubectl.create(_pool({headroom.ANNOTATION: json.dumps({"cpu": "3", "memory": "4Gi"})}))
    running = RunningOperator(emu)
    try:
        wait_for(running.op.ready, timeout=30, what="caches synced")
        claim = wait_for(lambda: next(iter(kubectl.list("NodeClaim")), None), timeout=30, what="a NodeClaim")
        assert claim["metadata"]["annotations"][REASON_ANNOTATION] == "headroom"
        assert claim["metadata"]["labels"]["karpenter.sh/nodepool"] == "web"
        node = wait_for(lambda: next(iter(kubectl.list("Node")), None), timeout=30, what="its Node")
        assert node["metadata"]["labels"]["karpenter.sh/nodepool"] == "web"
        assert [p for p in kubectl.list("Pod") if p["metadata"].get("namespace") != "kube-system"] == []
        assert len(kubectl.list("NodeClaim")) == 1  # its room holds the headroom: nothing more
    finally:
        running.stop()
