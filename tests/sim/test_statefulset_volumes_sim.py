"""examples/sim/statefulset-volumes.yaml: StatefulSets with zonal claims, run with karpy and with
the Cluster Autoscaler model. What the run's API server saw is checked independently of the
simulator's own counts: every pod lands in its volumes' zone, also when it is moved."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from karpy.api import simulation as schema
from karpy.catalog import load as load_catalog
from karpy.model import labels as wk
from karpy.ports import WatchEvent
from karpy.sim import runner, scenario
from karpy.sim.scenario import ScenarioError

EXAMPLE = Path(__file__).parents[2] / "examples" / "sim" / "statefulset-volumes.yaml"
STATEFUL = ("postgres", "kafka", "cache")


@dataclass
class Seen:
    """What a watcher of the run's API server saw: where each volume and node is, each binding."""

    volume_zone: dict[str, str] = field(default_factory=dict)  # PersistentVolume -> its zone
    claim_volume: dict[str, str] = field(default_factory=dict)  # namespace/claim -> volume name
    node_zone: dict[str, str] = field(default_factory=dict)
    node_type: dict[str, str] = field(default_factory=dict)
    csi_limit: dict[str, int] = field(default_factory=dict)  # CSINode -> its EBS count
    bound: dict[str, str] = field(default_factory=dict)  # pod -> its node now
    pinned: set[str] = field(default_factory=set)  # pods whose claims were bound when they were made
    # pod, node, its volumes' zones, pinned (its claims were bound when it was made), when
    bindings: list[tuple[str, str, list[str], bool, float]] = field(default_factory=list)

    def __call__(self, at: float, event: WatchEvent) -> None:
        obj, meta = event.obj, event.obj.get("metadata") or {}
        name, namespace = meta.get("name", ""), meta.get("namespace") or "default"
        spec = obj.get("spec") or {}
        if event.kind == "PersistentVolume" and event.type == "ADDED":
            (term,) = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
            self.volume_zone[name] = term["matchExpressions"][0]["values"][0]
        elif event.kind == "PersistentVolumeClaim" and event.type == "DELETED":
            self.claim_volume.pop(f"{namespace}/{name}", None)
        elif event.kind == "PersistentVolumeClaim" and spec.get("volumeName"):
            self.claim_volume[f"{namespace}/{name}"] = spec["volumeName"]
        elif event.kind == "Node" and event.type == "ADDED":
            self.node_zone[name] = meta["labels"][wk.ZONE]
            self.node_type[name] = meta["labels"][wk.INSTANCE_TYPE]
        elif event.kind == "CSINode" and event.type == "ADDED":
            (driver,) = spec["drivers"]
            self.csi_limit[name] = driver["allocatable"]["count"]
        elif event.kind == "Pod":
            self._pod(f"{namespace}/{name}", event.type, spec, at)

    def _pod(self, key: str, kind: str, spec: Mapping[str, Any], at: float) -> None:
        namespace = key.split("/")[0]
        claims = [
            v["persistentVolumeClaim"]["claimName"]
            for v in spec.get("volumes") or []
            if "persistentVolumeClaim" in v
        ]
        volumes = [self.claim_volume.get(f"{namespace}/{c}", "") for c in claims]
        if kind == "ADDED" and claims and all(volumes):
            self.pinned.add(key)
        node = spec.get("nodeName") or ""
        if kind == "DELETED" or not node:
            self.bound.pop(key, None)
            if kind == "DELETED":
                self.pinned.discard(key)
            return
        if self.bound.get(key) == node:
            return
        self.bound[key] = node
        zones = [self.volume_zone[v] for v in volumes if v]
        self.bindings.append((key, node, zones, key in self.pinned, at))


def _run(mode: str) -> tuple[runner.RunResult, Seen]:
    seen = Seen()
    result = runner.run(scenario.load(EXAMPLE), seed=1, mode=mode, observe=[seen])
    return result, seen


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[runner.RunResult, Seen]]:
    return {mode: _run(mode) for mode in runner.MODES}


@pytest.mark.parametrize("mode", runner.MODES)
def test_every_pod_runs_in_its_volumes_zone_also_when_it_is_moved(
    runs: dict[str, tuple[runner.RunResult, Seen]], mode: str
) -> None:
    result, seen = runs[mode]
    stateful = [b for b in seen.bindings if b[0].split("/")[1].rsplit("-", 1)[0] in STATEFUL]
    assert {b[0] for b in stateful} >= {f"data/postgres-{i}" for i in range(3)}
    for pod, node, zones, *_ in stateful:
        assert zones, f"{pod} bound to {node} without its volume"
        assert set(zones) == {seen.node_zone[node]}, f"{pod} bound to {node} outside its volume's zone"
    pinned = [b for b in stateful if b[3]]  # made again with its claims bound: moved or scaled up again
    assert len({b[0] for b in pinned}) >= 5
    assert {b[0].split("/")[1].rsplit("-", 1)[0] for b in pinned} >= {"postgres", "kafka"}
    morning = result.start + 14 * 3600.0  # 07:00, when kafka scales up again onto its kept claims
    assert [b for b in pinned if b[4] < morning]  # moved at night: consolidation or a spot interruption
    volumes = result.figures["volumes"]
    assert volumes["cross_zone_bindings"] == 0
    assert volumes["pinned_pods_bound"] == len(pinned)
    assert sorted(volumes) == [
        "claims_created",
        "cross_zone_bindings",
        "pinned_pending_seconds",
        "pinned_pods_bound",
        "pods_waited_for_attach_limit",
        "pods_waited_for_claims",
        "pods_waited_for_volume_zone",
        "volumes_by_zone",
        "volumes_deleted",
        "volumes_provisioned",
    ]
    assert volumes["volumes_by_zone"] == dict(sorted(Counter(seen.volume_zone.values()).items()))
    assert len(set(seen.volume_zone.values())) == 3  # postgres and kafka spread over the three zones
    # postgres 3, kafka 6 (kept through the night), cache 4 at 17:00 and its 2 deleted ones anew at 07:30
    assert volumes["claims_created"] == 3 + 6 + 4 + 2
    assert volumes["volumes_deleted"] == 2  # cache's whenScaled: Delete at 18:30


def test_a_pod_that_waited_for_room_in_its_volumes_zone_is_counted(
    runs: dict[str, tuple[runner.RunResult, Seen]],
) -> None:
    waited = {mode: r.figures["volumes"]["pods_waited_for_volume_zone"] for mode, (r, _) in runs.items()}
    assert all(n > 0 for n in waited.values()), waited  # after a spot interruption / a scale-down
    ca = runs[runner.CLUSTER_AUTOSCALER][0].figures
    assert ca["pods_never_scheduled"] == 0  # CA grew the group in the pinned zone


def test_each_node_has_a_csinode_with_its_instance_types_ebs_limit(
    runs: dict[str, tuple[runner.RunResult, Seen]],
) -> None:
    catalog = {it.name: it for it in load_catalog("aws:us-east-1").instance_types}
    for _result, seen in runs.values():
        assert set(seen.csi_limit) == set(seen.node_type)
        for node, limit in seen.csi_limit.items():
            assert limit == catalog[seen.node_type[node]].volume_limits["ebs.csi.aws.com"]


def test_the_same_seed_gives_the_same_json(runs: dict[str, tuple[runner.RunResult, Seen]]) -> None:
    again, _ = _run(runner.CLUSTER_AUTOSCALER)
    first = runs[runner.CLUSTER_AUTOSCALER][0]
    assert json.dumps(again.figures, sort_keys=True) == json.dumps(first.figures, sort_keys=True)


# -- the scenario file ----------------------------------------------------------------------------


def _scenario(**spec: Any) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"app": "db"}},
        "spec": {"containers": [{"name": "db", "image": "db"}]},
    }
    return {
        "kind": "Simulation",
        "name": "s",
        "workloads": [
            {
                "statefulSet": {"metadata": {"name": "db"}, "spec": {"template": template, **spec}},
                "replicas": 1,
            }
        ],
    }


def test_claims_without_a_storage_class_get_eks_gp2_as_the_default() -> None:
    sc = scenario.parse(_scenario(volumeClaimTemplates=[{"metadata": {"name": "data"}}]))
    (gp2,) = sc.objects
    assert (gp2["kind"], gp2["metadata"]["name"], gp2["provisioner"]) == (
        "StorageClass",
        "gp2",
        "kubernetes.io/aws-ebs",
    )
    assert gp2["volumeBindingMode"] == "WaitForFirstConsumer"
    assert sc.has_storage
    (db,) = sc.statefulsets
    assert db.claims is not None and db.claims.names("db", 2) == ["data-db-2"]
    assert not scenario.parse(_scenario()).has_storage  # no claims: no storage stand-ins, no class


def test_a_bad_claim_template_is_one_line_naming_the_field() -> None:
    with pytest.raises(ScenarioError) as raised:
        scenario.parse(_scenario(volumeClaimTemplates=[{"spec": {}}]), file="s.yaml")
    assert [str(p) for p in raised.value.problems] == [
        's.yaml: document 0 (Simulation "s"): '
        "workloads[0].statefulSet.spec.volumeClaimTemplates[0].metadata.name: "
        "required (the pod's volume and claim are named after it)"
    ]
    with pytest.raises(ScenarioError) as raised:
        scenario.parse(_scenario(persistentVolumeClaimRetentionPolicy={"whenScaled": "Keep"}), file="s.yaml")
    assert "persistentVolumeClaimRetentionPolicy.whenScaled" in str(raised.value)


def test_objects_take_storage_classes_volumes_and_claims() -> None:
    assert schema.OBJECT_KINDS[-3:] == ("StorageClass", "PersistentVolume", "PersistentVolumeClaim")
    raw = _scenario()
    raw["objects"] = [
        {"kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "ebs.csi.aws.com"}
    ]
    sc = scenario.parse(raw)
    assert [o["apiVersion"] for o in sc.objects] == ["storage.k8s.io/v1"]  # no gp2: the scenario has a class
    raw["objects"] = [{"kind": "Secret", "metadata": {"name": "x"}}]
    with pytest.raises(ScenarioError, match=r"objects\[0\]\.kind: kind must be PodDisruptionBudget or"):
        scenario.parse(raw)


def test_the_table_and_the_report_show_the_volume_figures(
    runs: dict[str, tuple[runner.RunResult, Seen]], tmp_path: Path
) -> None:
    from rich.console import Console

    from karpy.cli import simulate_cmd
    from karpy.sim import report

    figures = {mode: r.figures for mode, (r, _) in runs.items()}
    doc = {"scenario": "statefulset-volumes", "seed": 1, "runs": figures}
    console = Console(width=200, record=True)
    console.print(simulate_cmd._table(doc, {}))
    text = console.export_text()
    ca = figures[runner.CLUSTER_AUTOSCALER]["volumes"]
    waited = f"{ca['pods_waited_for_volume_zone']} / {ca['pods_waited_for_attach_limit']}"
    assert "waited for volume zone / attach limit" in text and waited in text
    assert "volumes provisioned / cross-zone binds" in text
    rows = {row[0]: row[1:] for row in report.table_rows(figures)}
    assert rows["cross-zone bindings"] == ["0", "0"]
    out = tmp_path / "r.html"
    report.write_html(doc, out)
    assert "<td>pods that waited for their volume&#x27;s zone</td>" in out.read_text()
    plain = {"karpy": {k: v for k, v in figures["karpy"].items() if k != "volumes"}}
    assert "cross-zone bindings" not in {row[0] for row in report.table_rows(plain)}  # no storage: no rows
