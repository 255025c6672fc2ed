"""``explain_pod`` on the volume scenarios: each pod a scenario expects pending is explained with
the volume rule it is about (its class and a suggestion), and a pod sent past a full node names
that node's attach limit. A new volume scenario with a pending pod needs an entry below."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy import conformance
from karpy.core.explain.pod import explain_pod
from karpy.core.explain.reasons import CLASSES

HERE = Path(__file__).resolve().parent

# scenario name -> (the status of its pending pods, the reason class they are about)
EXPECTED: dict[str, tuple[str, str]] = {
    "vol-001-invalid-pvc-not-scheduled": ("invalid", "volume"),
    "vol-003-empty-storage-class-unbound-pvc": ("invalid", "volume"),
    "vol-005-missing-storage-class-unbound-pvc": ("invalid", "volume"),
    "vol-006-invalid-pvc-other-pods-schedule": ("invalid", "volume"),
    "vol-007-invalid-storage-class-other-pods-schedule": ("invalid", "volume"),
    "vol-008-invalid-volume-name-other-pods-schedule": ("invalid", "volume"),
    "vol-011-storage-class-zones-incompatible": ("unschedulable", "volume-topology"),
    "vol-012-storage-class-zones-incompatible-ephemeral": ("unschedulable", "volume-topology"),
    "vol-018-csi-volume-hostname-kept": ("unschedulable", "volume-topology"),
    "vol-019-bound-volume-zone-incompatible": ("unschedulable", "volume-topology"),
    "vol-020-bound-volume-zone-incompatible-ephemeral": ("unschedulable", "volume-topology"),
    "vol-030-ephemeral-unbound-missing-class": ("invalid", "volume"),
    "vol-031-ephemeral-unbound-empty-class": ("invalid", "volume"),
}


def _pending() -> dict[str, tuple[Path, list[str]]]:
    found: dict[str, tuple[Path, list[str]]] = {}
    for path in sorted(HERE.glob("*.yaml")):
        scenario = conformance.scenario_snapshot(path)
        pods = scenario.expect.get("pods") or {}
        names = [n for n, want in pods.items() if isinstance(want, dict) and want.get("scheduled") is False]
        if names:
            found[scenario.name] = (path, names)
    return found


PENDING = _pending()


def test_every_pending_volume_scenario_is_mapped() -> None:
    assert set(PENDING) == set(EXPECTED)
    assert {cls for _, cls in EXPECTED.values()} <= set(CLASSES)


@pytest.mark.parametrize("name", sorted(PENDING))
def test_a_pending_pod_is_explained_by_its_volume_rule(name: str) -> None:
    path, pods = PENDING[name]
    status, cls = EXPECTED[name]
    scenario = conformance.scenario_snapshot(path)
    for pod in pods:
        exp = explain_pod(scenario.snapshot, pod)
        assert (exp.status, exp.reason) == (status, cls), exp.summary
        assert exp.suggestion, f"{pod}: no suggestion for {exp.message}"
        if status == "unschedulable":
            assert any(v.reason == cls and v.suggestion for v in exp.node_pools)


def test_a_pod_past_a_full_node_names_its_attach_limit() -> None:
    scenario = conformance.scenario_snapshot(HERE / "vol-022-csinode-limit-launches-second-node.yaml")
    exp = explain_pod(scenario.snapshot, "p5")
    assert exp.status == "new-nodeclaim"
    (node,) = exp.nodes
    assert (node.name, node.verdict, node.reason) == ("node-a", "rejected", "volume-limit")
    assert (
        node.message
        == "volume attach limit: 12 volumes of fake.csi.provider would be attached; node node-a allows 10"
    )
    assert node.detail == {"driver": "fake.csi.provider", "volumes": 12, "limit": 10}
    assert node.suggestion.startswith("node node-a would attach 12 volumes of fake.csi.provider")
    assert "over its limit of 10" in node.suggestion
