"""deploy/kuberay/raycluster.yaml: a ray.io/v1 RayCluster whose pod templates are valid Pods, that runs
the image deploy/kuberay/Dockerfile builds, with the Ray version of this environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import ray
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kuberay" / "raycluster.yaml"


def _cluster() -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    return dict(doc)


def test_the_raycluster_has_a_head_with_the_client_port_and_workers() -> None:
    doc = _cluster()
    assert (doc["apiVersion"], doc["kind"]) == ("ray.io/v1", "RayCluster")
    spec = doc["spec"]
    assert spec["rayVersion"] == ray.__version__  # client and cluster must run the same Ray
    head = spec["headGroupSpec"]
    ports = {p["name"]: p["containerPort"] for p in head["template"]["spec"]["containers"][0]["ports"]}
    assert ports["client"] == 10001 and ports["gcs"] == 6379
    assert head["rayStartParams"]["num-cpus"] == "0"
    (workers,) = spec["workerGroupSpecs"]
    assert workers["minReplicas"] <= workers["replicas"] <= workers["maxReplicas"]
    assert f"RAY_VERSION={ray.__version__}" in (ROOT / "deploy" / "kuberay" / "Dockerfile").read_text()


def test_every_pod_template_is_a_valid_pod_running_the_sweep_image() -> None:
    spec = _cluster()["spec"]
    templates = [spec["headGroupSpec"]["template"], *(g["template"] for g in spec["workerGroupSpecs"])]
    for template in templates:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", **template["metadata"]},
            "spec": template["spec"],
        }
        kubernetes_validate.validate(pod, "1.31", strict=True)
        assert {c["image"] for c in template["spec"]["containers"]} == {"karpy-sweep:0.1.0"}
        assert template["spec"]["securityContext"]["runAsNonRoot"] is True
