"""The trace format ``karpy record`` writes, read by the simulator: absolute replica curves and
rollouts, StatefulSets, bare pods, Job runs, ``initialState.pods: false`` and the ``recorded``
block; a malformed trace is one located line and exit 2 (``karpy backtest``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import NODE_CLASS, node_pool
from typer.testing import CliRunner

from karpy.adapters.memory import MemoryKube
from karpy.api import common
from karpy.cli import app
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim import recorded, runner, statefulsets, trace
from karpy.sim import scenario as scenario_mod
from karpy.sim.workloads import Workloads

T0 = common.parse_time("2026-03-02T07:00:00Z")
NS = "shop"


def _at(minutes: float) -> str:
    return f"2026-03-02T{7 + int(minutes // 60):02d}:{int(minutes % 60):02d}:00Z"


def _template(app: str, cpu: str = "500m") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": app, "image": f"{app}:1", "resources": {"requests": {"cpu": cpu}}}]},
    }


def _trace() -> dict[str, Any]:
    return {
        "kind": "Simulation",
        "name": "recorded",
        "start": _at(0),
        "duration": "1h",
        "nodePools": [node_pool()],
        "nodeClasses": [NODE_CLASS],
        "cloud": {"launchLatency": {"distribution": "fixed", "p50": "30s"}},
        "workloads": [
            {
                "deployment": {
                    "metadata": {"name": "web", "namespace": NS},
                    "spec": {"template": _template("web")},
                },
                "replicas": {"interpolate": "step", "points": [[_at(0), 2], [_at(10), 5], [_at(40), 1]]},
                "rollouts": [_at(20)],
            },
            {
                "statefulSet": {
                    "metadata": {"name": "db", "namespace": NS},
                    "spec": {"template": _template("db"), "podManagementPolicy": "Parallel"},
                },
                "replicas": {"interpolate": "step", "points": [[_at(0), 1], [_at(30), 3]]},
            },
            {
                "job": {
                    "metadata": {"name": "batch", "namespace": NS},
                    "spec": {"completions": 2, "parallelism": 2, "template": _template("batch")},
                },
                "runs": [{"at": _at(5), "runFor": "10m", "name": "batch-1"}, {"at": _at(50), "runFor": "5m"}],
            },
            {
                "pod": {
                    "metadata": {"name": "debug", "namespace": "ops"},
                    "spec": _template("debug")["spec"],
                },
                "runs": [{"at": _at(15), "deleteAt": _at(25)}, {"at": _at(30), "runFor": "5m"}],
            },
        ],
        "recorded": {
            "autoscaler": "karpenter",
            "figures": {"pendingSeconds": {"p50": 1.0, "p95": 30.0}, "podsCreated": 12},
            "nodes": [
                {
                    "name": "n1",
                    "launched": _at(0),
                    "registered": _at(0),
                    "instanceType": "m6i.large",
                    "zone": "us-east-1a",
                    "capacityType": "on-demand",
                },
                {
                    "name": "n2",
                    "launched": _at(10),
                    "registered": _at(11),
                    "ready": _at(11),
                    "deleted": _at(40),
                    "instanceType": "m6i.xlarge",
                    "zone": "us-east-1b",
                },
            ],
        },
    }


def _parse(raw: dict[str, Any]) -> scenario_mod.Scenario:
    return scenario_mod.parse(raw, file="trace.yaml")


def _errors(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(scenario_mod.ScenarioError) as caught:
        _parse(raw)
    return [str(p) for p in caught.value.problems]


def test_a_recorded_trace_parses_into_the_simulator_values() -> None:
    sc = _parse(_trace())
    web = sc.deployments[0]
    assert not web.replicas.daily and web.replicas.interpolate == "step"
    assert [web.replicas.at(T0 + m * 60) for m in (0, 9, 10, 39, 40, 90)] == [2, 2, 5, 5, 1, 1]
    assert web.rollouts == () and web.rollout_times == (T0 + 1200,)
    (db,) = sc.statefulsets
    assert db.parallel and db.replicas.at(T0 + 1800) == 3
    (job,) = sc.jobs
    assert job.schedule == "" and [(r.name, r.run_for) for r in job.runs] == [
        ("batch-1", 600.0),
        (f"batch-{int((T0 + 3000) // 60)}", 300.0),
    ]
    (pod,) = sc.pods
    assert pod.pod_name(1) == "debug"
    assert pod.runs == (trace.PodRun(T0 + 900, None, T0 + 1500), trace.PodRun(T0 + 1800, 300.0, None))
    assert sc.recorded is not None and sc.recorded.figures["pods_created"] == 12
    assert [n.capacity_type for n in sc.recorded.nodes] == ["on-demand", "on-demand"]


def test_the_recorded_figures_come_from_the_nodes() -> None:
    sc = _parse(_trace())
    assert sc.recorded is not None
    prices = {"m6i.large": 0.1, "m6i.xlarge": 0.2}
    figures = recorded.figures(sc.recorded, start=T0, end=T0 + 3600, price=lambda it, _z, _c: prices[it])
    assert figures["node_hours"] == pytest.approx(1.5)  # n1 the whole hour, n2 30 minutes
    assert figures["cost_usd"] == pytest.approx(0.1 + 0.1)
    assert figures["peak_nodes"] == 2 and figures["nodes_created"] == 1  # n1 was there at the start
    assert figures["churn_per_hour"] == {"created": 1.0}
    assert figures["pending_seconds"] == {"p50": 1.0, "p95": 30.0}
    series = figures["series"]
    assert series["t"][:2] == [0.0, 60.0] and series["t"][-1] == 3600.0
    assert series["nodes"][10] == 1 and series["nodes"][11] == 2 and series["nodes"][40] == 1
    assert series["cost"][-1] == pytest.approx(0.2)


def test_the_trace_runs_its_statefulsets_bare_pods_and_job_runs() -> None:
    sc = _parse(_trace())
    seen: list[tuple[float, str, str, str]] = []

    def keep(at: float, event: Any) -> None:
        if event.kind == "Pod" and event.type in ("ADDED", "DELETED"):
            seen.append(
                (at - T0, event.type, event.obj["metadata"]["namespace"], event.obj["metadata"]["name"])
            )

    result = runner.run(sc, seed=1, observe=[keep])
    added = [(t, name) for t, kind, _ns, name in seen if kind == "ADDED"]
    assert [name for t, name in added if t == 0 and name.startswith("db-")] == ["db-0"]
    assert sorted(name for t, name in added if t == 1800 and name.startswith("db-")) == ["db-1", "db-2"]
    assert [name for t, name in added if name.startswith("batch-1-")] == ["batch-1-0", "batch-1-1"]
    assert all(t == 300 for t, name in added if name.startswith("batch-1-"))
    assert [t for t, name in added if name == "debug"] == [900, 1800]
    assert (1500, "DELETED", "ops", "debug") in seen
    web_at_10m = {name for t, name in added if t == 600 and name.startswith("web-")}
    assert len(web_at_10m) == 3
    assert result.figures["pods_created"] >= 2 + 3 + 3 + 4 + 2


def test_a_statefulset_is_ordered_unless_parallel() -> None:
    plan = statefulsets.plan
    ready, starting, going = (
        statefulsets.Ordinal(r, g) for r, g in ((True, False), (False, False), (True, True))
    )
    assert plan(3, {}, parallel=False) == ([0], [])
    assert plan(3, {0: ready}, parallel=False) == ([1], [])
    assert plan(3, {0: starting}, parallel=False) == ([], [])
    assert plan(3, {}, parallel=True) == ([0, 1, 2], [])
    assert plan(1, {0: ready, 1: ready, 2: ready}, parallel=False) == ([], [2])
    assert plan(1, {0: ready, 1: ready, 2: going}, parallel=False) == ([], [])
    assert plan(1, {0: ready, 1: ready, 2: ready}, parallel=True) == ([], [2, 1])
    assert plan(2, {1: ready}, parallel=False) == ([0], [])  # a lost pod comes back first


def test_an_ordered_statefulset_creates_the_next_pod_once_the_one_before_is_ready() -> None:
    loop = Loop(start=T0)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    workloads = Workloads(kube, clock, loop=loop, ready_after=10.0)
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {}})
    binds: list[str] = []

    def bind(event: Any) -> None:  # a scheduler that binds at once
        spec = event.obj.get("spec") or {}
        if event.kind == "Pod" and event.type == "ADDED" and not spec.get("nodeName"):
            binds.append(event.obj["metadata"]["name"])
            loop.call_later(0.0, lambda name=event.obj["metadata"]["name"]: kube.bind(name, NS, "n"))

    kube.watch(bind)
    workloads.set_statefulset("db", NS, template=_template("db"), replicas=3)
    loop.run(T0 + 5)
    assert binds == ["db-0"]
    loop.run(T0 + 15)
    assert binds == ["db-0", "db-1"]
    loop.run(T0 + 40)
    assert binds == ["db-0", "db-1", "db-2"]
    owner = kube.get("Pod", "db-2", NS)["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("StatefulSet", "db")
    assert kube.get("StatefulSet", "db", NS)["status"]["readyReplicas"] == 3
    gone: list[str] = []
    kube.watch(
        lambda e: gone.append(e.obj["metadata"]["name"]) if e.kind == "Pod" and e.type == "DELETED" else None
    )
    workloads.scale("db", NS, replicas=1, kind="StatefulSet")
    loop.run(T0 + 41)
    assert gone == ["db-2", "db-1"]  # the highest ordinal first
    assert [p["metadata"]["name"] for p in kube.objects("Pod")] == ["db-0"]
    kube.delete("Pod", "db-0", NS)
    loop.run(T0 + 43)
    assert [p["metadata"]["name"] for p in kube.objects("Pod")] == ["db-0"]  # back under its name


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (
            ("workloads", 0, "replicas", "points", 1, 0),
            "07:10",
            "points[1][0]: mixes times of day and RFC3339 times",
        ),
        (("workloads", 0, "replicas", "points", 1, 0), "1970-01-01T01:00:00Z", "is too early"),
        (("workloads", 0, "replicas", "points", 2, 0), _at(5), "points[2][0]: times must increase"),
        (("workloads", 1, "rollouts"), [_at(5)], "workloads[1].rollouts: only a deployment takes rollouts"),
        (
            ("workloads", 2, "runs", 0, "deleteAt"),
            _at(9),
            "runs[0].deleteAt: only a pod's run takes deleteAt",
        ),
        (("workloads", 2, "schedule"), "0 3 * * *", "workloads[2].schedule: give either schedule or runs"),
        (("workloads", 3, "runs", 0, "deleteAt"), _at(1), "runs[0].deleteAt: must not be before at"),
        (("workloads", 3, "runs", 1, "name"), "x", "runs[1].name: only a job's run takes a name"),
        (("workloads", 3, "runs"), [], "workloads[3].runs: needs at least one run"),
        (("workloads", 1, "statefulSet", "spec", "podManagementPolicy"), "Random", "podManagementPolicy"),
        (("recorded", "autoscaler"), "nomad", 'recorded.autoscaler: "nomad" is not one of'),
        (("recorded", "nodes", 1, "capacityType"), "reserved", "recorded.nodes[1].capacityType"),
        (
            ("recorded", "nodes", 1, "deleted"),
            _at(5),
            "recorded.nodes[1].deleted: must not be before launched",
        ),
        (("recorded", "figures", "nodeHourz"), 1, "recorded.figures.nodeHourz"),
    ],
)
def test_a_malformed_trace_names_the_field(path: tuple[Any, ...], value: Any, expected: str) -> None:
    raw = _trace()
    here: Any = raw
    for key in path[:-1]:
        here = here[key]
    here[path[-1]] = value
    found = _errors(raw)
    assert any(expected in line for line in found), found
    assert all(line.startswith('trace.yaml: document 0 (Simulation "recorded"): ') for line in found)


def test_backtest_of_a_malformed_trace_is_exit_2_naming_the_field(tmp_path: Path) -> None:
    raw = _trace()
    raw["recorded"]["nodes"][0]["launched"] = "yesterday"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(app, ["backtest", str(bad)])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f'error: {bad}: document 0 (Simulation "recorded"): recorded.nodes[0].launched: '
    )
    assert "yesterday" in result.stderr and len(result.stderr.splitlines()) == 1
    plain = copy.deepcopy(raw)
    del plain["recorded"]
    (tmp_path / "plain.yaml").write_text(yaml.safe_dump(plain))
    result = CliRunner().invoke(app, ["backtest", str(tmp_path / "plain.yaml")])
    assert result.exit_code == 2 and "plain.yaml: recorded: required" in result.stderr
