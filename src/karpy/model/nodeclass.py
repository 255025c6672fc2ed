"""Node classes: ``karpenter.k8s.aws/v1`` EC2NodeClass and ``karpenter.kwok.sh/v1alpha1`` KWOKNodeClass.

Only the fields that change scheduling math (allocatable, zones) or that users expect
karpy to read back are kept. Built by :mod:`karpy.api`; consumed by
:mod:`karpy.core.capacity` and the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BlockDevice", "EC2NodeClass", "KWOKNodeClass", "KubeletConfig", "NodeClass"]


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """The kubelet settings that change allocatable (quantities as strings as written)."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: dict[str, str] = field(default_factory=dict)
    system_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)
    eviction_soft: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BlockDevice:
    device_name: str
    volume_size: str | None = None  # e.g. "100Gi"
    root_volume: bool = False


@dataclass(frozen=True, slots=True)
class EC2NodeClass:
    name: str
    ami_family: str = "AL2023"  # AL2 | AL2023 | Bottlerocket | Custom | Windows2019/2022/2025
    ami_aliases: tuple[str, ...] = ()
    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    block_device_mappings: tuple[BlockDevice, ...] = ()
    instance_store_policy: str | None = None
    subnet_selector_terms: tuple[dict[str, object], ...] = ()
    security_group_selector_terms: tuple[dict[str, object], ...] = ()
    role: str = ""
    instance_profile: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    user_data: str = ""

    group = "karpenter.k8s.aws"
    kind = "EC2NodeClass"


@dataclass(frozen=True, slots=True)
class KWOKNodeClass:
    name: str
    node_registration_delay: float = 0.0

    group = "karpenter.kwok.sh"
    kind = "KWOKNodeClass"


NodeClass = EC2NodeClass | KWOKNodeClass
