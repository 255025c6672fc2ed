"""The install manifests: Kubernetes schemas, least-privilege RBAC, CRD schemas vs examples, dashboard;
and the shadow-mode install (deploy/shadow/): read-only RBAC over every kind karpy watches."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml

from karpy.adapters.kube.client import RESOURCES
from karpy.metrics import Metrics
from karpy.operator import runner
from karpy.state.feed import KINDS

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
K8S_VERSION = "1.31"
AWS = DEPLOY / "aws"
KUBERAY = DEPLOY / "kuberay"  # a RayCluster for karpy sweep: a KubeRay kind (tests/sweep checks it)
SHADOW = DEPLOY / "shadow"  # karpy operator --shadow, installed on its own (checked below)


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def manifests() -> list[Path]:
    """The base install's manifests (deploy/aws/ is an overlay of patches, checked below)."""
    return sorted(
        p
        for p in DEPLOY.rglob("*.yaml")
        if p.name != "kustomization.yaml" and not {AWS, KUBERAY, SHADOW} & set(p.parents)
    )


def shadow_manifests() -> list[Path]:
    return sorted(p for p in SHADOW.glob("*.yaml") if p.name != "kustomization.yaml")


def crd(kind: str) -> dict[str, Any]:
    for path in (DEPLOY / "crds").glob("*.yaml"):
        (doc,) = documents(path)
        if doc["spec"]["names"]["kind"] == kind:
            return dict(doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    raise LookupError(kind)


@pytest.mark.parametrize("path", manifests() + shadow_manifests(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_manifest_validates_against_the_kubernetes_schemas(path: Path) -> None:
    for doc in documents(path):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_kustomization_lists_every_manifest() -> None:
    listed = set(documents(DEPLOY / "kustomization.yaml")[0]["resources"])
    assert listed == {str(p.relative_to(DEPLOY)) for p in manifests()}


def test_the_shadow_kustomization_lists_its_manifests_and_no_crd() -> None:
    listed = documents(SHADOW / "kustomization.yaml")[0]["resources"]
    assert set(listed) == {p.name for p in shadow_manifests()}
    kinds = {doc["kind"] for path in shadow_manifests() for doc in documents(path)}
    assert "CustomResourceDefinition" not in kinds  # beside Karpenter, the CRDs are Karpenter's


def _grants(path: Path) -> dict[tuple[str, str, str], set[str]]:
    """(Role kind, apiGroup, resource) -> verbs, over every rule of the file's roles."""
    out: dict[tuple[str, str, str], set[str]] = {}
    for doc in documents(path):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule.get(field, []), rule
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    out.setdefault((doc["kind"], group, res), set()).update(rule["verbs"])
    return out


def test_shadow_rbac_reads_every_watched_kind_and_writes_only_events_and_its_lease() -> None:
    grants = _grants(SHADOW / "rbac.yaml")
    for kind in sorted(KINDS):
        res = RESOURCES[kind]
        assert {"list", "watch"} <= grants.get(("ClusterRole", res.group, res.plural), set()), kind
    writes = {key: verbs - {"get", "list", "watch"} for key, verbs in grants.items()}
    assert {key: verbs for key, verbs in writes.items() if verbs} == {
        ("ClusterRole", "events.k8s.io", "events"): {"create", "patch"},
        ("Role", "coordination.k8s.io", "leases"): {"create", "update"},
    }
    (role,) = [d for d in documents(SHADOW / "rbac.yaml") if d["kind"] == "Role"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [(r["resourceNames"], r["verbs"]) for r in named] == [
        ([runner.SHADOW_LEASE_NAME], ["get", "update"])
    ]


def test_the_shadow_deployment_runs_the_operator_in_shadow_mode_as_its_service_account() -> None:
    (deployment,) = documents(SHADOW / "deployment.yaml")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][:2] == ["operator", "--shadow"] and "--leader-elect" in container["args"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    (account,) = documents(SHADOW / "serviceaccount.yaml")
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"] == "karpy-shadow"


def test_rbac_has_no_wildcards_and_exact_verbs() -> None:
    rules = [
        rule
        for doc in documents(DEPLOY / "rbac.yaml")
        if doc["kind"] in ("ClusterRole", "Role")
        for rule in doc["rules"]
    ]
    assert rules
    for rule in rules:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), rule
        assert not rule.get("nonResourceURLs")
    verbs = {
        (g, r): set(rule["verbs"]) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
    }
    assert verbs[("", "pods/eviction")] == {"create"}
    assert "create" not in verbs[("karpenter.sh", "nodepools")]
    assert verbs[("coordination.k8s.io", "leases")] == {"get", "create", "update"}


def test_configmaps_are_granted_only_for_the_measured_capacity_in_karpys_namespace() -> None:
    """``--measured-capacity`` reads and writes one ConfigMap; no ClusterRole touches ConfigMaps."""
    grants = [
        (
            doc["kind"],
            doc["metadata"].get("namespace"),
            tuple(rule.get("resourceNames", ())),
            set(rule["verbs"]),
        )
        for doc in documents(DEPLOY / "rbac.yaml")
        if doc["kind"] in ("ClusterRole", "Role")
        for rule in doc["rules"]
        if "configmaps" in rule["resources"]
    ]
    assert sorted(grants, key=lambda g: sorted(g[3])) == [
        ("Role", "karpy-system", (), {"create"}),
        ("Role", "karpy-system", ("karpy-measured-capacity",), {"get", "update"}),
    ]


def test_the_deployment_is_hardened_and_elects_a_leader() -> None:
    (deployment,) = documents(DEPLOY / "deployment.yaml")
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "--leader-elect" in container["args"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^USER 65532", dockerfile, re.M) and "-slim" in dockerfile


# -- CRD schemas against real objects --------------------------------------------------------------
def _examples(kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for folder in (ROOT / "examples", ROOT / "tests/data/upstream-examples"):
        for path in sorted(folder.rglob("*.yaml")):
            for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
                if isinstance(doc, dict) and doc.get("kind") == kind:
                    yield f"{path.relative_to(ROOT)}#{index}", doc


def _cel_errors(schema: dict[str, Any], value: Any, where: str = "") -> list[str]:
    """Evaluate the x-kubernetes-validations rules (not transition rules) with cel-python."""
    out: list[str] = []
    env = celpy.Environment()
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue  # transition rules need the previous object
        program = env.program(env.compile(rule["rule"]))
        if not bool(program.evaluate({"self": celpy.json_to_cel(value)})):
            out.append(f"{where or '<root>'}: {rule['message']}")
    if isinstance(value, dict):
        for key, sub in (schema.get("properties") or {}).items():
            if key in value:
                out += _cel_errors(sub, value[key], f"{where}.{key}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, sub_value in value.items():
                if key not in (schema.get("properties") or {}):
                    out += _cel_errors(extra, sub_value, f"{where}.{key}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            out += _cel_errors(schema["items"], item, f"{where}[{index}]")
    return out


def problems(kind: str, obj: dict[str, Any]) -> list[str]:
    schema = crd(kind)
    found = [
        f"{'.'.join(map(str, e.path))}: {e.message}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(obj)
    ]
    return found + _cel_errors(schema, obj)


NODE_POOLS = list(_examples("NodePool"))
NODE_CLASSES = list(_examples("EC2NodeClass"))


def test_there_are_examples_to_check() -> None:
    assert len(NODE_POOLS) >= 20 and len(NODE_CLASSES) >= 20


@pytest.mark.parametrize(("where", "doc"), NODE_POOLS, ids=[w for w, _ in NODE_POOLS])
def test_every_example_nodepool_is_accepted(where: str, doc: dict[str, Any]) -> None:
    assert problems("NodePool", doc) == []


@pytest.mark.parametrize(("where", "doc"), NODE_CLASSES, ids=[w for w, _ in NODE_CLASSES])
def test_every_example_ec2nodeclass_is_accepted(where: str, doc: dict[str, Any]) -> None:
    assert problems("EC2NodeClass", doc) == []


def _pool(**template_spec: Any) -> dict[str, Any]:
    spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
        **template_spec,
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "x"},
        "spec": {"template": {"spec": spec}},
    }


MALFORMED_POOLS = {
    "unknown operator": _pool(requirements=[{"key": "a", "operator": "Sometimes", "values": ["x"]}]),
    "In without values (CEL)": _pool(requirements=[{"key": "a", "operator": "In", "values": []}]),
    "Gt with a non-number count (CEL)": _pool(
        requirements=[{"key": "a", "operator": "Gt", "values": ["1", "2"]}]
    ),
    "minValues above the values (CEL)": _pool(
        requirements=[{"key": "a", "operator": "In", "values": ["x"], "minValues": 2}]
    ),
    "restricted hostname key (CEL)": _pool(
        requirements=[{"key": "kubernetes.io/hostname", "operator": "In", "values": ["x"]}]
    ),
    "missing nodeClassRef": {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "x"},
        "spec": {"template": {"spec": {"requirements": []}}},
    },
    "bad expireAfter": _pool(expireAfter="30 days"),
    "bad taint effect": _pool(taints=[{"key": "a", "effect": "Sometimes"}]),
    "weight out of range": {**_pool(), "spec": {**_pool()["spec"], "weight": 0}},
    "bad budget nodes": {
        **_pool(),
        "spec": {**_pool()["spec"], "disruption": {"budgets": [{"nodes": "lots"}]}},
    },
    "schedule without duration (CEL)": {
        **_pool(),
        "spec": {**_pool()["spec"], "disruption": {"budgets": [{"nodes": "1", "schedule": "@daily"}]}},
    },
    "bad consolidationPolicy": {
        **_pool(),
        "spec": {**_pool()["spec"], "disruption": {"consolidationPolicy": "Always"}},
    },
}


@pytest.mark.parametrize("case", sorted(MALFORMED_POOLS))
def test_malformed_nodepools_are_rejected(case: str) -> None:
    assert problems("NodePool", MALFORMED_POOLS[case])


def _node_class(**spec: Any) -> dict[str, Any]:
    base = {
        "role": "KarpenterNodeRole-demo",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "x"},
        "spec": {k: v for k, v in base.items() if v is not None},
    }


MALFORMED_CLASSES = {
    "no subnets": _node_class(subnetSelectorTerms=None),
    "empty amiSelectorTerms": _node_class(amiSelectorTerms=[]),
    "role and instanceProfile (CEL)": _node_class(instanceProfile="p"),
    "alias mixed with other terms (CEL)": _node_class(
        amiSelectorTerms=[{"alias": "al2023@latest"}, {"id": "ami-1"}]
    ),
    "no alias and no amiFamily (CEL)": _node_class(amiSelectorTerms=[{"id": "ami-123"}]),
    "unknown amiFamily": _node_class(amiFamily="Gentoo"),
    "restricted tag (CEL)": _node_class(tags={"karpenter.sh/nodepool": "x"}),
    "bad httpTokens": _node_class(metadataOptions={"httpTokens": "sometimes"}),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_CLASSES))
def test_malformed_ec2nodeclasses_are_rejected(case: str) -> None:
    assert problems("EC2NodeClass", MALFORMED_CLASSES[case])


def test_the_kwok_nodeclass_schema_accepts_a_registration_delay() -> None:
    ok = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "d"},
        "spec": {"nodeRegistrationDelay": "5s"},
    }
    assert problems("KWOKNodeClass", ok) == []
    assert problems("KWOKNodeClass", {**ok, "spec": {"nodeRegistrationDelay": "soon"}})


# -- the dashboard -------------------------------------------------------------------------------
def _registry_names() -> set[str]:
    names: set[str] = set()
    for family in Metrics().registry.collect():
        if family.type == "counter":
            names |= {f"{family.name}_total", f"{family.name}_created"}
        elif family.type == "histogram":
            names |= {f"{family.name}_bucket", f"{family.name}_sum", f"{family.name}_count", family.name}
        else:
            names.add(family.name)
    return names


def test_every_metric_the_dashboard_queries_exists_in_karpys_registry() -> None:
    dashboard = json.loads((DEPLOY / "grafana/karpy.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])  # (a row has none)
        for name in re.findall(r"\bkarpy_[a-z0-9_]+", target["expr"])
    }
    assert queried, "the dashboard queries no karpy metric"
    assert queried - _registry_names() == set()


def test_docs_metrics_lists_every_registered_metric() -> None:
    text = (ROOT / "docs/metrics.md").read_text()
    for family in Metrics().registry.collect():
        assert f"`{family.name}" in text, family.name


def test_the_dashboard_has_a_shadow_row_charting_the_comparisons() -> None:
    dashboard = json.loads((DEPLOY / "grafana/karpy.json").read_text())
    (row,) = [p for p in dashboard["panels"] if p["type"] == "row"]
    assert row["title"].startswith("Shadow mode")
    below = [p for p in dashboard["panels"] if p["gridPos"]["y"] > row["gridPos"]["y"]]
    queried = {
        n for p in below for t in p["targets"] for n in re.findall(r"\bkarpy_shadow_[a-z_]+", t["expr"])
    }
    assert queried == {
        "karpy_shadow_fleet_cost_per_hour",
        "karpy_shadow_fleet_nodes",
        "karpy_shadow_launches_total",
        "karpy_shadow_installed_launches_total",
        "karpy_shadow_disruptions_total",
        "karpy_shadow_installed_disruptions_total",
        "karpy_shadow_disruptions_agreed_total",
        "karpy_shadow_launch_agreement_ratio",
        "karpy_shadow_pods_matched_total",
    }
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
