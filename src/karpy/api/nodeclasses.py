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
    kms_key_id: str = Field("", alias="kmsKeyID")
    iops: Annotated[int | None, common.at_least(0)] = None
    throughput: Annotated[int | None, common.at_least(0)] = None
    encrypted: bool | None = None
    delete_on_termination: bool | None = None
    volume_initialization_rate: Annotated[int | None, common.between(100, 300)] = None

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> EBS:
        if self.volume_size is None and not self.snapshot_id:
            raise common.FieldError((), "snapshotID or volumeSize must be defined")
        if self.volume_initialization_rate is not None and not self.snapshot_id:
            raise common.FieldError(("volumeInitializationRate",), "requires snapshotID")
        return self


class BlockDeviceMapping(common.K8sModel):
    device_name: str = ""
    root_volume: bool = False
    ebs: EBS | None = None


class MetadataOptions(common.K8sModel):
    http_endpoint: Annotated[str, common.one_of("enabled", "disabled")] = "enabled"
    http_protocol_ipv6: Annotated[str, common.one_of("enabled", "disabled")] = Field(
        "disabled", alias="httpProtocolIPv6"
    )
    http_put_response_hop_limit: Annotated[int, common.between(1, 64)] = 1
    http_tokens: Annotated[str, common.one_of("required", "optional")] = "required"


class CapacityReservationSelectorTerm(common.K8sModel):
    tags: dict[str, str] = {}
    id: str = ""
    owner_id: str = Field("", alias="ownerID")
    instance_match_criteria: Annotated[str, common.one_of("", "open", "targeted")] = ""

    @model_validator(mode="after")
    def _one_way(self) -> CapacityReservationSelectorTerm:
        if not (self.tags or self.id):
            raise common.FieldError((), "expected at least one of tags or id, got none")
        if self.id and (self.tags or self.owner_id):
            raise common.FieldError(("id",), "'id' is mutually exclusive, cannot be set with tags or ownerID")
        if self.id and not self.id.startswith("cr-"):
            raise common.FieldError(("id",), f'"{self.id}" must start with cr-')
        if self.owner_id and not re.fullmatch(r"[0-9]{12}", self.owner_id):
            raise common.FieldError(("ownerID",), f'"{self.owner_id}" must be a 12-digit AWS account id')
        return self


class KubeletConfiguration(common.K8sModel):
    max_pods: Annotated[int | None, common.at_least(0)] = None
    pods_per_core: Annotated[int | None, common.at_least(0)] = None
    system_reserved: common.ResourceList = {}
    kube_reserved: common.ResourceList = {}
    eviction_hard: dict[str, str] = {}
    eviction_soft: dict[str, str] = {}
    eviction_soft_grace_period: dict[str, str] = {}
    eviction_max_pod_grace_period: int | None = None
    cluster_dns: list[str] = Field([], alias="clusterDNS")
    image_gc_high_threshold_percent: Annotated[int | None, common.between(0, 100)] = Field(
        None, alias="imageGCHighThresholdPercent"
    )
    image_gc_low_threshold_percent: Annotated[int | None, common.between(0, 100)] = Field(
        None, alias="imageGCLowThresholdPercent"
    )
    cpu_cfs_quota: bool | None = Field(None, alias="cpuCFSQuota")

    @model_validator(mode="after")
    def _gc_thresholds(self) -> KubeletConfiguration:
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and high <= low:
            raise common.FieldError(
                ("imageGCHighThresholdPercent",), "must be greater than imageGCLowThresholdPercent"
            )
        return self


# Tag keys karpy (as Karpenter) sets itself: a NodeClass may not set them.
_RESTRICTED_TAGS = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)
_RESTRICTED_TAG_PREFIX = "kubernetes.io/cluster/"


def _check_tags(tags: dict[str, str]) -> dict[str, str]:
    for key in tags:
        if not key:
            raise common.FieldError(("tags",), "empty tag keys aren't supported")
        if key in _RESTRICTED_TAGS or key.startswith(_RESTRICTED_TAG_PREFIX):
            raise common.FieldError(("tags", key), f'tag "{key}" is restricted (karpy sets it)')
    return tags


class EC2NodeClassSpec(common.K8sModel):
    subnet_selector_terms: Annotated[list[SelectorTerm], Field(min_length=1, max_length=30)]
    security_group_selector_terms: Annotated[list[SelectorTerm], Field(min_length=1, max_length=30)]
    ami_selector_terms: Annotated[list[AMISelectorTerm], Field(min_length=1, max_length=30)]
    ami_family: Annotated[str, common.one_of(*AMI_FAMILIES)] | None = None
    role: str | None = None
    instance_profile: str | None = None
    user_data: str = ""
    tags: dict[str, str] = {}
    kubelet: KubeletConfiguration = Field(default_factory=KubeletConfiguration)
    block_device_mappings: Annotated[list[BlockDeviceMapping], Field(max_length=50)] = []
    instance_store_policy: Annotated[str, common.one_of("RAID0")] | None = None
    capacity_reservation_selector_terms: Annotated[
        list[CapacityReservationSelectorTerm], Field(max_length=30)
    ] = []
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    detailed_monitoring: bool | None = None
    associate_public_ip_address: bool | None = Field(None, alias="associatePublicIPAddress")
    context: str = ""

    @model_validator(mode="after")
    def _object_rules(self) -> EC2NodeClassSpec:
        _check_tags(self.tags)
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


class SubnetStatus(common.K8sModel):
    id: str
    zone: str = ""
    zone_id: str = Field("", alias="zoneID")


class SecurityGroupStatus(common.K8sModel):
    id: str
    name: str = ""


class AMIStatus(common.K8sModel):
    id: str
    name: str = ""
    deprecated: bool = False
    requirements: list[common.NodeSelectorRequirement] = []


class CapacityReservationStatus(common.K8sModel):
    id: str
    instance_type: str = ""
    availability_zone: str = ""
    owner_id: str = Field("", alias="ownerID")
    instance_match_criteria: str = "open"
    reservation_type: str = "default"
    state: str = "active"
    end_time: common.Time | None = None


class EC2NodeClassStatus(common.K8sModel):
    """What the AWS provider's NodeClass controller resolved (written by karpy, read back)."""

    subnets: list[SubnetStatus] = []
    security_groups: list[SecurityGroupStatus] = []
    amis: list[AMIStatus] = []
    instance_profile: str = ""
    capacity_reservations: list[CapacityReservationStatus] = []
    conditions: list[common.Condition] = []


class EC2NodeClass(common.K8sModel):
    api_version: Literal["karpenter.k8s.aws/v1"] = "karpenter.k8s.aws/v1"
    kind: Literal["EC2NodeClass"] = "EC2NodeClass"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus = Field(default_factory=EC2NodeClassStatus)


class KWOKNodeClassSpec(common.K8sModel):
    node_registration_delay: common.GoDuration | None = None


class KWOKNodeClass(common.K8sModel):
    api_version: Literal["karpenter.kwok.sh/v1alpha1"] = "karpenter.kwok.sh/v1alpha1"
    kind: Literal["KWOKNodeClass"] = "KWOKNodeClass"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: KWOKNodeClassSpec = Field(default_factory=KWOKNodeClassSpec)
