"""Node classes: ``karpenter.k8s.aws/v1`` EC2NodeClass and ``karpenter.kwok.sh/v1alpha1`` KWOKNodeClass.

An :class:`EC2NodeClass` carries its whole spec as users write it (what changes scheduling
math: kubelet, block devices, instance-store policy; what the AWS provider launches with:
selector terms, user data, tags, metadata options, role or instance profile) and the status
the AWS provider's NodeClass controller resolves (subnets, security groups, AMIs, instance
profile, capacity reservations, conditions). Built by :mod:`karpy.api`; consumed by
:mod:`karpy.core.capacity`, the catalog and :mod:`karpy.providers.aws`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from karpy.model.objects import Condition
from karpy.model.requirements import Requirement

__all__ = [
    "AMI",
    "AMISelectorTerm",
    "BlockDevice",
    "CapacityReservation",
    "CapacityReservationSelectorTerm",
    "EC2NodeClass",
    "EC2NodeClassStatus",
    "KWOKNodeClass",
    "KubeletConfig",
    "MetadataOptions",
    "NodeClass",
    "SecurityGroup",
    "SelectorTerm",
    "Subnet",
]


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """``spec.kubelet``: the settings that change allocatable and the ones passed to the node."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: dict[str, str] = field(default_factory=dict)
    system_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)
    eviction_soft: dict[str, str] = field(default_factory=dict)
    eviction_soft_grace_period: dict[str, str] = field(default_factory=dict)
    eviction_max_pod_grace_period: int | None = None
    cluster_dns: tuple[str, ...] = ()
    image_gc_high_threshold_percent: int | None = None
    image_gc_low_threshold_percent: int | None = None
    cpu_cfs_quota: bool | None = None


@dataclass(frozen=True, slots=True)
class BlockDevice:
    """One ``blockDeviceMappings`` entry (``volume_size`` as written, e.g. ``"100Gi"``)."""

    device_name: str
    volume_size: str | None = None
    root_volume: bool = False
    volume_type: str = ""  # "" = gp3, the CRD default
    iops: int | None = None
    throughput: int | None = None
    encrypted: bool | None = None
    kms_key_id: str = ""
    snapshot_id: str = ""
    delete_on_termination: bool | None = None
    volume_initialization_rate: int | None = None


@dataclass(frozen=True, slots=True)
class MetadataOptions:
    """Instance metadata service options; the defaults are the CRD's (IMDSv2 required, hop limit 1)."""

    http_endpoint: str = "enabled"
    http_protocol_ipv6: str = "disabled"
    http_put_response_hop_limit: int = 1
    http_tokens: str = "required"


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """A subnet or security-group selector term: ``tags`` (a value ``*`` = any), ``id`` or ``name``."""

    tags: dict[str, str] = field(default_factory=dict)
    id: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class AMISelectorTerm:
    alias: str = ""  # family@version, e.g. al2023@latest
    id: str = ""
    name: str = ""
    owner: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    ssm_parameter: str = ""


@dataclass(frozen=True, slots=True)
class CapacityReservationSelectorTerm:
    tags: dict[str, str] = field(default_factory=dict)
    id: str = ""
    owner_id: str = ""
    instance_match_criteria: str = ""  # open | targeted


@dataclass(frozen=True, slots=True)
class Subnet:
    id: str
    zone: str
    zone_id: str = ""


@dataclass(frozen=True, slots=True)
class SecurityGroup:
    id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class AMI:
    """One resolved AMI and the instance-type requirements it serves (arch, GPU or not...)."""

    id: str
    name: str = ""
    deprecated: bool = False
    requirements: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    id: str
    instance_type: str
    availability_zone: str
    owner_id: str = ""
    instance_match_criteria: str = "open"
    reservation_type: str = "default"  # default | capacity-block
    state: str = "active"  # active | expiring
    end_time: float | None = None


@dataclass(frozen=True, slots=True)
class EC2NodeClassStatus:
    subnets: tuple[Subnet, ...] = ()
    security_groups: tuple[SecurityGroup, ...] = ()
    amis: tuple[AMI, ...] = ()
    instance_profile: str = ""
    capacity_reservations: tuple[CapacityReservation, ...] = ()
    conditions: tuple[Condition, ...] = ()

    def condition(self, kind: str) -> Condition | None:
        for cond in self.conditions:
            if cond.type == kind:
                return cond
        return None


@dataclass(frozen=True, slots=True)
class EC2NodeClass:
    name: str
    ami_family: str = "AL2023"  # resolved: AL2 | AL2023 | Bottlerocket | Custom | Windows2019/2022/2025
    ami_aliases: tuple[str, ...] = ()
    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    block_device_mappings: tuple[BlockDevice, ...] = ()
    instance_store_policy: str | None = None
    subnet_selector_terms: tuple[SelectorTerm, ...] = ()
    security_group_selector_terms: tuple[SelectorTerm, ...] = ()
    role: str = ""
    instance_profile: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    user_data: str = ""
    ami_selector_terms: tuple[AMISelectorTerm, ...] = ()
    capacity_reservation_selector_terms: tuple[CapacityReservationSelectorTerm, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    detailed_monitoring: bool | None = None
    associate_public_ip_address: bool | None = None
    context: str = ""
    uid: str = ""
    generation: int = 0
    annotations: dict[str, str] = field(default_factory=dict)
    deleting: bool = False
    status: EC2NodeClassStatus = field(default_factory=EC2NodeClassStatus)

    group = "karpenter.k8s.aws"
    kind = "EC2NodeClass"

    def ready(self) -> bool:
        """``Ready=True`` for the current generation: only then may the AWS provider launch from it."""
        cond = self.status.condition("Ready")
        return (
            cond is not None
            and cond.status == "True"
            and (cond.observed_generation is None or cond.observed_generation == self.generation)
        )


@dataclass(frozen=True, slots=True)
class KWOKNodeClass:
    name: str
    node_registration_delay: float = 0.0

    group = "karpenter.kwok.sh"
    kind = "KWOKNodeClass"


NodeClass = EC2NodeClass | KWOKNodeClass
