"""Node class schemas: ``karpenter.k8s.aws/v1`` EC2NodeClass and ``karpenter.kwok.sh/v1alpha1`` KWOKNodeClass.

EC2NodeClass rules checked (cheap CEL from ``karpenter.k8s.aws_ec2nodeclasses.yaml``):
``amiFamily`` enum, ``alias`` as ``family@version`` (known family, Windows only ``@latest``,
alone in its term and the only term), ``amiFamily`` required without an alias and
matching it (or ``Custom``) with one, ``role`` xor ``instanceProfile``, selector terms
non-empty, at most one root volume. Parsed by :mod:`karpy.api.load`, converted by
:mod:`karpy.api.convert`.
"""

# ruff: noqa: RUF012  (pydantic copies mutable defaults per instance)

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from karpy.api import common

__all__ = ["ALIAS_FAMILIES", "AMI_FAMILIES", "EC2NodeClass", "EC2NodeClassSpec", "KWOKNodeClass"]

AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025")
ALIAS_FAMILIES = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
_ALIAS = re.compile(r"^([^@]+)@(.+)$")


class SelectorTerm(common.K8sModel):
    """A subnet or security-group selector term: ``tags``, or ``id`` alone (or ``name``)."""

    tags: dict[str, str] = {}
    id: str = ""
    name: str = ""

    @model_validator(mode="after")
    def _one_way(self) -> SelectorTerm:
        if not (self.tags or self.id or self.name):
            raise common.FieldError((), "expected at least one of tags, id or name, got none")
        if self.id and (self.tags or self.name):
            raise common.FieldError(("id",), "'id' is mutually exclusive, cannot be set with tags or name")
        for key, value in self.tags.items():
            if not key or not value:
                raise common.FieldError(("tags", key), "empty tag keys or values aren't supported")
        return self


class AMISelectorTerm(common.K8sModel):
    alias: Annotated[str, Field(max_length=30)] = ""
    id: str = ""
    name: str = ""
    owner: str = ""
    tags: dict[str, str] = {}
    ssm_parameter: str = ""

    @model_validator(mode="after")
    def _alias_format(self) -> AMISelectorTerm:
        others = self.id or self.name or self.owner or self.tags or self.ssm_parameter
        if not (self.alias or others):
            raise common.FieldError(
                (), "expected at least one of alias, id, name, tags or ssmParameter, got none"
            )
        if not self.alias:
            return self
        if others:
            raise common.FieldError(
                ("alias",), "'alias' is mutually exclusive, cannot be set with other fields of the term"
            )
        match = _ALIAS.match(self.alias)
        if match is None:
            raise common.FieldError(("alias",), f'"{self.alias}" must have the format family@version')
        family, version = match.groups()
        if family not in ALIAS_FAMILIES:
            raise common.FieldError(
                ("alias",), f'family "{family}" is not supported (one of {", ".join(ALIAS_FAMILIES)})'
            )
        if family.startswith("windows") and version != "latest":
            raise common.FieldError(("alias",), "windows families may only specify version 'latest'")
        return self

    @property
    def alias_family(self) -> str | None:
        """The amiFamily the alias names (``al2023@latest`` → ``AL2023``), or None."""
        match = _ALIAS.match(self.alias)
        return ALIAS_FAMILIES.get(match.group(1)) if match else None


class EBS(common.K8sModel):
    volume_size: common.Quantity | None = None
    volume_type: Annotated[str, common.one_of("standard", "io1", "io2", "gp2", "sc1", "st1", "gp3")] = "gp3"
    snapshot_id: str = Field("", alias="snapshotID")


class BlockDeviceMapping(common.K8sModel):
    device_name: str = ""
    root_volume: bool = False
    ebs: EBS | None = None


class KubeletConfiguration(common.K8sModel):
    max_pods: Annotated[int | None, common.at_least(0)] = None
    pods_per_core: Annotated[int | None, common.at_least(0)] = None
    system_reserved: common.ResourceList = {}
    kube_reserved: common.ResourceList = {}
    eviction_hard: dict[str, str] = {}
    eviction_soft: dict[str, str] = {}


class EC2NodeClassSpec(common.K8sModel):
    subnet_selector_terms: Annotated[list[SelectorTerm], Field(min_length=1, max_length=30)]
    security_group_selector_terms: Annotated[list[SelectorTerm], Field(min_length=1, max_length=30)]
    ami_selector_terms: Annotated[list[AMISelectorTerm], Field(min_length=1, max_length=30)]
    ami_family: Annotated[str, common.one_of(*AMI_FAMILIES)] | None = None
    role: str | None = None
    instance_profile: str | None = None
    user_data: str = ""
    tags: dict[str, str] = {}
    kubelet: KubeletConfiguration = KubeletConfiguration()
    block_device_mappings: Annotated[list[BlockDeviceMapping], Field(max_length=50)] = []
    instance_store_policy: Annotated[str, common.one_of("RAID0")] | None = None

    @model_validator(mode="after")
    def _object_rules(self) -> EC2NodeClassSpec:
        if (self.role is None) == (self.instance_profile is None):
            raise common.FieldError((), "must specify exactly one of ['role', 'instanceProfile']")
        aliases = [t for t in self.ami_selector_terms if t.alias]
        if aliases and len(self.ami_selector_terms) > 1:
            raise common.FieldError(
                ("amiSelectorTerms",),
                "'alias' is mutually exclusive, cannot be set with other amiSelectorTerms",
            )
        if not aliases and self.ami_family is None:
            raise common.FieldError(
                ("amiFamily",), "amiFamily is required when amiSelectorTerms has no alias"
            )
        if aliases and self.ami_family not in (None, "Custom", aliases[0].alias_family):
            raise common.FieldError(
                ("amiFamily",),
                f'"{self.ami_family}" must match the alias family ({aliases[0].alias_family}) or be Custom',
            )
        if sum(1 for m in self.block_device_mappings if m.root_volume) > 1:
            raise common.FieldError(
                ("blockDeviceMappings",), "must have only one blockDeviceMapping with rootVolume"
            )
        return self

    def resolved_ami_family(self) -> str:
        """``amiFamily``, or the family inferred from the alias."""
        if self.ami_family:
            return self.ami_family
        for term in self.ami_selector_terms:
            if term.alias_family:
                return term.alias_family
        return "AL2023"


class EC2NodeClass(common.K8sModel):
    api_version: Literal["karpenter.k8s.aws/v1"] = "karpenter.k8s.aws/v1"
    kind: Literal["EC2NodeClass"] = "EC2NodeClass"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: EC2NodeClassSpec


class KWOKNodeClassSpec(common.K8sModel):
    node_registration_delay: common.GoDuration | None = None


class KWOKNodeClass(common.K8sModel):
    api_version: Literal["karpenter.kwok.sh/v1alpha1"] = "karpenter.kwok.sh/v1alpha1"
    kind: Literal["KWOKNodeClass"] = "KWOKNodeClass"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: KWOKNodeClassSpec = KWOKNodeClassSpec()
