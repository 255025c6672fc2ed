"""Scenario files: validation errors name the field; defaults, curves, variants."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.sim import scenario, trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sim"
H = 3600.0


def base() -> dict[str, Any]:
    return {
        "kind": "Simulation",
        "name": "t",
        "duration": "1h",
        "nodePools": [
            {
                "metadata": {"name": "default"},
                "spec": {
                    "template": {
                        "spec": {
                            "nodeClassRef": {
                                "group": "karpenter.k8s.aws",
                                "kind": "EC2NodeClass",
                                "name": "default",
                            },
                            "requirements": [
                                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                            ],
                        }
                    }
                },
            }
        ],
        "nodeClasses": [
            {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": "default"},
                "spec": {
                    "role": "r",
                    "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                    "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
                },
            }
        ],
        "workloads": [
            {
                "deployment": {
                    "metadata": {"name": "web"},
                    "spec": {
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {
                                "containers": [
                                    {"name": "c", "image": "w", "resources": {"requests": {"cpu": "1"}}}
                                ]
                            },
                        }
                    },
                },
                "replicas": {"interpolate": "linear", "points": [["00:00", 1], ["08:00", 5]]},
            },
            {
                "job": {
                    "metadata": {"name": "batch"},
                    "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
                },
                "schedule": "0 3 * * *",
                "runFor": "40m",
            },
        ],
    }


def problem(raw: dict[str, Any]) -> str:
    with pytest.raises(scenario.ScenarioError) as info:
        scenario.parse(raw, file="s.yaml")
    return str(info.value.problems[0])


def edited(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    raw = base()
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return raw


def test_a_valid_scenario_gets_defaults_and_plain_values() -> None:
    sc = scenario.parse(base(), file="s.yaml")
    assert sc.start == 1_772_409_600.0  # 2026-03-02T00:00:00Z, a Monday
    assert sc.duration == H and sc.catalog == "aws:us-east-1"
    assert sc.node_pools[0]["apiVersion"] == "karpenter.sh/v1" and sc.node_pools[0]["kind"] == "NodePool"
    (web,) = sc.deployments
    assert (web.name, web.namespace, web.replicas.at(sc.start + 4 * H)) == ("web", "default", 3)
    (job,) = sc.jobs
    assert (job.schedule, job.run_for) == ("0 3 * * *", 2400.0)
    assert sc.cloud.launch_latency.p50 == 40.0 and sc.cloud.launch_latency.p95 == 75.0
    assert sc.baseline is None and sc.scoring == "LeastAllocated"


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("duraton",), "2h", "duraton: Extra inputs are not permitted"),
        (("duration",), "2 hours", 'duration: "2 hours" is not a duration'),
        (("kind",), "Simulations", "kind: must be 'Simulation'"),
        (
            ("nodePools", 0, "spec", "template", "spec", "requirements", 0, "operator"),
            "Inn",
            'nodePools[0].spec.template.spec.requirements[0].operator: "Inn" is not one of',
        ),
        (
            ("nodeClasses", 0, "kind"),
            "Foo",
            "nodeClasses[0].kind: kind must be EC2NodeClass or KWOKNodeClass",
        ),
        (
            (
                "workloads",
                0,
                "deployment",
                "spec",
                "template",
                "spec",
                "containers",
                0,
                "resources",
                "requests",
                "cpu",
            ),
            "1x",
            "workloads[0].deployment.spec.template.spec.containers[0].resources.requests[cpu]: "
            '"1x" is not a quantity',
        ),
        (
            ("workloads", 0, "replicas", "points", 1, 0),
            "8h",
            'workloads[0].replicas.points[1][0]: "8h" is not a time of day',
        ),
        (
            ("workloads", 0, "replicas", "points", 1, 0),
            "00:00",
            "workloads[0].replicas.points[1][0]: times must increase",
        ),
        (
            ("workloads", 0, "replicas", "interpolate"),
            "cubic",
            'workloads[0].replicas.interpolate: "cubic" is not one of',
        ),
        (
            ("workloads", 0, "deployment", "spec", "strategy"),
            {"type": "Blue"},
            "workloads[0].deployment.spec.strategy.type",
        ),
        (("workloads", 1, "schedule"), KeyError, "workloads[1].schedule: required for a job"),
        (
            ("workloads", 1, "schedule"),
            "at three",
            'workloads[1].schedule: "at three" is not a cron expression',
        ),
        (
            ("workloads", 1, "job", "spec", "completions"),
            0,
            "workloads[1].job.spec.completions: must be at least 1",
        ),
        (("workloads", 0, "runFor"), "1h", "workloads[0].runFor: only a job takes a schedule and runFor"),
        (
            ("cloud",),
            {"launchLatency": {"p50": "60s", "p95": "30s"}},
            "cloud.launchLatency.p95: need 0 < p50 <= p95",
        ),
        (
            ("cloud",),
            {"insufficientCapacity": [{"instanceType": "m5.large", "from": "09:00", "until": "08:00"}]},
            "cloud.insufficientCapacity[0].until: must be after from",
        ),
        (("pricing",), {"spotRatio": 1.5}, "pricing.spotRatio: must be between 0 and 1"),
        (("catalog",), "nowhere.yaml", 'catalog: "nowhere.yaml": no such file'),
        (
            ("baseline",),
            {
                "clusterAutoscaler": {
                    "nodeGroups": [{"name": "g", "instanceTypes": ["m5.large"], "min": 3, "max": 2}]
                }
            },
            "baseline.clusterAutoscaler.nodeGroups[0].min: must not exceed max",
        ),
        (
            ("baseline",),
            {
                "clusterAutoscaler": {
                    "nodeGroups": [{"name": "g", "instanceTypes": ["m5.large"]}],
                    "scanIntervall": "5s",
                }
            },
            "baseline.clusterAutoscaler.scanIntervall: unknown field",
        ),
    ],
)
def test_errors_name_the_file_and_the_field(path: tuple[Any, ...], value: Any, expected: str) -> None:
    text = problem(edited(path, value))
    assert text.startswith("s.yaml: ")
    assert expected in text


def test_a_malformed_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Simulation\nname: [x\n")
    with pytest.raises(scenario.ScenarioError, match=r"bad.yaml.*YAML syntax error at line"):
        scenario.load(bad)


def test_unquoted_times_of_day_are_not_sexagesimal_numbers(tmp_path: Path) -> None:
    raw = base()
    text = yaml.safe_dump(raw).replace("'00:00'", "00:00").replace("'08:00'", "08:00")
    assert "- 08:00" in text
    path = tmp_path / "s.yaml"
    path.write_text(text)
    sc = scenario.load(path)
    assert sc.deployments[0].replicas.points[1] == (8 * H, 5)


def test_replicas_from_a_csv_next_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "web.csv").write_text("time,replicas\n00:00,2\n12:00,10\n")
    raw = edited(("workloads", 0, "replicas"), {"csv": "web.csv", "interpolate": "step"})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    sc = scenario.load(path)
    assert sc.deployments[0].replicas.interpolate == trace.STEP
    assert sc.deployments[0].replicas.at(sc.start + 13 * H) == 10
    raw["workloads"][0]["replicas"] = "missing.csv"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(scenario.ScenarioError, match=r"workloads\[0\].replicas: .*missing.csv"):
        scenario.load(path)


def test_variants_for_ablations_and_compare_with() -> None:
    sc = scenario.parse(base(), file="s.yaml")
    pool = sc.ablated(no_spot=True, no_consolidation=True).node_pools[0]
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    assert reqs == [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    assert pool["spec"]["disruption"]["consolidateAfter"] == "Never"
    assert sc.node_pools[0]["spec"]["template"]["spec"]["requirements"][0]["values"] == ["spot"]  # untouched
    other_raw = copy.deepcopy(base())
    other_raw["name"] = "tuned"
    other_raw["nodePools"][0]["metadata"]["name"] = "tuned"
    variant = sc.with_karpy_config(scenario.parse(other_raw, file="o.yaml"))
    assert variant.name == "tuned" and variant.node_pools[0]["metadata"]["name"] == "tuned"
    assert variant.deployments == sc.deployments


def test_ice_windows_repeat_daily_over_the_run() -> None:
    raw = base()
    raw["duration"] = "48h"
    raw["cloud"] = {
        "insufficientCapacity": [
            {"instanceType": "m5.large", "zone": "us-east-1a", "from": "08:00", "until": "09:00"}
        ]
    }
    sc = scenario.parse(raw, file="s.yaml")
    windows = sc.ice_windows()
    assert [(w.start - sc.start, w.end - sc.start) for w in windows] == [(8 * H, 9 * H), (32 * H, 33 * H)]
    assert windows[0].zone == "us-east-1a" and windows[0].capacity_type == ""


# examples that are only the NodePools of a --compare-with run, not a trace of their own
TWINS = {
    "daemonset-heavy-usable-price.yaml": "daemonset-heavy.yaml",
    "hospital-booking-spikes-headroom.yaml": "hospital-booking-spikes.yaml",
    "payments-rollouts-guard.yaml": "payments-rollouts.yaml",
}


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.yaml") if p.name not in TWINS))
def test_the_shipped_examples_load(name: str) -> None:
    sc = scenario.load(EXAMPLES / name)
    assert sc.deployments and sc.baseline is not None


@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_compare_with_twin_loads_and_differs_only_in_its_nodepools(name: str) -> None:
    twin, main = scenario.load(EXAMPLES / name), scenario.load(EXAMPLES / TWINS[name])
    assert twin.node_pools and not twin.deployments
    names = [p["metadata"]["name"] for p in twin.node_pools]
    assert names == [p["metadata"]["name"] for p in main.node_pools]
    assert twin.node_pools != main.node_pools
