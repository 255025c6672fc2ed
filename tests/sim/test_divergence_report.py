"""The ``scheduler_consistency`` figures of ``karpy simulate``: how often the scheduler stand-in
bound a pod elsewhere than karpy nominated, with LeastAllocated and MostAllocated scoring.

The scenario (small.yaml cut down): a NodePool of on-demand 4-vCPU instances, and at the start
two 1500m pods and four 250m pods, more than one c6i.xlarge holds. karpy packs the two big pods
and three small ones onto one NodeClaim and the last small pod onto a second; both nodes turn
Ready at the same instant (fixed launch latency). MostAllocated fills the first node as karpy
did; LeastAllocated puts the second big pod and one small pod on the emptier node instead.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from karpy.cli.simulate_cmd import simulate
from karpy.sim import consistency, report, runner, scenario

SMALL = Path(__file__).resolve().parents[2] / "examples" / "sim" / "small.yaml"

app = typer.Typer()
app.command()(simulate)


def _deployment(name: str, cpu: str, replicas: int) -> dict[str, Any]:
    return {
        "deployment": {
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "containers": [
                            {"name": name, "image": f"{name}:1", "resources": {"requests": {"cpu": cpu}}}
                        ]
                    },
                },
            },
        },
        "replicas": replicas,
    }


def _scenario_file(tmp_path: Path, *, workloads: list[dict[str, Any]]) -> Path:
    doc = yaml.safe_load(SMALL.read_text())
    doc["name"] = "two-nodes-at-once"
    doc["duration"] = "10m"
    requirements = doc["nodePools"][0]["spec"]["template"]["spec"]["requirements"]
    for requirement in requirements:
        if requirement["key"] == "karpenter.sh/capacity-type":
            requirement["values"] = ["on-demand"]
        if requirement["key"] == "karpenter.k8s.aws/instance-cpu":
            requirement["values"] = ["4"]
    doc["cloud"] = {
        "launchLatency": {"distribution": "fixed", "p50": "40s"},
        "podStartup": {"imagePullCold": "5s", "imagePullWarm": "1s", "ready": "1s"},
    }
    doc["workloads"] = workloads
    path = tmp_path / "two-nodes-at-once.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workloads = [_deployment("big", "1500m", 2), _deployment("small", "250m", 4)]
    return _scenario_file(tmp_path_factory.mktemp("divergence"), workloads=workloads)


def _run(path: Path, scoring: str) -> runner.RunResult:
    return runner.run(scenario.load(path), seed=1, scoring=scoring)


def test_least_allocated_binds_two_pods_elsewhere_most_allocated_none(two_nodes: Path) -> None:
    least, most = _run(two_nodes, "LeastAllocated"), _run(two_nodes, "MostAllocated")
    assert least.figures[consistency.KEY] == {
        "nominated": 6,
        "bound_as_nominated": 4,
        "diverged": 2,
        "divergence_rate": 0.333333,
        "by_reason": {"gone": 0, "not-ready": 0, "scoring": 2},
    }
    assert most.figures[consistency.KEY] == {
        "nominated": 6,
        "bound_as_nominated": 6,
        "diverged": 0,
        "divergence_rate": 0.0,
        "by_reason": {"gone": 0, "not-ready": 0, "scoring": 0},
    }
    # the same two launches either way: only where the pods went differs
    for result in (least, most):
        assert [b.instance_type for b in result.billing] == ["c6i.xlarge", "c6i.xlarge"]
        assert result.billing[0].launched_at == result.billing[1].launched_at
    diverged = sorted(
        name.split("-")[0] for _, _kind, name, why in least.events if why == "SchedulerDivergence"
    )
    assert diverged == ["big", "small"]
    assert not [e for e in most.events if e[3] == "SchedulerDivergence"]


def test_a_run_without_nominations_is_zero_with_rate_zero_and_ca_runs_are_null(tmp_path: Path) -> None:
    path = _scenario_file(tmp_path, workloads=[])
    idle = _run(path, "LeastAllocated").figures[consistency.KEY]
    assert idle == {
        "nominated": 0,
        "bound_as_nominated": 0,
        "diverged": 0,
        "divergence_rate": 0.0,
        "by_reason": {"gone": 0, "not-ready": 0, "scoring": 0},
    }
    assert isinstance(idle["divergence_rate"], float) and not math.isnan(idle["divergence_rate"])
    ca = runner.run(scenario.load(path), seed=1, mode=runner.CLUSTER_AUTOSCALER)
    assert consistency.KEY in ca.figures and ca.figures[consistency.KEY] is None


def test_json_and_one_printed_line_per_karpy_run(two_nodes: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = [str(two_nodes), "--compare", "cluster-autoscaler", "--json", str(out), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["runs"]["karpy"][consistency.KEY]["diverged"] == 2  # LeastAllocated: the scenario's
    assert doc["runs"]["cluster-autoscaler"][consistency.KEY] is None
    assert '"divergence_rate": 0.333333' in out.read_text()
    lines = [line for line in result.output.splitlines() if line.startswith("scheduler consistency")]
    assert lines == [
        "scheduler consistency (karpy): 6 nominated pods bound, 4 as nominated, 2 elsewhere "
        "(33.3%: gone 0, not-ready 0, scoring 2)"
    ]
    rows = report.table_rows(doc["runs"])
    assert ["scheduler divergence rate", "0.3333", "-"] in rows


class _Counts:
    def __init__(self, bound: int, diverged: int, divergence: dict[str, int]) -> None:
        self.bound, self.diverged, self.divergence = bound, diverged, divergence


def test_the_block_from_counts_keeps_reason_order_and_rounds_the_rate() -> None:
    block = consistency.figures(_Counts(2, 1, {"scoring": 1, "gone": 0}))
    assert block == {
        "nominated": 3,
        "bound_as_nominated": 2,
        "diverged": 1,
        "divergence_rate": 0.333333,
        "by_reason": {"gone": 0, "not-ready": 0, "scoring": 1},
    }
    assert list(block["by_reason"]) == ["gone", "not-ready", "scoring"]
    assert consistency.figures(_Counts(0, 0, {}))["divergence_rate"] == 0.0
