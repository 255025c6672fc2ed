"""Deployments and ReplicaSets expand into pending pods; DaemonSets, PDBs and Namespaces convert."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy import api
from karpy.api import apps_v1
from karpy.model import objects, selectors

_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web", "tier": "front"}, "annotations": {"a": "b"}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx",
                        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                    }
                ],
                "tolerations": [{"key": "spot", "operator": "Exists"}],
            },
        },
    },
}


def _deployment(**spec: Any) -> dict[str, Any]:
    raw = copy.deepcopy(_DEPLOYMENT)
    raw["spec"].update(spec)
    return raw


def _workload(raw: dict[str, Any]) -> api.Workload:
    obj, problems = api.parse_object(raw, file="d.yaml", index=0)
    assert problems == []
    assert isinstance(obj, api.Workload)
    return obj


def test_deployment_expands_into_pending_pods() -> None:
    pods = api.expand(_workload(_deployment()))
    assert [p.name for p in pods] == ["web-0", "web-1", "web-2"]
    for pod in pods:
        assert pod.namespace == "shop" and pod.phase == "Pending" and pod.node_name == ""
        assert pod.labels == {"app": "web", "tier": "front"} and pod.annotations == {"a": "b"}
        assert pod.requests.as_dict() == {"cpu": "500m", "memory": "512Mi"}
        assert pod.tolerations[0].key == "spot"
        assert pod.created == 1767225600.0
        owner = pod.controller
        assert owner is not None
        assert (owner.kind, owner.name, owner.controller, owner.api_version) == (
            "ReplicaSet",
            "web",
            True,
            "apps/v1",
        )
        assert not pod.is_daemonset_pod()
    assert len({p.uid for p in pods}) == 3


def test_uids_are_deterministic() -> None:
    first = [p.uid for p in api.expand(_workload(_deployment()))]
    second = [p.uid for p in api.expand(_workload(_deployment()))]
    assert first == second and all(first)


def test_replicas_default_to_one_and_zero_gives_none() -> None:
    raw = _deployment()
    del raw["spec"]["replicas"]
    assert [p.name for p in api.expand(_workload(raw))] == ["web-0"]
    assert api.expand(_workload(_deployment(replicas=0))) == []


def test_expand_accepts_the_schema_object_and_replica_sets() -> None:
    deployment = apps_v1.Deployment.model_validate(_deployment(replicas=1))
    assert [p.key for p in api.expand(deployment)] == ["shop/web-0"]
    rs = _deployment(replicas=2)
    rs["kind"] = "ReplicaSet"
    rs["metadata"]["name"] = "web-5d8f7"
    wl = _workload(rs)
    assert wl.kind == "ReplicaSet"
    pods = api.expand(wl)
    assert [p.name for p in pods] == ["web-5d8f7-0", "web-5d8f7-1"]
    assert pods[0].controller is not None and pods[0].controller.name == "web-5d8f7"


def test_default_namespace() -> None:
    raw = _deployment(replicas=1)
    del raw["metadata"]["namespace"]
    assert api.expand(_workload(raw))[0].key == "default/web-0"


def test_loaded_keeps_deployments_and_replicasets_apart() -> None:
    rs = _deployment()
    rs["kind"] = "ReplicaSet"
    loaded = api.Loaded()
    loaded.add(_workload(_deployment()), file="a.yaml")
    loaded.add(_workload(rs), file="a.yaml", index=1)
    assert [w.kind for w in loaded.deployments] == ["Deployment"]
    assert [w.kind for w in loaded.replicasets] == ["ReplicaSet"]
    assert loaded.skipped == []


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        ({"replicas": -1}, "spec.replicas: must be at least 0, got -1"),
        (
            {"selector": {"matchLabels": {"app": "api"}}},
            "spec.template.metadata.labels: selector does not match template labels (needs app=api)",
        ),
        ({"template": None}, "spec.template: required"),
    ],
)
def test_deployment_validation(spec: dict[str, Any], line: str) -> None:
    raw = _deployment()
    for key, value in spec.items():
        if value is None:
            del raw["spec"][key]
        else:
            raw["spec"][key] = value
    _, problems = api.parse_object(raw, file="d.yaml", index=4)
    assert [str(p) for p in problems] == ['d.yaml: document 4 (Deployment "shop/web"): ' + line]


_DAEMONSET: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "node-exporter", "namespace": "monitoring"},
    "spec": {
        "selector": {"matchLabels": {"app": "node-exporter"}},
        "template": {
            "metadata": {"labels": {"app": "node-exporter"}},
            "spec": {
                "tolerations": [{"operator": "Exists"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
                "containers": [
                    {
                        "name": "e",
                        "image": "exporter",
                        "ports": [{"containerPort": 9100, "hostPort": 9100}],
                        "resources": {"requests": {"cpu": "50m"}, "limits": {"memory": "64Mi"}},
                    }
                ],
            },
        },
    },
}


def test_daemonset_template_is_a_pod_in_its_namespace() -> None:
    ds = api.convert_daemonset(copy.deepcopy(_DAEMONSET))
    assert (ds.namespace, ds.name) == ("monitoring", "node-exporter")
    pod = ds.template
    assert pod.namespace == "monitoring" and pod.is_daemonset_pod()
    assert pod.requests.as_dict() == {"cpu": "50m", "memory": "64Mi"}
    assert [h.port for h in pod.host_ports] == [9100]
    assert pod.required_terms[0].requirements[0].has("linux")
    assert pod.labels == {"app": "node-exporter"}


def test_pdb_conversion() -> None:
    raw = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "minAvailable": "80%",
            "selector": {"matchLabels": {"app": "web"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
        "status": {"disruptionsAllowed": 2},
    }
    pdb = api.convert_pdb(raw)
    assert pdb == objects.PodDisruptionBudget(
        "shop", "web", selectors.LabelSelector((("app", "web"),)), "80%", None, "AlwaysAllow", 2
    )
    raw["spec"] = {"maxUnavailable": 1}
    pdb = api.convert_pdb(raw)
    assert (pdb.max_unavailable, pdb.min_available, pdb.selector) == ("1", None, None)
    raw["spec"] = {"selector": {}}
    assert api.convert_pdb(raw).selector == selectors.LabelSelector()


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        (
            {"minAvailable": 1, "maxUnavailable": 1},
            "spec.maxUnavailable: minAvailable and maxUnavailable cannot both be set",
        ),
        (
            {"maxUnavailable": "lots"},
            'spec.maxUnavailable: "lots" must be a non-negative integer or a percentage (e.g. 1 or 20%)',
        ),
    ],
)
def test_pdb_validation(spec: dict[str, Any], line: str) -> None:
    raw = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web"},
        "spec": spec,
    }
    with pytest.raises(api.ObjectError) as info:
        api.convert_pdb(raw)
    assert str(info.value) == 'PodDisruptionBudget "web": ' + line
