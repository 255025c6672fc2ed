"""DaemonSet-aware sizing end to end: the controllers on the virtual clock, the operator, the AWS launch.

A NodePool annotated ``karpy.sh/sizing: usable-price`` launches the type with the best price per
usable resource (after DaemonSets and the kubelet reserve). On a DaemonSet-heavy cluster that
grows a pod or two at a time, the simulator (the production controllers on a virtual loop) makes
fewer nodes at no extra cost; the operator (kwok provider, against the kmock emulator over HTTP)
launches the sized type; the AWS provider offers EC2 no type cheaper than it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import operator_harness
import pytest
import yaml
from emulator import EmulatorThread
from operator_harness import RunningOperator, wait_for

import builders
from karpy import catalog
from karpy.adapters.kube.client import KubeClient
from karpy.api import load as api_load
from karpy.model import labels as wk
from karpy.model.objects import SIZING_ANNOTATION, SIZING_USABLE_PRICE
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources
from karpy.providers.aws import candidates
from karpy.sim import runner, scenario

# -- the simulator: the controllers on the virtual clock ------------------------------------------


def _daemonset() -> dict[str, Any]:
    """The DaemonSets (600m CPU and 1.2 GiB on every node) of the simulation and the operator."""
    template = {
        "metadata": {"labels": {"app": "agents"}},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "a", "image": "a:1", "resources": {"requests": {"cpu": "600m", "memory": "1248Mi"}}}
            ],
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agents", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "agents"}}, "template": template},
    }


# Three hours of a service growing from 2 to 14 pods, two pods every 15 minutes, and back, on c6a
# nodes of 2, 4 and 8 vCPU, each carrying 600m CPU and 1.2 GiB of DaemonSets (31% of a c6a.large's
# allocatable CPU). Two 500m pods fill a c6a.large; a c6a.xlarge keeps room for the next two.
def _run(tmp_path: Path, name: str, annotations: dict[str, str]) -> runner.RunResult:
    raw = builders.simulation(
        name,
        start="2026-03-02T08:00:00Z",
        duration="3h",
        annotations=annotations,
        instance_cpu=["2", "4", "8"],
        consolidate_after="5m",
        daemon_sets=[_daemonset()],
        requests={"cpu": "500m", "memory": "512Mi"},
        replicas=[
            ("08:00", 2),
            ("08:15", 4),
            ("08:30", 6),
            ("08:45", 8),
            ("09:00", 10),
            ("09:15", 12),
            ("09:30", 14),
            ("10:30", 8),
            ("10:45", 4),
        ],
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return runner.run(scenario.load(path), seed=7)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[runner.RunResult, runner.RunResult]:
    tmp = tmp_path_factory.mktemp("sizing")
    return _run(tmp, "plain", {}), _run(tmp, "sized", {SIZING_ANNOTATION: SIZING_USABLE_PRICE})


def test_the_sized_pool_makes_fewer_nodes_at_no_extra_cost(
    runs: tuple[runner.RunResult, runner.RunResult],
) -> None:
    plain, sized = (r.figures for r in runs)
    for figures in (plain, sized):
        assert figures["pods_pending_at_end"] == 0 and figures["pods_never_scheduled"] == 0
    assert sized["peak_nodes"] <= 0.8 * plain["peak_nodes"]
    assert sized["node_hours"] <= 0.8 * plain["node_hours"]
    assert sized["nodes_created"] < plain["nodes_created"]
    assert sized["cost_usd"] <= plain["cost_usd"]


def test_the_sized_pool_runs_on_bigger_types(runs: tuple[runner.RunResult, runner.RunResult]) -> None:
    plain, sized = (r.figures["node_hours_by_instance_type"] for r in runs)
    share = {
        name: by_type.get("c6a.large", 0.0) / sum(by_type.values())
        for name, by_type in (("plain", plain), ("sized", sized))
    }
    assert share["plain"] > 0.5  # upstream's rule: mostly the cheapest type that fits a pod or two
    assert share["sized"] < share["plain"] / 2


def test_the_same_scenario_and_seed_give_the_same_sized_run(
    tmp_path: Path, runs: tuple[runner.RunResult, runner.RunResult]
) -> None:
    again = _run(tmp_path, "sized", {SIZING_ANNOTATION: SIZING_USABLE_PRICE})
    figures = dict(again.figures)
    first = dict(runs[1].figures)
    assert figures == first


def test_the_shipped_twin_turns_the_sizing_on_for_the_same_trace() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "sim"
    base = scenario.load(examples / "daemonset-heavy.yaml")
    twin = base.with_karpy_config(scenario.load(examples / "daemonset-heavy-usable-price.yaml"))
    assert [api_load.convert_node_pool(raw).sizing() for raw in base.node_pools] == [""]
    assert [api_load.convert_node_pool(raw).sizing() for raw in twin.node_pools] == [SIZING_USABLE_PRICE]
    assert (twin.deployments, twin.jobs, twin.daemon_sets) == (base.deployments, base.jobs, base.daemon_sets)
    assert (twin.start, twin.duration, twin.cloud) == (base.start, base.duration, base.cloud)


# -- the operator: kwok provider against the kmock emulator ------------------------------------------


def _pool(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "annotations": annotations},
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
                        {
                            "key": "karpenter.k8s.aws/instance-cpu",
                            "operator": "In",
                            "values": ["2", "4", "8"],
                        },
                    ],
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
        },
    }


def _pending(name: str, pool: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": pool}},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": pool},
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}
            ],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def _claim_of(kubectl: KubeClient, pool: str) -> dict[str, Any] | None:
    for claim in kubectl.list("NodeClaim"):
        if claim["metadata"]["labels"].get("karpenter.sh/nodepool") == pool:
            return claim
    return None


def _node_type(kubectl: KubeClient, pool: str) -> str | None:
    for node in kubectl.list("Node"):
        labels = node["metadata"]["labels"]
        if labels.get("karpenter.sh/nodepool") == pool:
            return str(labels[wk.INSTANCE_TYPE])
    return None


def _types(claim: dict[str, Any]) -> set[str]:
    for req in claim["spec"]["requirements"]:
        if req["key"] == wk.INSTANCE_TYPE:
            return set(req["values"])
    raise AssertionError("no instance-type requirement")


def test_the_operator_launches_the_sized_type_and_the_plain_pool_the_cheapest(
    emu: EmulatorThread, kubectl: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(operator_harness, "CATALOG", "aws:us-east-1")  # the operator's default catalog
    kubectl.create(
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}
    )
    kubectl.create(_pool("plain", {}))
    kubectl.create(_pool("sized", {SIZING_ANNOTATION: SIZING_USABLE_PRICE}))
    kubectl.create(_daemonset())
    running = RunningOperator(emu)
    try:
        wait_for(running.op.ready, timeout=30, what="caches synced")
        for pool in ("plain", "sized"):  # two 500m pods per pool, one batch
            for i in range(2):
                kubectl.create(_pending(f"{pool}-{i}", pool))
        plain = wait_for(lambda: _claim_of(kubectl, "plain"), timeout=30, what="the plain NodeClaim")
        sized = wait_for(lambda: _claim_of(kubectl, "sized"), timeout=30, what="the sized NodeClaim")
        # the plain claim may launch any size; the sized one offers nothing below c6a.xlarge
        assert _types(plain) == {"c6a.large", "c6a.xlarge", "c6a.2xlarge"}
        assert _types(sized) == {"c6a.xlarge", "c6a.2xlarge"}
        assert (
            wait_for(lambda: _node_type(kubectl, "plain"), timeout=30, what="the plain Node") == "c6a.large"
        )
        assert (
            wait_for(lambda: _node_type(kubectl, "sized"), timeout=30, what="the sized Node") == "c6a.xlarge"
        )
    finally:
        running.stop()


# -- the AWS provider: what CreateFleet is offered --------------------------------------------------


def test_the_aws_launch_offers_the_sized_type_as_its_cheapest_candidate() -> None:
    types = catalog.load("aws:us-east-1").instance_types
    offered = [it for it in types if it.name in {"c6a.large", "c6a.xlarge", "c6a.2xlarge"}]
    sized_claim = Requirements(
        (
            Requirement.in_(wk.INSTANCE_TYPE, "c6a.xlarge", "c6a.2xlarge"),
            Requirement.in_(wk.CAPACITY_TYPE, "on-demand"),
        )
    )
    requests = Resources.parse({"cpu": "1600m", "memory": "3296Mi", "pods": "3"})
    chosen = candidates.candidates(sized_claim, requests, offered)
    # EC2's on-demand "lowest-price" launches the first; the smaller type is not offered at all
    assert [it.name for it in chosen] == ["c6a.xlarge", "c6a.2xlarge"]
    assert candidates.capacity_type(sized_claim, chosen) == "on-demand"
