"""Karpenter's legacy APIs read as v1: each field mapping, each warning, each error, and the loader's use."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy.api import load
from karpy.api.legacy import base
from karpy.api.legacy import convert as legacy

PROVISIONER = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: default}
"""
TEMPLATE = """\
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
  instanceProfile: NodeProfile
"""
BETA_POOL = """\
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: default}
"""
BETA_CLASS = """\
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: AL2023
  role: NodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""


def _with(doc: str, path: str, value: Any) -> dict[str, Any]:
    """``doc`` parsed, with ``value`` set at the dotted ``path`` (None deletes it)."""
    raw: dict[str, Any] = yaml.safe_load(doc)
    *parents, last = path.split(".")
    node = raw
    for key in parents:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return raw


def _convert(*raws: dict[str, Any], options: base.Options | None = None) -> list[base.Result]:
    return legacy.convert_all(list(raws), options)


def _one(raw: dict[str, Any], **kw: Any) -> tuple[list[dict[str, Any]], list[base.Note]]:
    (result,) = _convert(raw, **kw)
    return [o.raw for o in result.outputs], result.notes


def _pool_spec(raw: dict[str, Any]) -> dict[str, Any]:
    outputs, notes = _one(raw)
    assert not [n for n in notes if n.error], notes
    spec: dict[str, Any] = outputs[0]["spec"]
    return spec


def _class_spec(raw: dict[str, Any], **kw: Any) -> tuple[dict[str, Any], list[base.Note]]:
    outputs, notes = _one(raw, **kw)
    return outputs[-1]["spec"], notes


def _loaded(*docs: str | dict[str, Any], file: str = "old.yaml") -> load.Loaded:
    text = "---\n".join(d if isinstance(d, str) else yaml.safe_dump(d) for d in docs)
    return load.load_text(text, file=file)


# --- v1alpha5 Provisioner ----------------------------------------------------------------


def test_provisioner_fields_move_into_the_template() -> None:
    raw = yaml.safe_load(PROVISIONER)
    raw["metadata"].update(labels={"owner": "me"}, uid="abc", resourceVersion="7")
    raw["spec"].update(
        labels={"team": "a"},
        annotations={"example.com/owner": "a"},
        taints=[{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
        startupTaints=[{"key": "not-ready", "effect": "NoSchedule"}],
        limits={"resources": {"cpu": "1000", "memory": "1000Gi"}},
        weight=50,
    )
    (pool,), notes = _one(raw)
    assert notes == []
    assert (pool["apiVersion"], pool["kind"]) == ("karpenter.sh/v1", "NodePool")
    assert pool["metadata"] == {"name": "default", "labels": {"owner": "me"}}  # server fields stay behind
    template = pool["spec"]["template"]
    assert template["metadata"] == {"labels": {"team": "a"}, "annotations": {"example.com/owner": "a"}}
    assert template["spec"]["taints"] == raw["spec"]["taints"]
    assert template["spec"]["startupTaints"] == raw["spec"]["startupTaints"]
    assert template["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert pool["spec"]["limits"] == {"cpu": "1000", "memory": "1000Gi"}
    assert pool["spec"]["weight"] == 50


def test_requirement_defaults_of_the_v1alpha5_webhook_are_written_out() -> None:
    spec = _pool_spec(yaml.safe_load(PROVISIONER))
    assert spec["template"]["spec"]["requirements"] == [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
    ]


def test_requirement_defaults_leave_constrained_keys_alone() -> None:
    mine = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7g"]},
    ]
    spec = _pool_spec(_with(PROVISIONER, "spec.requirements", mine))
    assert spec["template"]["spec"]["requirements"] == [
        *mine,
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]


@pytest.mark.parametrize(
    ("fields", "disruption"),
    [
        ({"ttlSecondsAfterEmpty": 30}, {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}),
        (
            {"consolidation": {"enabled": True}},
            {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
        ),
        (
            {"consolidation": {"enabled": False}, "ttlSecondsAfterEmpty": 90},
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m30s"},
        ),
        ({}, {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}),
    ],
)
def test_emptiness_and_consolidation_become_a_consolidation_policy(
    fields: dict[str, Any], disruption: dict[str, str]
) -> None:
    raw = yaml.safe_load(PROVISIONER)
    raw["spec"].update(fields)
    assert _pool_spec(raw)["disruption"] == disruption


@pytest.mark.parametrize(("ttl", "expire"), [(2592000, "720h"), (90, "1m30s"), (None, "Never")])
def test_ttl_seconds_until_expired_becomes_expire_after(ttl: int | None, expire: str) -> None:
    spec = _pool_spec(_with(PROVISIONER, "spec.ttlSecondsUntilExpired", ttl))
    assert spec["template"]["spec"]["expireAfter"] == expire


@pytest.mark.parametrize(
    ("fields", "path", "message"),
    [
        (
            {"consolidation": {"enabled": True}, "ttlSecondsAfterEmpty": 30},
            "spec.ttlSecondsAfterEmpty",
            "cannot be set together with consolidation.enabled: true",
        ),
        ({"ttlSecondsAfterEmpty": "soon"}, "spec.ttlSecondsAfterEmpty", "expected a whole number of seconds"),
        ({"ttlSecondsUntilExpired": -5}, "spec.ttlSecondsUntilExpired", "expected a whole number of seconds"),
        ({"consolidation": {"enabled": "yes"}}, "spec.consolidation.enabled", "expected true or false"),
        ({"providerRef": None}, "spec.providerRef", "required (or spec.provider)"),
        (
            {"providerRef": {"kind": "KWOKNodeClass", "name": "x"}},
            "spec.providerRef.kind",
            "only AWSNodeTemplate",
        ),
        ({"providerRef": {"kind": "AWSNodeTemplate"}}, "spec.providerRef.name", "required"),
        (
            {"kubeletConfiguration": {"maxPods": -1}},
            "spec.kubeletConfiguration.maxPods",
            "must be at least 0",
        ),
        (
            {"provider": {"subnetSelector": {"a": "b"}, "securityGroupSelector": {"a": "b"}}},
            "spec.provider",
            "cannot be set together with spec.providerRef",
        ),
    ],
)
def test_provisioner_errors_name_the_legacy_field(fields: dict[str, Any], path: str, message: str) -> None:
    raw = yaml.safe_load(PROVISIONER)
    raw["spec"].update(fields)
    raw["spec"] = {k: v for k, v in raw["spec"].items() if v is not None}
    loaded = _loaded(raw, TEMPLATE)
    errors = [p for p in loaded.problems if p.path == path]
    assert errors and message in errors[0].message, [str(p) for p in loaded.problems]
    assert (errors[0].kind, errors[0].name, errors[0].file) == ("Provisioner", "default", "old.yaml")
    assert loaded.node_pools == []


def test_v1_validation_errors_of_a_converted_object_name_the_legacy_field() -> None:
    raw = _with(PROVISIONER, "spec.requirements", [{"key": "kubernetes.io/arch", "operator": "Sometimes"}])
    loaded = _loaded(raw, TEMPLATE)
    (problem,) = loaded.problems
    assert (problem.kind, problem.name, problem.path) == (
        "Provisioner",
        "default",
        "spec.requirements[0].operator",
    )
    bad_limit = _loaded(_with(PROVISIONER, "spec.limits", {"resources": {"cpu": "lots"}}), TEMPLATE)
    assert [p.path for p in bad_limit.problems] == ["spec.limits.resources[cpu]"]


def test_kubelet_configuration_goes_to_the_node_class_and_container_runtime_warns() -> None:
    kubelet = {"containerRuntime": "containerd", "maxPods": 20, "systemReserved": {"cpu": "100m"}}
    loaded = _loaded(_with(PROVISIONER, "spec.kubeletConfiguration", kubelet), TEMPLATE)
    assert loaded.ok, loaded.problems
    (node_class,) = loaded.ec2_node_classes
    assert node_class.kubelet.max_pods == 20 and node_class.kubelet.system_reserved == {"cpu": "100m"}
    (warning,) = loaded.warnings
    assert (warning.kind, warning.path, warning.severity) == (
        "Provisioner",
        "spec.kubeletConfiguration.containerRuntime",
        "warning",
    )
    assert "no v1 equivalent; dropped" in warning.message
    assert str(warning).startswith('old.yaml: document 0 (Provisioner "default"): spec.kubeletConfiguration')


def test_unknown_provisioner_fields_warn_and_are_dropped() -> None:
    loaded = _loaded(_with(PROVISIONER, "spec.futureField", {"x": 1}), TEMPLATE)
    assert loaded.ok and len(loaded.node_pools) == 1
    assert [(w.path, w.message) for w in loaded.warnings] == [
        ("spec.futureField", "has no v1 equivalent; dropped")
    ]


def test_an_inline_provider_becomes_a_node_class_named_after_the_provisioner() -> None:
    provider = {
        "apiVersion": "extensions.karpenter.sh/v1alpha1",
        "kind": "AWS",
        "amiFamily": "Bottlerocket",
        "instanceProfile": "NodeProfile",
        "subnetSelector": {"aws-ids": "subnet-1, subnet-2"},
        "securityGroupSelector": {"Name": "nodes"},
        "tags": {"team": "a"},
    }
    raw = _with(PROVISIONER, "spec.providerRef", None)
    raw["spec"].update(provider=provider, kubeletConfiguration={"maxPods": 30})
    loaded = _loaded(raw)
    assert loaded.ok and loaded.warnings == []
    (pool,), (node_class,) = loaded.node_pools, loaded.ec2_node_classes
    assert pool.node_class_ref is not None and pool.node_class_ref.name == "default" == node_class.name
    assert node_class.ami_aliases == ("bottlerocket@latest",) and node_class.kubelet.max_pods == 30
    assert [t.id for t in node_class.subnet_selector_terms] == ["subnet-1", "subnet-2"]
    assert [t.tags for t in node_class.security_group_selector_terms] == [{"Name": "nodes"}]
    assert node_class.instance_profile == "NodeProfile" and node_class.tags == {"team": "a"}


# --- v1alpha1 AWSNodeTemplate ------------------------------------------------------------


def test_node_template_fields_carry_over() -> None:
    raw = yaml.safe_load(TEMPLATE)
    raw["spec"].update(
        userData="#!/bin/bash\necho hi\n",
        tags={"team": "a"},
        blockDeviceMappings=[
            {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}
        ],
        detailedMonitoring=True,
        context="ctx",
        metadataOptions={"httpTokens": "optional"},
    )
    spec, notes = _class_spec(raw)
    assert notes == []
    assert spec == {
        "amiSelectorTerms": [{"alias": "al2@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "instanceProfile": "NodeProfile",
        "userData": "#!/bin/bash\necho hi\n",
        "tags": {"team": "a"},
        "blockDeviceMappings": raw["spec"]["blockDeviceMappings"],
        "detailedMonitoring": True,
        "context": "ctx",
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 2,
            "httpTokens": "optional",
        },
    }


def test_comma_separated_tag_values_make_one_term_per_combination() -> None:
    raw = _with(TEMPLATE, "spec.subnetSelector", {"tier": "a,b", "env": "prod"})
    spec, _ = _class_spec(raw)
    assert spec["subnetSelectorTerms"] == [
        {"tags": {"tier": "a", "env": "prod"}},
        {"tags": {"tier": "b", "env": "prod"}},
    ]
    too_many = _with(TEMPLATE, "spec.subnetSelector", {"a": ",".join("123456"), "b": ",".join("123456")})
    (problem,) = _loaded(too_many).problems
    assert problem.path == "spec.subnetSelector" and "36 terms" in problem.message


def test_ids_beside_other_filters_keep_the_ids_and_warn() -> None:
    raw = _with(TEMPLATE, "spec.securityGroupSelector", {"aws::ids": "sg-1,sg-2", "Name": "x"})
    spec, notes = _class_spec(raw)
    assert spec["securityGroupSelectorTerms"] == [{"id": "sg-1"}, {"id": "sg-2"}]
    assert [n.path for n in notes] == ["spec.securityGroupSelector[Name]"]


@pytest.mark.parametrize(
    ("family", "alias"),
    [("AL2", "al2@latest"), ("AL2023", "al2023@latest"), ("Bottlerocket", "bottlerocket@latest"),
     ("Windows2022", "windows2022@latest")],
)  # fmt: skip
def test_an_ami_family_without_a_selector_becomes_an_alias(family: str, alias: str) -> None:
    spec, notes = _class_spec(_with(TEMPLATE, "spec.amiFamily", family))
    assert spec["amiSelectorTerms"] == [{"alias": alias}] and "amiFamily" not in spec and notes == []


def test_an_ami_selector_becomes_terms_and_keeps_the_family() -> None:
    by_id = _with(TEMPLATE, "spec.amiSelector", {"aws::ids": "ami-1,ami-2"})
    spec, _ = _class_spec(by_id)
    assert spec["amiFamily"] == "AL2" and spec["amiSelectorTerms"] == [{"id": "ami-1"}, {"id": "ami-2"}]
    by_name = _with(
        TEMPLATE, "spec.amiSelector", {"aws::name": "eks-*", "aws::owners": "self,amazon", "team": "a"}
    )
    by_name["spec"]["amiFamily"] = "Bottlerocket"
    spec, notes = _class_spec(by_name)
    assert spec["amiFamily"] == "Bottlerocket" and notes == []
    assert spec["amiSelectorTerms"] == [
        {"name": "eks-*", "owner": "self", "tags": {"team": "a"}},
        {"name": "eks-*", "owner": "amazon", "tags": {"team": "a"}},
    ]


def test_ubuntu_becomes_al2_with_its_amis_and_fails_without() -> None:
    raw = _with(TEMPLATE, "spec.amiFamily", "Ubuntu")
    raw["spec"]["amiSelector"] = {"aws::ids": "ami-1"}
    spec, notes = _class_spec(raw)
    assert spec["amiFamily"] == "AL2" and [n.path for n in notes] == ["spec.amiFamily"]
    assert not notes[0].error and "Ubuntu has no v1 AMI family" in notes[0].message
    (problem,) = _loaded(_with(TEMPLATE, "spec.amiFamily", "Ubuntu")).problems
    assert (problem.path, problem.kind) == ("spec.amiFamily", "AWSNodeTemplate")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("spec.amiFamily", "Custom", "needs its AMIs selected"),
    ("spec.amiFamily", "Gentoo", "unknown AMI family"),
    ("spec.subnetSelector", None, "required"),
    ("spec.securityGroupSelector", "sg-1", "expected a map"),
])  # fmt: skip
def test_node_template_errors_name_the_field(field: str, value: Any, message: str) -> None:
    (problem,) = _loaded(_with(TEMPLATE, field, value)).problems
    assert problem.path == field and message in problem.message


def test_a_missing_instance_profile_is_a_placeholder_role_or_the_given_identity() -> None:
    raw = _with(TEMPLATE, "spec.instanceProfile", None)
    spec, notes = _class_spec(raw)
    assert spec["role"] == "$KARPENTER_NODE_ROLE"
    assert [n.path for n in notes] == ["spec.instanceProfile"] and "aws.defaultInstanceProfile" in notes[
        0
    ].message
    spec, notes = _class_spec(raw, options=base.Options(role="NodeRole"))
    assert spec["role"] == "NodeRole" and notes == []
    spec, notes = _class_spec(raw, options=base.Options(instance_profile="Profile"))
    assert spec["instanceProfile"] == "Profile" and "role" not in spec and notes == []


def test_launch_template_has_no_v1_equivalent() -> None:
    spec, notes = _class_spec(_with(TEMPLATE, "spec.launchTemplate", "my-template"))
    assert "launchTemplate" not in spec
    assert [(n.path, n.error) for n in notes] == [("spec.launchTemplate", False)]


# --- v1beta1 NodePool / EC2NodeClass / NodeClaim -----------------------------------------


@pytest.mark.parametrize(
    ("disruption", "expected", "expire"),
    [
        (None, {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}, "720h"),
        (
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s", "expireAfter": "Never"},
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
            "Never",
        ),
        (
            {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "168h", "budgets": [{"nodes": "1"}]},
            {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "0s",
                "budgets": [{"nodes": "1"}],
            },
            "168h",
        ),
    ],
)
def test_beta_disruption_becomes_v1_disruption_and_template_expiry(
    disruption: dict[str, Any] | None, expected: dict[str, Any], expire: str
) -> None:
    spec = _pool_spec(_with(BETA_POOL, "spec.disruption", disruption))
    assert spec["disruption"] == expected
    assert spec["template"]["spec"]["expireAfter"] == expire


def test_beta_pool_fields_carry_over() -> None:
    raw = yaml.safe_load(BETA_POOL)
    raw["spec"].update(limits={"cpu": 1000}, weight=5)
    raw["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
    raw["spec"]["template"]["spec"].update(
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"], "minValues": 1}
        ],
        taints=[{"key": "a", "effect": "NoSchedule"}],
        startupTaints=[{"key": "b", "effect": "NoSchedule"}],
    )
    spec = _pool_spec(raw)
    assert spec["limits"] == {"cpu": 1000} and spec["weight"] == 5
    assert spec["template"]["metadata"] == {"labels": {"team": "a"}}
    for key in ("requirements", "taints", "startupTaints"):
        assert spec["template"]["spec"][key] == raw["spec"]["template"]["spec"][key]
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    only_name = _with(BETA_POOL, "spec.template.spec.nodeClassRef", {"name": "other"})
    assert _pool_spec(only_name)["template"]["spec"]["nodeClassRef"]["name"] == "other"


def test_beta_disruption_problems() -> None:
    under = {"consolidationPolicy": "WhenUnderutilized", "consolidateAfter": "5m"}
    _, notes = _one(_with(BETA_POOL, "spec.disruption", under))
    assert [(n.path, n.error) for n in notes] == [("spec.disruption.consolidateAfter", False)]
    for disruption, path in (
        ({"consolidationPolicy": "WhenEmpty"}, "spec.disruption.consolidateAfter"),
        ({"consolidationPolicy": "Sometimes"}, "spec.disruption.consolidationPolicy"),
        (
            {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "soon"},
            "spec.disruption.consolidateAfter",
        ),
        ({"expireAfter": "a week"}, "spec.disruption.expireAfter"),
    ):
        loaded = _loaded(_with(BETA_POOL, "spec.disruption", disruption), BETA_CLASS)
        assert [(p.kind, p.path) for p in loaded.problems] == [("NodePool", path)], disruption


def test_beta_class_without_ami_terms_gets_an_alias_and_keeps_status() -> None:
    raw = yaml.safe_load(BETA_CLASS)
    raw["metadata"]["uid"] = "u-1"
    raw["status"] = {"subnets": [{"id": "subnet-1", "zone": "us-east-1a"}]}
    (doc,), notes = _one(raw)
    assert notes == [] and doc["metadata"]["uid"] == "u-1"  # same kind, newer version: metadata kept
    assert doc["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}] and "amiFamily" not in doc["spec"]
    assert doc["spec"]["metadataOptions"]["httpPutResponseHopLimit"] == 2
    (node_class,) = _loaded(raw).ec2_node_classes
    assert [s.id for s in node_class.status.subnets] == ["subnet-1"]
    pinned = _with(BETA_CLASS, "spec.amiSelectorTerms", [{"id": "ami-1"}])
    spec, _ = _class_spec(pinned)
    assert spec["amiFamily"] == "AL2023" and spec["amiSelectorTerms"] == [{"id": "ami-1"}]


def test_beta_class_problems() -> None:
    (problem,) = _loaded(_with(BETA_CLASS, "spec.amiFamily", None)).problems
    assert (problem.kind, problem.path) == ("EC2NodeClass", "spec.amiFamily")
    loaded = _loaded(_with(BETA_CLASS, "spec.oldField", "x"))
    assert [w.path for w in loaded.warnings] == ["spec.oldField"]
    (problem,) = _loaded(_with(BETA_CLASS, "spec.role", None)).problems
    assert "exactly one of" in problem.message


def test_beta_kubelet_goes_to_the_node_class() -> None:
    loaded = _loaded(_with(BETA_POOL, "spec.template.spec.kubelet", {"maxPods": 42}), BETA_CLASS)
    assert loaded.ok and loaded.warnings == []
    assert [(c.name, c.kubelet.max_pods) for c in loaded.ec2_node_classes] == [("default", 42)]


def _beta_pool(name: str, kubelet: dict[str, Any] | None) -> dict[str, Any]:
    raw = _with(BETA_POOL, "spec.template.spec.kubelet", kubelet)
    raw["metadata"]["name"] = name
    return raw


def test_pools_sharing_a_class_with_different_kubelets_get_copies() -> None:
    loaded = _loaded(
        _beta_pool("gpu", {"maxPods": 110}),
        _beta_pool("batch", {"maxPods": 20}),
        _beta_pool("web", {"maxPods": 20}),
        _beta_pool("plain", None),
        BETA_CLASS,
    )
    assert loaded.ok, loaded.problems
    classes = {c.name: c.kubelet.max_pods for c in loaded.ec2_node_classes}
    assert classes == {"default": 20, "default-gpu": 110, "default-plain": None}
    refs = {p.name: p.node_class_ref.name for p in loaded.node_pools if p.node_class_ref}
    assert refs == {"gpu": "default-gpu", "batch": "default", "web": "default", "plain": "default-plain"}
    assert [(w.name, w.path) for w in loaded.warnings] == [
        ("gpu", "spec.template.spec.kubelet"),
        ("plain", "spec.template.spec.kubelet"),
    ]
    assert "differs from the kubelet of NodePool 'batch'" in loaded.warnings[0].message
    assert "EC2NodeClass 'default-gpu'" in loaded.warnings[0].message


def test_a_kubelet_whose_class_is_not_converted_warns() -> None:
    loaded = _loaded(_beta_pool("a", {"maxPods": 5}))
    (warning,) = loaded.warnings
    assert warning.path == "spec.template.spec.kubelet" and "not among the legacy objects" in warning.message
    ref = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "name": "k"}
    kwok = _with(BETA_POOL, "spec.template.spec.nodeClassRef", ref)
    kwok["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 5}
    (warning,) = _loaded(kwok).warnings
    assert "KWOKNodeClass" in warning.message


def test_beta_node_claim_keeps_status_and_warns_about_its_kubelet() -> None:
    raw = {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abc", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {
                "apiVersion": "karpenter.k8s.aws/v1beta1",
                "kind": "EC2NodeClass",
                "name": "default",
            },
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
            ],
            "resources": {"requests": {"cpu": "1"}},
            "kubelet": {"maxPods": 20},
        },
        "status": {"providerID": "aws:///us-east-1a/i-1", "nodeName": "ip-10-0-0-1"},
    }
    loaded = _loaded(raw)
    (claim,) = loaded.node_claims
    assert (claim.provider_id, claim.node_pool) == ("aws:///us-east-1a/i-1", "default")
    ref = claim.node_class_ref
    assert ref is not None and (ref.group, ref.kind, ref.name) == (
        "karpenter.k8s.aws",
        "EC2NodeClass",
        "default",
    )
    assert claim.requests.as_dict() == {"cpu": "1"}
    assert [(w.kind, w.path) for w in loaded.warnings] == [("NodeClaim", "spec.kubelet")]


# --- the loader ------------------------------------------------------------------------


def test_legacy_objects_in_a_list_name_their_item() -> None:
    bad = _with(PROVISIONER, "spec.ttlSecondsAfterEmpty", "x")
    listed = {"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(TEMPLATE), bad]}
    (problem,) = _loaded(listed).problems
    assert problem.path == "items[1].spec.ttlSecondsAfterEmpty"


def test_legacy_documents_of_several_files_convert_as_one_set(tmp_path: Path) -> None:
    (tmp_path / "a-provisioner.yaml").write_text(
        yaml.safe_dump(_with(PROVISIONER, "spec.kubeletConfiguration", {"maxPods": 12}))
    )
    (tmp_path / "b-template.yaml").write_text(TEMPLATE)
    loaded = load.load_paths([tmp_path])
    assert loaded.ok and loaded.warnings == []
    assert [(c.name, c.kubelet.max_pods) for c in loaded.ec2_node_classes] == [("default", 12)]
    merged = load.Loaded()
    merged.extend(loaded)
    assert merged.warnings == loaded.warnings and len(merged.node_pools) == 1


def test_the_loader_passes_options_and_never_mutates_its_input() -> None:
    raws = [yaml.safe_load(PROVISIONER), _with(TEMPLATE, "spec.instanceProfile", None)]
    before = copy.deepcopy(raws)
    first = [[o.raw for o in r.outputs] for r in legacy.convert_all(raws)]
    again = [[o.raw for o in r.outputs] for r in legacy.convert_all(raws)]
    assert raws == before and first == again
    text = PROVISIONER + "---\n" + yaml.safe_dump(raws[1])
    loaded = load.load_text(text, legacy_options=base.Options(role="R"))
    assert loaded.warnings == [] and loaded.ec2_node_classes[0].role == "R"


def test_v1_objects_beside_legacy_ones_load_as_before() -> None:
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n"
    loaded = _loaded(pod, PROVISIONER, TEMPLATE)
    assert loaded.ok and [p.name for p in loaded.pods] == ["p"] and len(loaded.node_pools) == 1
    assert loaded.skipped == []
