"""The scenario format's ``objects:`` extension (README.md): the kinds it holds reach the
snapshot; another kind, or an object that does not validate, fails the scenario naming it."""

from __future__ import annotations

from pathlib import Path

import yaml

from karpy import conformance

HERE = Path(__file__).resolve().parent


def _scenario(tmp_path: Path, objects: list[dict[str, object]]) -> Path:
    doc = yaml.safe_load((HERE / "vol-013-bound-volume-zone.yaml").read_text())
    doc["objects"] = doc["objects"] + objects
    (tmp_path / "catalogs").mkdir(exist_ok=True)
    (tmp_path / "catalogs" / "karpenter-fake.yaml").write_text(
        (HERE.parent / "catalogs" / "karpenter-fake.yaml").read_text()
    )
    path = tmp_path / "vol-x.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_namespaces_and_storage_reach_the_snapshot(tmp_path: Path) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}}}
    scenario = conformance.scenario_snapshot(_scenario(tmp_path, [ns]))
    snapshot = scenario.snapshot
    assert snapshot.namespaces["team-a"] == {"team": "a"}
    assert set(snapshot.storage.volumes) == {"pv-1"} and snapshot.storage.complete
    assert conformance.run_scenario(_scenario(tmp_path, [])).status == conformance.PASS


def test_another_kind_or_a_bad_object_fails_the_scenario_naming_it(tmp_path: Path) -> None:
    bad_kind = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    outcome = conformance.run_scenario(_scenario(tmp_path, [bad_kind]))
    assert outcome.status == conformance.FAIL
    assert "objects[3]: kind 'ConfigMap' is not one of" in outcome.reason
    invalid = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}}
    outcome = conformance.run_scenario(_scenario(tmp_path, [invalid]))
    assert outcome.status == conformance.FAIL
    assert "objects[3]" in outcome.reason and "provisioner: required" in outcome.reason
