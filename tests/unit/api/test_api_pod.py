"""Pod and Node conversion: request arithmetic, affinity, spread, tolerations, host ports."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import api
from karpy.model import errors, requirements, resources, selectors, taints


def _pod(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


def _c(name: str = "c", requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    res: dict[str, Any] = dict(extra.pop("resources", {}))
    if requests is not None:
        res["requests"] = requests
    return {"name": name, "image": "pause", "resources": res, **extra}


def _requests(spec: dict[str, Any]) -> dict[str, str]:
    return api.convert_pod(_pod(spec)).requests.as_dict()


def test_containers_sum() -> None:
    spec = {"containers": [_c(requests={"cpu": "500m", "memory": "1Gi"}), _c("d", {"cpu": "1.5"})]}
    assert _requests(spec) == {"cpu": "2", "memory": "1Gi"}


def test_no_pods_unit_is_added() -> None:
    assert _requests({"containers": [_c(requests={})]}) == {}


def test_init_container_larger_than_containers_wins() -> None:
    spec = {
        "initContainers": [_c("init", {"cpu": "2", "memory": "128Mi"})],
        "containers": [_c(requests={"cpu": "1", "memory": "1Gi"})],
    }
    assert _requests(spec) == {"cpu": "2", "memory": "1Gi"}


def test_sidecars_add_to_containers_and_to_later_init_containers() -> None:
    spec = {
        "initContainers": [
            _c("before", {"cpu": "3"}),  # runs alone: 3
            _c("proxy", {"cpu": "500m", "memory": "64Mi"}, restartPolicy="Always"),
            _c("after", {"cpu": "3"}),  # runs beside the sidecar: 3.5
        ],
        "containers": [_c(requests={"cpu": "1", "memory": "256Mi"})],
    }
    assert _requests(spec) == {"cpu": "3500m", "memory": "320Mi"}


def test_sidecar_only_counts_from_its_start() -> None:
    spec = {
        "initContainers": [
            _c("first", {"cpu": "2"}),
            _c("proxy", {"cpu": "1"}, restartPolicy="Always"),
        ],
        "containers": [_c(requests={"cpu": "500m"})],
    }
    assert _requests(spec) == {"cpu": "2"}


def test_overhead_is_added_after_the_max() -> None:
    spec = {
        "initContainers": [_c("init", {"cpu": "4"})],
        "containers": [_c(requests={"cpu": "1"})],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert _requests(spec) == {"cpu": "4250m", "memory": "120Mi"}


def test_limit_without_request_defaults_the_request() -> None:
    spec = {
        "containers": [
            _c(resources={"limits": {"nvidia.com/gpu": "1", "memory": "2Gi"}, "requests": {"memory": "1Gi"}})
        ]
    }
    assert _requests(spec) == {"memory": "1Gi", "nvidia.com/gpu": "1"}


def test_limit_defaulting_applies_to_init_containers() -> None:
    spec = {
        "initContainers": [_c("init", resources={"limits": {"cpu": "3"}})],
        "containers": [_c(requests={"cpu": "1"})],
    }
    assert _requests(spec) == {"cpu": "3"}


def test_requests_are_exact_resources() -> None:
    pod = api.convert_pod(_pod({"containers": [_c(requests={"cpu": "100m", "memory": "256M"})]}))
    assert isinstance(pod.requests, resources.Resources)
    assert pod.requests == resources.Resources({"cpu": 100, "memory": 256_000_000})


def test_metadata_and_status_fields() -> None:
    raw = _pod(
        {
            "containers": [_c()],
            "nodeName": "node-a",
            "priority": 1000,
            "priorityClassName": "high",
            "schedulingGates": [{"name": "wait"}],
            "terminationGracePeriodSeconds": 5,
            "nodeSelector": {"kubernetes.io/arch": "arm64"},
        },
        namespace="shop",
        labels={"app": "web"},
        annotations={"karpenter.sh/do-not-disrupt": "true"},
        uid="u-1",
        creationTimestamp="2026-01-01T00:00:00Z",
        deletionTimestamp="2026-01-01T00:01:00Z",
        ownerReferences=[
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "controller": True}
        ],
    )
    raw["status"] = {"phase": "Running", "nominatedNodeName": "node-b"}
    pod = api.convert_pod(raw)
    assert (pod.namespace, pod.name, pod.uid, pod.key) == ("shop", "p", "u-1", "shop/p")
    assert pod.labels == {"app": "web"} and pod.annotations == {"karpenter.sh/do-not-disrupt": "true"}
    assert pod.created == 1767225600.0 and pod.deleting
    assert (pod.node_name, pod.phase, pod.nominated_node) == ("node-a", "Running", "node-b")
    assert (pod.priority, pod.priority_class, pod.termination_grace_seconds) == (1000, "high", 5)
    assert pod.scheduling_gated
    assert pod.node_selector == {"kubernetes.io/arch": "arm64"}
    assert (
        pod.controller is not None and pod.controller.kind == "ReplicaSet" and pod.controller.name == "web-1"
    )


def test_defaults() -> None:
    pod = api.convert_pod({"metadata": {"name": "p"}, "spec": {"containers": [_c()]}})
    assert (pod.namespace, pod.phase, pod.priority, pod.termination_grace_seconds) == (
        "default",
        "Pending",
        0,
        30,
    )
    assert pod.uid and not pod.scheduling_gated and not pod.deleting


def test_node_affinity() -> None:
    spec = {
        "containers": [_c()],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "failure-domain.beta.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": ["a", "b"],
                                }
                            ]
                        },
                        {"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["3"]}]},
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
                            ]
                        },
                    }
                ],
            }
        },
    }
    pod = api.convert_pod(_pod(spec))
    zone, size, name = pod.required_terms
    assert zone.requirements == (requirements.Requirement.in_("topology.kubernetes.io/zone", "a", "b"),)
    assert (
        size.requirements[0].gte == 4 and size.requirements[0].has("4") and not size.requirements[0].has("3")
    )
    assert name.requirements == (requirements.Requirement.in_("kubernetes.io/hostname", "node-a"),)
    (pref,) = pod.preferred_terms
    assert pref.weight == 50 and pref.term.requirements[0].has("arm64")


def test_pod_affinity_terms() -> None:
    term = {
        "topologyKey": "topology.kubernetes.io/zone",
        "labelSelector": {
            "matchLabels": {"app": "db"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["test"]}],
        },
        "namespaces": ["data"],
        "namespaceSelector": {"matchLabels": {"team": "x"}},
        "matchLabelKeys": ["pod-template-hash"],
        "mismatchLabelKeys": ["tenant"],
    }
    spec = {
        "containers": [_c()],
        "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]},
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {}},
                    }
                ],
            },
        },
    }
    pod = api.convert_pod(_pod(spec))
    (aff,) = pod.affinity
    assert aff.topology_key == "topology.kubernetes.io/zone"
    assert aff.selector == selectors.LabelSelector(
        (("app", "db"),), (selectors.SelectorRequirement("tier", "NotIn", ("test",)),)
    )
    assert aff.namespaces == ("data",)
    assert aff.namespace_selector == selectors.LabelSelector((("team", "x"),))
    assert (aff.match_label_keys, aff.mismatch_label_keys) == (("pod-template-hash",), ("tenant",))
    (anti,) = pod.anti_affinity
    assert anti.selector is None  # no selector selects nothing
    (soft,) = pod.anti_affinity_preferred
    assert soft.weight == 10 and soft.term.selector == selectors.LabelSelector()  # {} selects everything
    assert pod.has_pod_affinity() and pod.affinity_preferred == ()


def test_topology_spread() -> None:
    spec = {
        "containers": [_c()],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": 3,
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
                "matchLabelKeys": ["pod-template-hash"],
            },
            {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"},
        ],
    }
    zone, host = api.convert_pod(_pod(spec)).spread
    assert (zone.max_skew, zone.topology_key, zone.when_unsatisfiable) == (
        1,
        "topology.kubernetes.io/zone",
        "DoNotSchedule",
    )
    assert zone.selector == selectors.LabelSelector((("app", "web"),))
    assert (zone.min_domains, zone.node_affinity_policy, zone.node_taints_policy) == (3, "Ignore", "Honor")
    assert zone.match_label_keys == ("pod-template-hash",)
    assert (host.selector, host.min_domains, host.node_affinity_policy, host.node_taints_policy) == (
        None,
        None,
        "Honor",
        "Ignore",
    )


def test_tolerations() -> None:
    spec = {
        "containers": [_c()],
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "infra"},
            {"operator": "Exists"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    }
    tols = api.convert_pod(_pod(spec)).tolerations
    assert tols == (
        taints.Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),
        taints.Toleration("dedicated", "Equal", "infra", ""),
        taints.Toleration("", "Exists", "", ""),
        taints.Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", 300),
    )


def test_host_ports_include_sidecars_and_host_network() -> None:
    spec = {
        "hostNetwork": True,
        "initContainers": [
            _c("proxy", ports=[{"containerPort": 15000, "hostPort": 15000}], restartPolicy="Always"),
            _c("init", ports=[{"containerPort": 1, "hostPort": 1}]),
        ],
        "containers": [
            _c(
                ports=[
                    {"containerPort": 9100},
                    {"containerPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                ]
            )
        ],
    }
    ports = api.convert_pod(_pod(spec)).host_ports
    assert [(p.port, p.protocol, p.host_ip) for p in ports] == [
        (9100, "TCP", ""),
        (53, "UDP", "10.0.0.1"),
        (15000, "TCP", ""),
    ]


def test_container_port_without_host_port_is_not_a_host_port() -> None:
    spec = {"containers": [_c(ports=[{"containerPort": 8080}])]}
    assert api.convert_pod(_pod(spec)).host_ports == ()


@pytest.mark.parametrize(
    ("spec", "line"),
    [
        (
            {"containers": [_c(requests={"memory": "1Gb"})]},
            'Pod "p": spec.containers[0].resources.requests[memory]: "1Gb" is not '
            "a quantity (expected e.g. 100m, "
            "1.5Gi, 2k or 1e3)",
        ),
        (
            {"tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]},
            'Pod "p": spec.tolerations[0].value: must be empty when operator is Exists',
        ),
        (
            {"tolerations": [{"effect": "Sometimes", "operator": "Exists"}]},
            'Pod "p": spec.tolerations[0].effect: "Sometimes" is not one of NoSchedule, PreferNoSchedule, '
            "NoExecute (or empty)",
        ),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            'Pod "p": spec.topologySpreadConstraints[0].maxSkew: must be at least 1, got 0',
        ),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}
                ]
            },
            'Pod "p": spec.topologySpreadConstraints[0].minDomains: can only be '
            "set when whenUnsatisfiable is "
            "DoNotSchedule",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In"}]}]
                        }
                    }
                }
            },
            'Pod "p": '
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
            ".matchExpressions[0].values: In requires at least one value",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}
                }
            },
            'Pod "p": '
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: "
            "required",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]
                    }
                }
            },
            'Pod "p": spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: '
            "must be between 1 and 100, got 0",
        ),
    ],
)
def test_pod_validation_lines(spec: dict[str, Any], line: str) -> None:
    with pytest.raises(errors.InputError) as info:
        api.convert_pod(_pod(spec))
    assert str(info.value) == line


def test_convert_pod_rejects_another_kind() -> None:
    with pytest.raises(api.ObjectError) as info:
        api.convert_pod({"kind": "Node", "metadata": {"name": "n"}})
    assert str(info.value) == "Node \"n\": kind: must be 'Pod', got 'Node'"


def test_node_conversion() -> None:
    node = api.convert_node(
        {
            "metadata": {
                "name": "ip-10-0-1-5",
                "labels": {"kubernetes.io/arch": "amd64"},
                "creationTimestamp": "2026-01-01T10:00:00Z",
            },
            "spec": {
                "providerID": "aws:///us-east-1a/i-0abc",
                "unschedulable": True,
                "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
            },
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "58"},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "KubeletNotReady",
                        "lastTransitionTime": "2026-01-01T10:05:00Z",
                    }
                ],
            },
        }
    )
    assert node.provider_id == "aws:///us-east-1a/i-0abc" and node.unschedulable
    assert node.taints == (taints.Taint("dedicated", "NoSchedule", "gpu"),)
    assert node.capacity.as_dict() == {"cpu": "4", "memory": "16Gi", "pods": "58"}
    assert node.allocatable.as_dict() == {"cpu": "3920m", "memory": "15Gi", "pods": "58"}
    assert not node.ready
    assert (
        node.conditions[0].last_transition == 1767261900.0 and node.conditions[0].reason == "KubeletNotReady"
    )
    assert node.created == 1767261600.0


def test_node_allocatable_falls_back_to_capacity_and_ready_without_conditions() -> None:
    node = api.convert_node({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"}}})
    assert node.allocatable == node.capacity == resources.Resources({"cpu": 2000})
    assert node.ready
    empty = api.convert_node(
        {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"}, "allocatable": {}}}
    )
    assert empty.allocatable == resources.EMPTY


def test_node_ready_condition_true() -> None:
    raw = {
        "metadata": {"name": "n"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "True"}]
        },
    }
    assert api.convert_node(raw).ready


# -- the pod parse memo (watch events of pods whose spec was converted before) -----------------


def _fresh(raw: dict[str, Any]) -> Any:
    from karpy.api import load

    load._POD_SPECS.clear()
    return api.parse_object(raw, file="watch", index=0)


def test_a_remembered_spec_gives_the_same_pod_as_a_fresh_conversion() -> None:
    spec = {
        "containers": [
            _c(requests={"cpu": "250m", "memory": "256Mi"}, ports=[{"containerPort": 80, "hostPort": 80}])
        ],
        "nodeSelector": {"tier": "web"},
        "tolerations": [{"key": "t", "operator": "Exists"}],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "a"}},
            }
        ],
    }
    first = _pod(spec, namespace="ns", labels={"app": "a"}, uid="u1")
    bound = _pod({**spec, "nodeName": "n1"}, name="q", namespace="ns", labels={"app": "a"}, uid="u2")
    bound["status"] = {
        "phase": "Running",
        "startTime": "2026-03-02T07:00:00Z",
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    api.parse_object(first, file="watch", index=0)  # remembers the spec
    warm, problems = api.parse_object(bound, file="watch", index=0)
    cold, _ = _fresh(bound)
    assert problems == []
    assert warm == cold
    assert warm.node_name == "n1" and warm.phase == "Running" and warm.ready and warm.name == "q"
    assert warm.node_selector is not cold.node_selector  # pods never share a mutable dict


def test_a_remembered_spec_still_reports_bad_metadata_and_status() -> None:
    spec = {"containers": [_c(requests={"cpu": "1"})]}
    api.parse_object(_pod(spec), file="watch", index=0)
    bad = _pod(spec, labels={"a": 1.5})
    bad["status"] = {"phase": "Running", "startTime": "not a time"}
    warm_obj, warm = api.parse_object(bad, file="watch", index=0)
    cold_obj, cold = _fresh(bad)
    assert warm_obj is None and cold_obj is None
    assert [str(p) for p in warm] == [str(p) for p in cold]
    assert any("status.startTime" in str(p) for p in warm)


def test_an_invalid_spec_is_never_remembered() -> None:
    from karpy.api import load

    load._POD_SPECS.clear()
    bad = _pod({"containers": [_c(requests={"cpu": "lots"})]})
    for _ in range(2):
        obj, problems = api.parse_object(bad, file="watch", index=0)
        assert obj is None and problems
    assert len(load._POD_SPECS) == 0
