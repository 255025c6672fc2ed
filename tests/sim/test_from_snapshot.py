"""Simulations that start from a ``karpy snapshot`` folder (examples/snapshot/: 3 nodes, 5 bound
pods, 2 pending pods, a DaemonSet, a PDB; the scenario examples/sim/from-snapshot.yaml)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from karpy import catalog as catalog_mod
from karpy.adapters.memory import MemoryKube
from karpy.cli.simulate_cmd import simulate
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim import adopt, initial, runner, scenario
from karpy.sim.snapshot_pods import Rule, SnapshotPods

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "examples" / "snapshot"
SCENARIO = ROOT / "examples" / "sim" / "from-snapshot.yaml"
SMALL = ROOT / "examples" / "sim" / "small.yaml"
IDLE = "ip-10-0-3-88.ec2.internal"  # the c6i.2xlarge: only a DaemonSet pod runs on it
NODES = {"ip-10-0-1-17.ec2.internal", "ip-10-0-2-41.ec2.internal", IDLE}

app = typer.Typer()
app.command()(simulate)


@pytest.fixture(scope="module")
def from_snapshot() -> scenario.Scenario:
    return scenario.load(SCENARIO)


@pytest.fixture(scope="module")
def karpy_run(from_snapshot: scenario.Scenario) -> runner.RunResult:
    return runner.run(from_snapshot, seed=2)


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, folder)
    return folder


def _append(path: Path, obj: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write("---\n" + yaml.safe_dump(obj))


def test_the_run_starts_with_the_snapshot_nodes_and_pods(karpy_run: runner.RunResult) -> None:
    r = karpy_run.figures
    assert r["series"]["t"][0] == 0 and r["series"]["nodes"][0] == 3
    assert r["initial_state"] == {
        "nodes": 3,
        "nodes_by_instance_type": {"c6i.2xlarge": 1, "m6i.xlarge": 2},
        "pods_bound": 5,  # coredns and web (the DaemonSet's pods come from its stand-in)
        "pods_pending": 2,
        "nodes_left_out": 0,
        "pods_left_out": 0,
    }
    at_start = {b.node: b for b in karpy_run.billing if b.launched_at == karpy_run.start}
    assert set(at_start) == NODES
    on_demand = at_start["ip-10-0-1-17.ec2.internal"]
    assert (on_demand.instance_type, on_demand.zone, on_demand.capacity_type) == (
        "m6i.xlarge",
        "us-east-1a",
        "on-demand",
    )
    assert on_demand.price_per_hour == pytest.approx(0.192)  # the catalog's price of that offering
    assert at_start[IDLE].capacity_type == "spot"
    assert karpy_run.warnings == []


def test_pending_pods_are_bound_and_the_idle_node_is_consolidated(karpy_run: runner.RunResult) -> None:
    r = karpy_run.figures
    assert r["pods_never_scheduled"] == 0 and r["pods_pending_at_end"] == 0
    assert r["pending_seconds"]["max"] is not None
    idle = next(b for b in karpy_run.billing if b.node == IDLE)
    assert idle.terminated_at is not None and idle.terminated_at - karpy_run.start < 600
    assert r["disruptions"].get("empty", 0) >= 1
    assert ("NodeClaim", "default-t2v8w", "DisruptionTerminating") in {e[1:] for e in karpy_run.events}
    # nodes_created counts launches during the run, not the snapshot's nodes
    launched = [b for b in karpy_run.billing if b.node not in NODES]
    assert r["nodes_created"] == len(launched) and r["nodes_removed"] >= 1


def test_the_snapshot_nodepools_are_used_when_the_scenario_has_none(
    from_snapshot: scenario.Scenario, karpy_run: runner.RunResult
) -> None:
    assert [p["metadata"]["name"] for p in from_snapshot.node_pools] == ["default"]
    assert [c["metadata"]["name"] for c in from_snapshot.node_classes] == ["default"]
    assert "status" not in from_snapshot.node_pools[0]
    assert "resourceVersion" not in from_snapshot.node_pools[0]["metadata"]
    assert [d["metadata"]["name"] for d in from_snapshot.daemon_sets] == ["node-agent"]
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in from_snapshot.objects)
    assert kinds == [("Namespace", "kube-system"), ("Namespace", "shop"), ("PodDisruptionBudget", "web")]
    # the new nodes of the run are NodeClaims of the snapshot's NodePool
    launched = [b.node for b in karpy_run.billing if b.node not in NODES]
    assert launched and all(name.startswith("default-") for name in launched)


def test_the_scenario_nodepools_win_over_the_snapshot(tmp_path: Path) -> None:
    doc = yaml.safe_load(SMALL.read_text())
    doc["initialState"] = {"snapshot": str(SNAPSHOT)}
    doc["nodePools"][0]["metadata"]["name"] = "own"
    doc["workloads"] = []
    doc["duration"] = "5m"
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(doc))
    own = scenario.load(path)
    assert [p["metadata"]["name"] for p in own.node_pools] == ["own"]
    result = runner.run(own, seed=1)
    assert result.figures["series"]["nodes"][0] == 3
    assert any("NodePool default is not in the simulation" in w for w in result.warnings)
    assert all(w.startswith(f"{SNAPSHOT}/nodes.yaml: Node ") for w in result.warnings)


def test_the_cluster_autoscaler_baseline_starts_from_the_same_nodes(
    from_snapshot: scenario.Scenario,
) -> None:
    result = runner.run(from_snapshot, seed=2, mode=runner.CLUSTER_AUTOSCALER)
    r = result.figures
    assert r["series"]["nodes"][0] == 3
    assert r["initial_state"]["nodes_by_instance_type"] == {"c6i.2xlarge": 1, "m6i.xlarge": 2}
    assert {b.node for b in result.billing if b.launched_at == result.start} == NODES
    assert r["pods_pending_at_end"] == 0
    idle = next(b for b in result.billing if b.node == IDLE)
    assert idle.terminated_at is not None  # CA scales the idle node's group down


def test_cluster_autoscaler_gets_one_node_group_per_instance_and_capacity_type(
    from_snapshot: scenario.Scenario,
) -> None:
    state = from_snapshot.initial
    assert state is not None and from_snapshot.baseline is not None
    catalog = catalog_mod.PerNodeClass("aws:us-east-1").catalog(None)
    start = adopt.prepare(
        state,
        catalog,
        mode=runner.CLUSTER_AUTOSCALER,
        node_pools=(),
        daemon_sets=from_snapshot.daemon_sets,
        traced=[],
        baseline=from_snapshot.baseline,
        now=from_snapshot.start,
    )
    groups = {g.name: g for g in start.ca_groups}
    assert set(groups) == {
        "snapshot-c6i.2xlarge-spot",
        "snapshot-m6i.xlarge-on-demand",
        "snapshot-m6i.xlarge-spot",
    }
    assert all(g.min == 0 and g.max == 1 and g.priority < 0 for g in groups.values())
    assert groups["snapshot-m6i.xlarge-spot"].zones == ("us-east-1b",)
    config = start.ca_config(from_snapshot.baseline)
    assert config.node_groups[0].name == "general"
    labels = {n.name: n.node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] for n in start.nodes}
    assert labels[IDLE] == "snapshot-c6i.2xlarge-spot"
    assert all(n.claim is None for n in start.nodes)


def test_what_the_simulator_cannot_take_is_one_warning_each_and_the_run_goes_on(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    nodes = folder / "nodes.yaml"
    nodes.write_text(nodes.read_text().replace("c6i.2xlarge", "x9z.huge"))
    rollout = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "canary-1",
            "namespace": "shop",
            "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "canary"}],
        },
        "spec": {"containers": [{"name": "c", "image": "c:1", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    _append(folder / "pods.yaml", rollout)
    _append(
        folder / "persistentvolumeclaims.yaml",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "shop"},
        },
    )
    sc = scenario.load(SCENARIO, snapshot=folder)
    result = runner.run(sc, seed=1, until=900)
    assert result.warnings == [
        f"{folder}/persistentvolumeclaims.yaml: 1 PersistentVolumeClaim left out "
        "(the simulator does not model volumes)",
        f'{folder}/nodes.yaml: Node "{IDLE}": instance type x9z.huge is not in the catalog '
        "aws:us-east-1: left out",
        f'{folder}/pods.yaml: Pod "shop/canary-1": owned by Rollout canary, which the simulator '
        "does not run: kept, not replaced when it goes",
    ]
    r = result.figures
    assert r["initial_state"]["nodes"] == 2 and r["initial_state"]["nodes_left_out"] == 1
    assert r["initial_state"]["pods_pending"] == 3  # the two api pods and the canary
    assert r["pods_pending_at_end"] == 0


def test_a_broken_snapshot_file_is_exit_2_naming_file_object_and_field(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    pods = folder / "pods.yaml"
    pods.write_text(pods.read_text().replace("cpu: 500m", "cpu: lots", 1))
    result = CliRunner().invoke(app, [str(SCENARIO), "--from-snapshot", str(folder), "--no-progress"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert f"{folder}/pods.yaml: document " in lines[0]
    assert 'Pod "shop/web-7c9f8b6d4f-' in lines[0]
    assert "spec.containers[0].resources.requests[cpu]" in lines[0] and '"lots"' in lines[0]


def test_a_missing_snapshot_folder_is_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = CliRunner().invoke(app, [str(SCENARIO), "--from-snapshot", str(missing), "--no-progress"])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {missing}") and "no such snapshot folder" in result.output


def test_from_snapshot_on_the_command_line_with_the_same_json_twice(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    for out in (first, second):
        args = [str(SMALL), "--from-snapshot", str(SNAPSHOT), "--until", "10m", "--json", str(out)]
        result = CliRunner().invoke(app, [*args, "--no-progress"])
        assert result.exit_code == 0, result.output
    assert first.read_text() == second.read_text()
    assert '"initial_state"' in first.read_text()


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "namespaces.yaml").write_text("---\nkind: Namespace\nmetadata: {name: [x\n")
    with pytest.raises(initial.SnapshotError) as caught:
        initial.read(folder)
    assert str(caught.value).startswith(f"{folder}/namespaces.yaml: document 0: YAML syntax error at line")


# -- the controllers of the snapshot's pods ------------------------------------------------------


def _pod(name: str, node: str = "", owner: str = "ReplicaSet") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": owner, "name": "web-abc", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "w", "image": "w:1"}], **({"nodeName": node} if node else {})},
        "status": {"phase": "Running" if node else "Pending"},
    }


def _world() -> tuple[MemoryKube, Loop, SnapshotPods]:
    loop = Loop(start=1000.0)
    kube = MemoryKube(LoopClock(loop))
    kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    return kube, loop, SnapshotPods(kube, LoopClock(loop), loop, ready_after=lambda _pod, _node: 7.0)


def _names(kube: MemoryKube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.list("Pod"))


def test_a_replicaset_pod_that_goes_is_replaced_and_its_replacement_started_when_bound() -> None:
    kube, loop, pods = _world()
    pods.create(_pod("web-abc-1", node="n1"), Rule(prefix="web-abc-"))
    kube.evict("web-abc-1", "shop")
    loop.run(1000.0)
    assert _names(kube) == ["web-abc-r00001"] and pods.pods_created == 1
    new = kube.get("Pod", "web-abc-r00001", "shop")
    assert "nodeName" not in new["spec"] and new["status"]["phase"] == "Pending"
    kube.bind("web-abc-r00001", "shop", "n1")
    loop.run(1006.0)
    assert kube.get("Pod", "web-abc-r00001", "shop")["status"]["phase"] == "Pending"
    loop.run(1007.0)
    assert kube.get("Pod", "web-abc-r00001", "shop")["status"]["phase"] == "Running"
    assert [(s.pod, s.node, s.ready - s.bound) for s in pods.started] == [("shop/web-abc-r00001", "n1", 7.0)]


def test_pods_of_a_deleted_node_are_collected_and_only_controller_pods_come_back() -> None:
    kube, loop, pods = _world()
    pods.create(_pod("web-abc-1", node="n1"), Rule(prefix="web-abc-"))
    pods.create(_pod("db-0", node="n1", owner="StatefulSet"), Rule(same_name=True))
    pods.create(_pod("bare", node="n1", owner="Node"), Rule())
    kube.delete("Node", "n1")
    loop.run(1000.0)
    assert _names(kube) == ["db-0", "web-abc-r00001"]
    assert all(not p["spec"].get("nodeName") for p in kube.list("Pod"))
