"""NodePool and NodeClaim: conversion, defaults and every upstream validation rule karpy checks."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from karpy import api
from karpy.model import objects, requirements, taints

_BASE: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "gpu"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
            }
        }
    },
}


def _pool(mutate: Callable[[dict[str, Any]], object] = lambda raw: None) -> dict[str, Any]:
    raw = copy.deepcopy(_BASE)
    mutate(raw)
    return raw


def _tmpl(raw: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = raw["spec"]["template"]["spec"]
    return spec


def _req(**req: Any) -> Callable[[dict[str, Any]], object]:
    return lambda raw: _tmpl(raw)["requirements"].insert(0, req)


def test_defaults() -> None:
    pool = api.convert_node_pool(_pool())
    assert pool.name == "gpu" and pool.weight == 0 and pool.replicas is None and pool.limits is None
    assert pool.expire_after == 720 * 3600.0
    assert pool.termination_grace_period is None
    assert pool.node_class_ref == objects.NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")
    assert pool.disruption == objects.Disruption("WhenEmptyOrUnderutilized", 0.0, (objects.Budget("10%"),))


def test_full_conversion() -> None:
    raw = _pool()
    raw["metadata"].update(uid="np-1", creationTimestamp="2026-01-01T00:00:00Z")
    raw["spec"].update(
        weight=50,
        replicas=3,
        limits={"cpu": 1000, "memory": "1000Gi", "nvidia.com/gpu": "8"},
        disruption={
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": "Never",
            "budgets": [
                {"nodes": "20%", "reasons": ["Empty", "Drifted"]},
                {"nodes": "0", "schedule": "@daily", "duration": "10m"},
            ],
        },
    )
    raw["spec"]["template"]["metadata"] = {
        "labels": {"team": "ml", "karpenter.sh/capacity-type": "spot"},
        "annotations": {"example.com/owner": "ml"},
    }
    tmpl = _tmpl(raw)
    tmpl.update(
        expireAfter="Never",
        terminationGracePeriod="1h30m",
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        startupTaints=[{"key": "example.com/agent", "value": "starting", "effect": "NoExecute"}],
    )
    tmpl["requirements"] += [
        {"key": "beta.kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 3},
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lte", "values": ["64"]},
    ]
    pool = api.convert_node_pool(raw)
    assert (pool.weight, pool.replicas, pool.uid, pool.created) == (50, 3, "np-1", 1767225600.0)
    assert pool.limits == {"cpu": 1_000_000, "memory": 1000 * 2**30, "nvidia.com/gpu": 8}
    assert pool.expire_after is None and pool.termination_grace_period == 5400.0
    assert pool.labels == {"team": "ml", "karpenter.sh/capacity-type": "spot"}
    assert pool.annotations == {"example.com/owner": "ml"}
    assert pool.taints == (taints.Taint("nvidia.com/gpu", "NoSchedule"),)
    assert pool.startup_taints == (taints.Taint("example.com/agent", "NoExecute", "starting"),)
    cap, arch, family, cpu = pool.requirements
    assert cap == requirements.Requirement.in_("karpenter.sh/capacity-type", "spot")
    assert arch.key == "kubernetes.io/arch"  # normalized
    assert family.operator == "Exists" and family.min_values == 3
    assert cpu.lte == 64 and cpu.has("64") and not cpu.has("65")
    assert pool.disruption == objects.Disruption(
        "WhenEmpty",
        None,
        (objects.Budget("20%", None, None, ("Empty", "Drifted")), objects.Budget("0", "@daily", 600.0, ())),
    )
    assert pool.requirement_set()["team"].has("ml")


def test_gt_lt_become_bounds() -> None:
    raw = _pool(_req(key="karpenter.k8s.aws/instance-generation", operator="Gt", values=["5"]))
    gen = api.convert_node_pool(raw).requirements[0]
    assert gen.gte == 6 and not gen.has("5") and gen.has("6")


def test_node_class_ref_group_written_as_api_version() -> None:
    raw = _pool(lambda r: _tmpl(r)["nodeClassRef"].update(group="karpenter.k8s.aws/v1"))
    ref = api.convert_node_pool(raw).node_class_ref
    assert ref is not None and ref.group == "karpenter.k8s.aws"


def test_empty_budgets_stay_empty() -> None:
    raw = _pool(lambda r: r["spec"].update(disruption={"budgets": []}))
    assert api.convert_node_pool(raw).disruption.budgets == ()


_LINE = 'np.yaml: document 0 (NodePool "gpu"): '
_REQ0 = "spec.template.spec.requirements[0]"


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], object]:
    def mutate(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = raw
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value

    return mutate


_CASES: list[tuple[str, Callable[[dict[str, Any]], object], str]] = [
    (
        "operator",
        _req(key="a", operator="Matches", values=["x"]),
        f'{_REQ0}.operator: "Matches" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte',
    ),
    (
        "in-no-values",
        _req(key="a", operator="In", values=[]),
        f"{_REQ0}.values: In requires at least one value",
    ),
    ("in-null-values", _req(key="a", operator="In"), f"{_REQ0}.values: In requires at least one value"),
    (
        "gt-two-values",
        _req(key="a", operator="Gt", values=["1", "2"]),
        f"{_REQ0}.values: Gt requires exactly one value, got 2",
    ),
    ("lt-no-value", _req(key="a", operator="Lt"), f"{_REQ0}.values: Lt requires exactly one value, got 0"),
    (
        "gte-negative",
        _req(key="a", operator="Gte", values=["-1"]),
        f'{_REQ0}.values[0]: Gte requires an integer >= 0, got "-1"',
    ),
    (
        "lte-not-int",
        _req(key="a", operator="Lte", values=["large"]),
        f'{_REQ0}.values[0]: Lte requires an integer >= 0, got "large"',
    ),
    (
        "min-values-zero",
        _req(key="a", operator="Exists", minValues=0),
        f"{_REQ0}.minValues: must be between 1 and 50, got 0",
    ),
    (
        "min-values-51",
        _req(key="a", operator="Exists", minValues=51),
        f"{_REQ0}.minValues: must be between 1 and 50, got 51",
    ),
    (
        "min-values-over-in",
        _req(key="a", operator="In", values=["x", "y"], minValues=3),
        f"{_REQ0}.minValues: minValues (3) must not exceed the number of values (2)",
    ),
    (
        "bad-value",
        _req(key="a", operator="In", values=["a b"]),
        f'{_REQ0}.values[0]: "a b" is not a valid label value (at most 63 '
        'characters: alphanumerics, "-", "_", ".")',
    ),
    ("bad-key", _req(key="-a", operator="Exists"), f'{_REQ0}.key: "-a" is not a valid label key'),
    (
        "hostname-key",
        _req(key="kubernetes.io/hostname", operator="Exists"),
        f'{_REQ0}.key: label domain "kubernetes.io" is restricted',
    ),
    (
        "nodepool-key",
        _req(key="karpenter.sh/nodepool", operator="In", values=["x"]),
        f'{_REQ0}.key: label domain "karpenter.sh" is restricted',
    ),
    (
        "k8s-io-key",
        _req(key="example.k8s.io/a", operator="Exists"),
        f'{_REQ0}.key: label domain "k8s.io" is restricted',
    ),
    (
        "too-many",
        lambda r: _tmpl(r).update(requirements=[{"key": f"k{i}", "operator": "Exists"} for i in range(101)]),
        "spec.template.spec.requirements: List should have at most 100 items after validation, not 101",
    ),
    (
        "label-karpenter-domain",
        _set("spec.template.metadata.labels", {"karpenter.sh/team": "a"}),
        'spec.template.metadata.labels[karpenter.sh/team]: label domain "karpenter.sh" is restricted',
    ),
    (
        "label-nodepool",
        _set("spec.template.metadata.labels", {"karpenter.sh/nodepool": "a"}),
        'spec.template.metadata.labels[karpenter.sh/nodepool]: label "karpenter.sh/nodepool" is restricted',
    ),
    (
        "label-hostname",
        _set("spec.template.metadata.labels", {"kubernetes.io/hostname": "a"}),
        'spec.template.metadata.labels[kubernetes.io/hostname]: label "kubernetes.io/hostname" is restricted',
    ),
    (
        "label-value",
        _set("spec.template.metadata.labels", {"team": "a/b"}),
        'spec.template.metadata.labels[team]: "a/b" is not a valid label value (at most 63 characters: '
        'alphanumerics, "-", "_", ".")',
    ),
    ("weight-zero", _set("spec.weight", 0), "spec.weight: must be between 1 and 100, got 0"),
    ("weight-101", _set("spec.weight", 101), "spec.weight: must be between 1 and 100, got 101"),
    (
        "budget-nodes",
        _set("spec.disruption.budgets", [{"nodes": "10 %"}]),
        'spec.disruption.budgets[0].nodes: "10 %" must be a node count or a percentage (e.g. 5 or 10%)',
    ),
    (
        "budget-nodes-101",
        _set("spec.disruption.budgets", [{"nodes": "101%"}]),
        'spec.disruption.budgets[0].nodes: "101%" must be a node count or a percentage (e.g. 5 or 10%)',
    ),
    (
        "schedule-without-duration",
        _set("spec.disruption.budgets", [{"nodes": "0", "schedule": "@daily"}]),
        "spec.disruption.budgets[0].duration: duration is required when schedule is set",
    ),
    (
        "duration-without-schedule",
        _set("spec.disruption.budgets", [{"nodes": "0", "duration": "1h"}]),
        "spec.disruption.budgets[0].schedule: schedule is required when duration is set",
    ),
    (
        "budget-duration-seconds",
        _set("spec.disruption.budgets", [{"schedule": "@daily", "duration": "30s"}]),
        'spec.disruption.budgets[0].duration: "30s" is not a duration (expected e.g. 10m, 1h or 1h30m)',
    ),
    (
        "budget-schedule",
        _set("spec.disruption.budgets", [{"schedule": "daily", "duration": "1h"}]),
        'spec.disruption.budgets[0].schedule: "daily" is not a cron schedule '
        "(5 fields, or @daily, @hourly ...)",
    ),
    (
        "budget-reason",
        _set("spec.disruption.budgets", [{"reasons": ["Empty", "Expired"]}]),
        'spec.disruption.budgets[0].reasons[1]: "Expired" is not one of Underutilized, Empty, Drifted',
    ),
    (
        "policy",
        _set("spec.disruption.consolidationPolicy", "WhenUnderutilized"),
        'spec.disruption.consolidationPolicy: "WhenUnderutilized" is not one of WhenEmpty, '
        "WhenEmptyOrUnderutilized, Balanced",
    ),
    (
        "consolidate-after",
        _set("spec.disruption.consolidateAfter", "5 minutes"),
        'spec.disruption.consolidateAfter: "5 minutes" is not a duration '
        "(expected e.g. 30s, 1h30m, 720h or Never)",
    ),
    (
        "expire-after-days",
        _set("spec.template.spec.expireAfter", "30d"),
        'spec.template.spec.expireAfter: "30d" is not a duration (expected e.g. 30s, 1h30m, 720h or Never)',
    ),
    (
        "tgp-never",
        _set("spec.template.spec.terminationGracePeriod", "Never"),
        'spec.template.spec.terminationGracePeriod: "Never" is not a duration '
        "(expected e.g. 30s, 1h30m or 24h)",
    ),
    (
        "taint-effect",
        _set("spec.template.spec.taints", [{"key": "a", "effect": "NoScheduled"}]),
        'spec.template.spec.taints[0].effect: "NoScheduled" is not one of '
        "NoSchedule, PreferNoSchedule, NoExecute",
    ),
    (
        "startup-taint-key",
        _set("spec.template.spec.startupTaints", [{"effect": "NoSchedule"}]),
        "spec.template.spec.startupTaints[0].key: required",
    ),
    (
        "limit-quantity",
        _set("spec.limits", {"cpu": "1x"}),
        'spec.limits[cpu]: "1x" is not a quantity (expected e.g. 100m, 1.5Gi, 2k or 1e3)',
    ),
    (
        "limit-extended-quantity",
        _set("spec.limits", {"nvidia.com/gpu": "two"}),
        'spec.limits[nvidia.com/gpu]: "two" is not a quantity (expected e.g. 100m, 1.5Gi, 2k or 1e3)',
    ),
    ("node-class-ref", lambda r: _tmpl(r).pop("nodeClassRef"), "spec.template.spec.nodeClassRef: required"),
    (
        "node-class-ref-name",
        lambda r: _tmpl(r)["nodeClassRef"].update(name=""),
        "spec.template.spec.nodeClassRef.name: String should have at least 1 character (got '')",
    ),
    ("replicas", _set("spec.replicas", -1), "spec.replicas: must be at least 0, got -1"),
    ("no-template", lambda r: r["spec"].pop("template"), "spec.template: required"),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in _CASES], ids=[c[0] for c in _CASES])
def test_validation_rule_gives_one_precise_line(
    mutate: Callable[[dict[str, Any]], object], expected: str
) -> None:
    obj, problems = api.parse_object(_pool(mutate), file="np.yaml", index=0)
    assert obj is None
    assert [str(p) for p in problems] == [_LINE + expected]


def test_allowed_keys_and_labels() -> None:
    raw = _pool()
    _tmpl(raw)["requirements"] += [
        {"key": k, "operator": "Exists"}
        for k in (
            "node.kubernetes.io/instance-type",
            "topology.kubernetes.io/zone",
            "kops.k8s.io/x",
            "example.node-restriction.kubernetes.io/a",
            "karpenter.k8s.aws/instance-family",
        )
    ]
    raw["spec"]["template"]["metadata"] = {
        "labels": {"karpenter.sh/capacity-type": "spot", "example.com/a": ""}
    }
    obj, problems = api.parse_object(raw, file="np.yaml", index=0)
    assert problems == [] and isinstance(obj, objects.NodePool)


def test_convert_node_pool_raises_input_error() -> None:
    with pytest.raises(api.ObjectError) as info:
        api.convert_node_pool(_pool(_set("spec.weight", 0)))
    assert str(info.value) == 'NodePool "gpu": spec.weight: must be between 1 and 100, got 0'
    assert len(info.value.problems) == 1


_CLAIM: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {
        "name": "default-x7k2p",
        "labels": {"karpenter.sh/nodepool": "default", "node.kubernetes.io/instance-type": "m5.large"},
        "annotations": {"karpenter.sh/nodepool-hash": "123"},
        "creationTimestamp": "2026-01-01T10:00:00Z",
    },
    "spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["m5.large", "m5.xlarge"],
                "minValues": 2,
            },
        ],
        "taints": [{"key": "a", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "b", "effect": "NoExecute"}],
        "resources": {"requests": {"cpu": "1500m", "memory": "3Gi", "pods": "7"}},
        "expireAfter": "720h",
        "terminationGracePeriod": "24h",
    },
    "status": {
        "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
        "nodeName": "ip-10-0-1-5.ec2.internal",
        "imageID": "ami-0123",
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
        "lastPodEventTime": "2026-01-01T11:00:00Z",
        "conditions": [
            {
                "type": "Initialized",
                "status": "True",
                "reason": "Initialized",
                "lastTransitionTime": "2026-01-01T10:02:00Z",
            },
            {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "hash changed"},
        ],
    },
}


def test_node_claim_conversion() -> None:
    claim = api.convert_node_claim(copy.deepcopy(_CLAIM))
    assert claim.name == "default-x7k2p" and claim.node_pool == "default"
    assert claim.annotations == {"karpenter.sh/nodepool-hash": "123"}
    assert claim.requirements[1].min_values == 2
    assert claim.taints == (taints.Taint("a", "NoSchedule"),)
    assert claim.startup_taints == (taints.Taint("b", "NoExecute"),)
    assert claim.requests.as_dict() == {"cpu": "1500m", "memory": "3Gi", "pods": "7"}
    assert (claim.provider_id, claim.node_name, claim.image_id) == (
        "aws:///us-east-1a/i-0123456789abcdef0",
        "ip-10-0-1-5.ec2.internal",
        "ami-0123",
    )
    assert claim.capacity.as_dict()["cpu"] == "2" and claim.allocatable.as_dict()["cpu"] == "1930m"
    assert claim.created == 1767261600.0 and claim.last_pod_event == 1767265200.0
    assert claim.expire_after == 2592000.0 and claim.termination_grace_period == 86400.0
    init = claim.condition("Initialized")
    assert init is not None and init.last_transition == 1767261720.0
    assert claim.is_true("Drifted") and claim.condition("Drifted") == objects.Condition(
        "Drifted", "True", "NodePoolDrifted", "hash changed", None
    )


def test_node_claim_without_expire_after_has_none() -> None:
    raw = copy.deepcopy(_CLAIM)
    del raw["spec"]["expireAfter"]
    assert api.convert_node_claim(raw).expire_after is None


def test_node_claim_validation() -> None:
    raw = copy.deepcopy(_CLAIM)
    raw["spec"]["requirements"][0]["operator"] = "Equals"
    with pytest.raises(api.ObjectError) as info:
        api.convert_node_claim(raw)
    assert str(info.value) == (
        'NodeClaim "default-x7k2p": spec.requirements[0].operator: "Equals" is not one of In, NotIn, Exists, '
        "DoesNotExist, Gt, Lt, Gte, Lte"
    )


def test_zero_limit_is_kept() -> None:
    raw = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "off", "annotations": {"karpenter.sh/nodepool-hash": "123"}},
        "spec": {
            "limits": {"cpu": "0"},
            "template": {
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}
            },
        },
    }
    pool = api.convert_node_pool(raw)
    assert pool.limits == {"cpu": 0}
    assert pool.meta_annotations == {"karpenter.sh/nodepool-hash": "123"}
