"""Capacity, overhead and allocatable of an EC2 instance type under an EC2NodeClass.

Karpenter's EKS formulas (``pkg/providers/instancetype/types.go``, restated in
``docs/upstream-aws.md`` §2), computed with exact integers (cpu in millicores, bytes) except
where upstream itself rounds a float64 (VM memory overhead, CPU bands, percentages), which is
reproduced with the same IEEE double arithmetic. ``nodeclass=None`` means AL2023 defaults.

Called by :mod:`karpy.catalog.aws` when it builds instance types (and by anything that needs
the allocatable of a raw EC2 shape, e.g. an AWS provider hydrating a NodeClaim). Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from karpy.model import quantity
from karpy.model.nodeclass import EC2NodeClass, KubeletConfig
from karpy.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources

__all__ = [
    "AL2",
    "AL2023",
    "AMD_GPU",
    "AWS_NEURON",
    "AWS_NEURON_CORE",
    "BOTTLEROCKET",
    "CUSTOM",
    "EFA",
    "HABANA_GAUDI",
    "NVIDIA_GPU",
    "POD_ENI",
    "PRIVATE_IPV4",
    "WINDOWS_BUILDS",
    "Ec2Shape",
    "allocatable",
    "ami_family",
    "capacity",
    "eni_limited_pods",
    "is_windows",
    "kube_reserved",
    "overhead",
]

AL2 = "AL2"
AL2023 = "AL2023"
BOTTLEROCKET = "Bottlerocket"
CUSTOM = "Custom"
WINDOWS_BUILDS: dict[str, str] = {
    "Windows2019": "10.0.17763",
    "Windows2022": "10.0.20348",
    "Windows2025": "10.0.26100",
}
_FAMILIES = {f.lower(): f for f in (AL2, AL2023, BOTTLEROCKET, CUSTOM, *WINDOWS_BUILDS)}

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
HABANA_GAUDI = "habana.ai/gaudi"
AWS_NEURON = "aws.amazon.com/neuron"
AWS_NEURON_CORE = "aws.amazon.com/neuroncore"
EFA = "vpc.amazonaws.com/efa"
POD_ENI = "vpc.amazonaws.com/pod-eni"
PRIVATE_IPV4 = "vpc.amazonaws.com/PrivateIPv4Address"
_GPU_RESOURCES = {"nvidia": NVIDIA_GPU, "amd": AMD_GPU, "habana": HABANA_GAUDI}

_MI = 2**20
_GI = 2**30
_DEFAULT_VOLUME = 20 * _GI  # amifamily.DefaultEBS: 20Gi gp3
_WINDOWS_VOLUME = 50 * _GI
_WINDOWS_PODS = 110
# Device whose size becomes ephemeral-storage, per family (EphemeralBlockDevice()).
_EPHEMERAL_DEVICE = {AL2: "/dev/xvda", AL2023: "/dev/xvda", BOTTLEROCKET: "/dev/xvdb"}
# Kube-reserved CPU bands: (start, end) in millicores and the fraction reserved of that band.
_CPU_BANDS = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))
_RESERVABLE = (CPU, MEMORY, EPHEMERAL_STORAGE)  # "pid" is not a schedulable resource
_MEMORY_AVAILABLE = "memory.available"
_NODEFS_AVAILABLE = "nodefs.available"


@dataclass(frozen=True, slots=True)
class Ec2Shape:
    """The raw fields of one EC2 instance type that capacity and labels are computed from.

    Mirrors a record of ``shared/data/aws/instance-types.json``; ``None`` means unknown or
    not applicable (no GPU, no instance store, no bandwidth figure...).
    """

    name: str
    family: str
    size: str
    vcpu: int
    memory_mib: int
    category: str | None = None
    generation: int | None = None
    kube_arch: str | None = "amd64"
    cpu_manufacturer: str | None = None
    cpu_clock_mhz: int | None = None
    gpu_count: int | None = None
    gpu_name: str | None = None
    gpu_manufacturer: str | None = None
    gpu_memory_mib: int | None = None
    accelerator_name: str | None = None
    accelerator_manufacturer: str | None = None
    accelerator_count: int | None = None
    neuron_cores: int | None = None
    max_enis: int | None = None
    ipv4_per_eni: int | None = None
    pod_eni: int | None = None
    efa_max: int | None = None
    network_bandwidth_mbps: int | None = None
    ebs_bandwidth_mbps: int | None = None
    local_nvme_gb: int | None = None
    instance_storage_gb: int | None = None
    hypervisor: str | None = None
    bare_metal: bool | None = None
    capacity_types: tuple[str, ...] | None = ("on-demand", "spot")
    encryption_in_transit: bool | None = None
    karpenter_eligible: bool = True


def ami_family(nodeclass: EC2NodeClass | None) -> str:
    """The canonical AMI family name (``AL2023`` when there is no NodeClass)."""
    if nodeclass is None:
        return AL2023
    family = _FAMILIES.get(nodeclass.ami_family.lower())
    if family is None:
        known = ", ".join(sorted(_FAMILIES.values()))
        raise ValueError(f"unknown amiFamily {nodeclass.ami_family!r} (expected one of {known})")
    return family


def capacity_view(nodeclass: EC2NodeClass | None) -> EC2NodeClass | None:
    """The part of ``nodeclass`` that :func:`ami_family`, :func:`capacity` and :func:`overhead`
    read (AMI family, kubelet, block devices, instance-store policy), every other field at its
    default: two NodeClasses with the same view get the same instance types, so a catalog built
    for one serves the other. A field these functions start to read must be copied here."""
    if nodeclass is None:
        return None
    return EC2NodeClass(
        name="",
        ami_family=nodeclass.ami_family,
        kubelet=nodeclass.kubelet,
        block_device_mappings=nodeclass.block_device_mappings,
        instance_store_policy=nodeclass.instance_store_policy,
    )


def is_windows(family: str) -> bool:
    return family in WINDOWS_BUILDS


def _kubelet(nodeclass: EC2NodeClass | None) -> KubeletConfig:
    return KubeletConfig() if nodeclass is None else nodeclass.kubelet


def eni_limited_pods(shape: Ec2Shape, *, reserved_enis: int = 0) -> int:
    """``usableENIs × (IPv4PerENI − 1) + 2`` on the default network card; 0 without usable ENIs."""
    usable = max((shape.max_enis or 0) - reserved_enis, 0)
    if usable == 0:
        return 0
    return usable * ((shape.ipv4_per_eni or 0) - 1) + 2


def _pods(shape: Ec2Shape, family: str, kubelet: KubeletConfig, reserved_enis: int) -> int:
    if kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif is_windows(family):
        count = _WINDOWS_PODS
    else:  # AL2, AL2023, Bottlerocket and Custom support ENI-limited pod density
        count = eni_limited_pods(shape, reserved_enis=reserved_enis)
    if kubelet.pods_per_core and kubelet.pods_per_core > 0 and family != BOTTLEROCKET:
        count = min(kubelet.pods_per_core * shape.vcpu, count)
    return count


def _memory(shape: Ec2Shape, vm_memory_overhead_percent: float) -> int:
    size_mib = shape.memory_mib - (64 if shape.kube_arch == "arm64" else 0)  # Graviton CMA
    mem = size_mib * _MI
    # float64 as upstream: ceil(bytes * pct / 1024 / 1024) MiB
    return mem - math.ceil(float(mem) * vm_memory_overhead_percent / 1024 / 1024) * _MI


def _volume(size: str | None) -> int | None:
    return None if size is None else quantity.to_units(size)


def _ephemeral_storage(shape: Ec2Shape, nodeclass: EC2NodeClass | None, family: str) -> int:
    if nodeclass is not None:
        raid0 = (nodeclass.instance_store_policy or "").upper() == "RAID0"
        if raid0 and shape.instance_storage_gb is not None:
            return shape.instance_storage_gb * 10**9  # decimal G
        bdms = nodeclass.block_device_mappings
        if bdms:
            root = next((b for b in bdms if b.root_volume), None)
            if root is not None and root.volume_size is not None:
                return quantity.to_units(root.volume_size)
            if family == CUSTOM:
                last = _volume(bdms[-1].volume_size)
                return _DEFAULT_VOLUME if last is None else last
            device = _EPHEMERAL_DEVICE.get(family, "/dev/sda1")
            match = next((b for b in bdms if b.device_name == device and b.volume_size is not None), None)
            if match is not None:
                return quantity.to_units(match.volume_size or "0")
    return _WINDOWS_VOLUME if is_windows(family) else _DEFAULT_VOLUME


def capacity(
    shape: Ec2Shape,
    nodeclass: EC2NodeClass | None = None,
    *,
    vm_memory_overhead_percent: float = 0.075,
    reserved_enis: int = 0,
) -> Resources:
    """Node capacity Karpenter predicts for ``shape`` (zero resources omitted)."""
    family = ami_family(nodeclass)
    kubelet = _kubelet(nodeclass)
    values: dict[str, int] = {
        CPU: shape.vcpu * 1000,
        MEMORY: _memory(shape, vm_memory_overhead_percent),
        EPHEMERAL_STORAGE: _ephemeral_storage(shape, nodeclass, family),
        PODS: _pods(shape, family, kubelet, reserved_enis),
        POD_ENI: shape.pod_eni or 0,
        # Upstream advertises EfaInfo.MaximumEfaInterfaces unless the NodeClass lists network
        # interfaces (not modelled); Karpenter's published allocatable tables include it.
        EFA: shape.efa_max or 0,
    }
    if shape.gpu_manufacturer in _GPU_RESOURCES and shape.gpu_count:
        values[_GPU_RESOURCES[shape.gpu_manufacturer]] = shape.gpu_count
    if shape.neuron_cores is not None:  # Neuron devices (inferentia*, trainium*)
        values[AWS_NEURON] = shape.accelerator_count or 0
        values[AWS_NEURON_CORE] = shape.neuron_cores
    if is_windows(family):
        values[PRIVATE_IPV4] = max((shape.ipv4_per_eni or 0) - 1, 0)
    return Resources(values)


def _kube_reserved_cpu(millicores: int) -> int:
    total = 0
    for start, end, fraction in _CPU_BANDS:
        if millicores >= start:
            span = float((millicores if millicores < end else end) - start)
            total += int(span * fraction)  # float64 then truncation, as upstream
    return total


def _reserved(raw: dict[str, str]) -> dict[str, int]:
    """A kubeReserved/systemReserved map as resource amounts (cpu in millicores)."""
    out: dict[str, int] = {}
    for key, value in raw.items():
        if key in _RESERVABLE:
            out[key] = quantity.to_milli(value) if key == CPU else quantity.to_units(value)
    return out


def _eviction_signal(capacity_amount: int, value: str) -> int:
    text = value.strip()
    if text.endswith("%"):
        percent = float(text.rstrip("%"))
        if percent == 100:  # 100% disables the threshold
            percent = 0.0
        return math.ceil(float(capacity_amount) / 100 * percent)
    return quantity.to_units(text)


def _kube(shape: Ec2Shape, nodeclass: EC2NodeClass | None, cap: Resources) -> Resources:
    family = ami_family(nodeclass)
    # AL2/AL2023/Custom size kube-reserved memory by ENI-limited pods (0 reserved ENIs, maxPods
    # ignored); Bottlerocket and Windows by the final pods value.
    if family in (AL2, AL2023, CUSTOM):
        memory_pods = eni_limited_pods(shape, reserved_enis=0)
    else:
        memory_pods = cap.get(PODS)
    kube: dict[str, int] = {
        CPU: _kube_reserved_cpu(cap.get(CPU)),
        MEMORY: (11 * memory_pods + 255) * _MI,
        EPHEMERAL_STORAGE: _GI,
    }
    kube.update(_reserved(_kubelet(nodeclass).kube_reserved))
    return Resources(kube)


def _eviction(nodeclass: EC2NodeClass | None, cap: Resources) -> dict[str, int]:
    """The hard eviction threshold subtracted from allocatable (100Mi memory, 10% nodefs by default)."""
    eviction: dict[str, int] = {
        MEMORY: 100 * _MI,
        EPHEMERAL_STORAGE: math.ceil(float(cap.get(EPHEMERAL_STORAGE)) / 100 * 10),
    }
    hard = _kubelet(nodeclass).eviction_hard
    if _MEMORY_AVAILABLE in hard:
        eviction[MEMORY] = _eviction_signal(cap.get(MEMORY), hard[_MEMORY_AVAILABLE])
    if _NODEFS_AVAILABLE in hard:
        eviction[EPHEMERAL_STORAGE] = _eviction_signal(cap.get(EPHEMERAL_STORAGE), hard[_NODEFS_AVAILABLE])
    return eviction


def kube_reserved(
    shape: Ec2Shape,
    nodeclass: EC2NodeClass | None = None,
    *,
    vm_memory_overhead_percent: float = 0.075,
    reserved_enis: int = 0,
) -> Resources:
    """The kube-reserved a node of ``shape`` runs with (EKS bands, ``kubelet.kubeReserved`` wins)."""
    cap = capacity(
        shape, nodeclass, vm_memory_overhead_percent=vm_memory_overhead_percent, reserved_enis=reserved_enis
    )
    return _kube(shape, nodeclass, cap)


def overhead(
    shape: Ec2Shape,
    nodeclass: EC2NodeClass | None = None,
    *,
    vm_memory_overhead_percent: float = 0.075,
    reserved_enis: int = 0,
) -> Resources:
    """kube-reserved + system-reserved + eviction threshold for ``shape`` under ``nodeclass``."""
    cap = capacity(
        shape, nodeclass, vm_memory_overhead_percent=vm_memory_overhead_percent, reserved_enis=reserved_enis
    )
    return _overhead_of(shape, nodeclass, cap)


def capacity_and_overhead(
    shape: Ec2Shape,
    nodeclass: EC2NodeClass | None = None,
    *,
    vm_memory_overhead_percent: float = 0.075,
    reserved_enis: int = 0,
) -> tuple[Resources, Resources]:
    """:func:`capacity` and :func:`overhead` together (the capacity computed once)."""
    cap = capacity(
        shape, nodeclass, vm_memory_overhead_percent=vm_memory_overhead_percent, reserved_enis=reserved_enis
    )
    return cap, _overhead_of(shape, nodeclass, cap)


def _overhead_of(shape: Ec2Shape, nodeclass: EC2NodeClass | None, cap: Resources) -> Resources:
    system = _reserved(_kubelet(nodeclass).system_reserved)
    return _kube(shape, nodeclass, cap) + system + _eviction(nodeclass, cap)


def allocatable(
    shape: Ec2Shape,
    nodeclass: EC2NodeClass | None = None,
    *,
    vm_memory_overhead_percent: float = 0.075,
    reserved_enis: int = 0,
) -> Resources:
    """``capacity − overhead`` per resource (no floor, as upstream)."""
    cap = capacity(
        shape, nodeclass, vm_memory_overhead_percent=vm_memory_overhead_percent, reserved_enis=reserved_enis
    )
    over = overhead(
        shape, nodeclass, vm_memory_overhead_percent=vm_memory_overhead_percent, reserved_enis=reserved_enis
    )
    return cap - over
