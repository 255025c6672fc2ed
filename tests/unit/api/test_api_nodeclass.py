"""EC2NodeClass and KWOKNodeClass: conversion and the cheap upstream rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy import api
from karpy.model import nodeclass

_BASE: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-demo",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}, {"id": "subnet-0abc"}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
    },
}


def _spec(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(_BASE)
    for key, value in changes.items():
        if value is None:
            raw["spec"].pop(key, None)
        else:
            raw["spec"][key] = value
    return raw


def _convert(raw: dict[str, Any]) -> nodeclass.EC2NodeClass:
    obj, problems = api.parse_object(raw, file="nc.yaml", index=1)
    assert problems == []
    assert isinstance(obj, nodeclass.EC2NodeClass)
    return obj


def test_alias_implies_family() -> None:
    nc = _convert(_spec())
    assert nc.ami_family == "AL2023" and nc.ami_aliases == ("al2023@latest",)
    assert nc.role == "KarpenterNodeRole-demo" and nc.instance_profile == ""
    assert nc.subnet_selector_terms == (
        nodeclass.SelectorTerm(tags={"karpenter.sh/discovery": "demo"}),
        nodeclass.SelectorTerm(id="subnet-0abc"),
    )


@pytest.mark.parametrize(
    ("alias", "family"),
    [
        ("al2@v20240807", "AL2"),
        ("bottlerocket@1.20.3", "Bottlerocket"),
        ("windows2025@latest", "Windows2025"),
    ],
)
def test_alias_families(alias: str, family: str) -> None:
    assert _convert(_spec(amiSelectorTerms=[{"alias": alias}])).ami_family == family


def test_custom_family_with_alias_and_explicit_family_with_ids() -> None:
    assert _convert(_spec(amiFamily="Custom")).ami_family == "Custom"
    nc = _convert(_spec(amiFamily="AL2", amiSelectorTerms=[{"id": "ami-123"}, {"id": "ami-456"}]))
    assert nc.ami_family == "AL2" and nc.ami_aliases == ()


def test_full_conversion() -> None:
    raw = _spec(
        role=None,
        instanceProfile="KarpenterNodeInstanceProfile",
        kubelet={
            "maxPods": 110,
            "podsPerCore": 10,
            "kubeReserved": {"cpu": "200m"},
            "systemReserved": {"memory": "100Mi"},
            "evictionHard": {"memory.available": "5%"},
            "evictionSoft": {"nodefs.available": "15%"},
            "clusterDNS": ["10.0.0.10"],
        },
        blockDeviceMappings=[
            {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "100Gi"}},
            {"deviceName": "/dev/xvdb", "ebs": {"snapshotID": "snap-1"}},
        ],
        instanceStorePolicy="RAID0",
        tags={"team": "platform"},
        userData="echo hi",
        metadataOptions={"httpTokens": "required"},
    )
    nc = _convert(raw)
    assert nc.instance_profile == "KarpenterNodeInstanceProfile" and nc.role == ""
    assert nc.kubelet == nodeclass.KubeletConfig(
        110,
        10,
        {"cpu": "200m"},
        {"memory": "100Mi"},
        {"memory.available": "5%"},
        {"nodefs.available": "15%"},
        cluster_dns=("10.0.0.10",),
    )
    assert nc.block_device_mappings == (
        nodeclass.BlockDevice("/dev/xvda", "100Gi", True, volume_type="gp3"),
        nodeclass.BlockDevice("/dev/xvdb", None, False, volume_type="gp3", snapshot_id="snap-1"),
    )
    assert nc.metadata_options == nodeclass.MetadataOptions()
    assert (
        nc.instance_store_policy == "RAID0" and nc.tags == {"team": "platform"} and nc.user_data == "echo hi"
    )


_LINE = 'nc.yaml: document 1 (EC2NodeClass "default"): '


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"role": None}, "spec: must specify exactly one of ['role', 'instanceProfile']"),
        ({"instanceProfile": "p"}, "spec: must specify exactly one of ['role', 'instanceProfile']"),
        (
            {"amiFamily": "Ubuntu"},
            'spec.amiFamily: "Ubuntu" is not one of AL2, AL2023, Bottlerocket, '
            "Custom, Windows2019, Windows2022, "
            "Windows2025",
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023"}]},
            'spec.amiSelectorTerms[0].alias: "al2023" must have the format family@version',
        ),
        (
            {"amiSelectorTerms": [{"alias": "ubuntu@latest"}]},
            'spec.amiSelectorTerms[0].alias: family "ubuntu" is not supported (one '
            "of al2, al2023, bottlerocket, "
            "windows2019, windows2022, windows2025)",
        ),
        (
            {"amiSelectorTerms": [{"alias": "windows2022@v1"}]},
            "spec.amiSelectorTerms[0].alias: windows families may only specify version 'latest'",
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest", "id": "ami-1"}]},
            "spec.amiSelectorTerms[0].alias: 'alias' is mutually exclusive, cannot "
            "be set with other fields of "
            "the term",
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest"}, {"id": "ami-1"}]},
            "spec.amiSelectorTerms: 'alias' is mutually exclusive, cannot be set with other amiSelectorTerms",
        ),
        (
            {"amiSelectorTerms": [{"id": "ami-1"}]},
            "spec.amiFamily: amiFamily is required when amiSelectorTerms has no alias",
        ),
        (
            {"amiFamily": "Bottlerocket"},
            'spec.amiFamily: "Bottlerocket" must match the alias family (AL2023) or be Custom',
        ),
        (
            {"amiSelectorTerms": [{}]},
            "spec.amiSelectorTerms[0]: expected at least one of alias, id, name, "
            "tags or ssmParameter, got none",
        ),
        ({"amiSelectorTerms": None}, "spec.amiSelectorTerms: required"),
        (
            {"subnetSelectorTerms": []},
            "spec.subnetSelectorTerms: List should have at least 1 item after validation, not 0",
        ),
        (
            {"subnetSelectorTerms": [{"id": "subnet-1", "tags": {"a": "b"}}]},
            "spec.subnetSelectorTerms[0].id: 'id' is mutually exclusive, cannot be set with tags or name",
        ),
        (
            {"securityGroupSelectorTerms": [{"tags": {"a": ""}}]},
            "spec.securityGroupSelectorTerms[0].tags[a]: empty tag keys or values aren't supported",
        ),
        (
            {
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "rootVolume": True},
                    {"deviceName": "/dev/xvdb", "rootVolume": True},
                ]
            },
            "spec.blockDeviceMappings: must have only one blockDeviceMapping with rootVolume",
        ),
        (
            {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "lots"}}]},
            'spec.blockDeviceMappings[0].ebs.volumeSize: "lots" is not a quantity '
            "(expected e.g. 100m, 1.5Gi, 2k or "
            "1e3)",
        ),
        ({"instanceStorePolicy": "RAID5"}, 'spec.instanceStorePolicy: "RAID5" is not one of RAID0'),
        (
            {"kubelet": {"kubeReserved": {"cpu": "a lot"}}},
            'spec.kubelet.kubeReserved[cpu]: "a lot" is not a quantity (expected '
            "e.g. 100m, 1.5Gi, 2k or 1e3)",
        ),
    ],
)
def test_rules(changes: dict[str, Any], expected: str) -> None:
    obj, problems = api.parse_object(_spec(**changes), file="nc.yaml", index=1)
    assert obj is None
    assert [str(p) for p in problems] == [_LINE + expected]


def test_kwok_node_class() -> None:
    raw = {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
    }
    obj, problems = api.parse_object(raw, file="k.yaml", index=0)
    assert problems == [] and obj == nodeclass.KWOKNodeClass("default", 0.0)
    raw["spec"] = {"nodeRegistrationDelay": "1m30s"}
    obj, _ = api.parse_object(raw, file="k.yaml", index=0)
    assert obj == nodeclass.KWOKNodeClass("default", 90.0)
