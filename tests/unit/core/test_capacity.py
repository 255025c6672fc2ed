"""Karpenter's EKS capacity/overhead formulas (docs/upstream-aws.md §2) in karpy.core.capacity."""

from __future__ import annotations

import dataclasses
import math

import pytest

from karpy.core import capacity as cap
from karpy.model.nodeclass import BlockDevice, EC2NodeClass, KubeletConfig
from karpy.model.resources import Resources

MI = 2**20
GI = 2**30


def m5_large(**overrides: object) -> cap.Ec2Shape:
    shape = cap.Ec2Shape(
        name="m5.large",
        family="m5",
        size="large",
        vcpu=2,
        memory_mib=8192,
        kube_arch="amd64",
        max_enis=3,
        ipv4_per_eni=10,
        pod_eni=9,
    )
    return dataclasses.replace(shape, **overrides)  # type: ignore[arg-type]


def a1_medium() -> cap.Ec2Shape:
    return cap.Ec2Shape(
        name="a1.medium",
        family="a1",
        size="medium",
        vcpu=1,
        memory_mib=2048,
        kube_arch="arm64",
        max_enis=2,
        ipv4_per_eni=4,
        pod_eni=10,
    )


def nodeclass(family: str = "AL2023", **kubelet: object) -> EC2NodeClass:
    return EC2NodeClass(name="default", ami_family=family, kubelet=KubeletConfig(**kubelet))  # type: ignore[arg-type]


def test_m5_large_worked_example() -> None:
    capacity = cap.capacity(m5_large(), None)
    assert capacity == Resources(
        {
            "cpu": 2000,
            "memory": 7577 * MI,  # 8192 - ceil(8192 * 0.075)
            "ephemeral-storage": 20 * GI,
            "pods": 29,
            "vpc.amazonaws.com/pod-eni": 9,
        }
    )
    overhead = cap.overhead(m5_large(), None)
    assert overhead == Resources({"cpu": 70, "memory": (574 + 100) * MI, "ephemeral-storage": 3 * GI})
    alloc = cap.allocatable(m5_large(), None)
    assert alloc["cpu"] == 1930
    assert alloc["memory"] == 6903 * MI
    assert alloc["pods"] == 29
    assert alloc["ephemeral-storage"] == 17 * GI


def test_a1_medium_arm64_loses_64mib_before_vm_overhead() -> None:
    capacity = cap.capacity(a1_medium(), None)
    assert capacity["memory"] == (2048 - 64 - 149) * MI
    alloc = cap.allocatable(a1_medium(), None)
    assert (alloc["cpu"], alloc["memory"], alloc["pods"]) == (940, 1392 * MI, 8)


@pytest.mark.parametrize(("vcpu", "reserved"), [(1, 60), (2, 70), (4, 80), (8, 90), (96, 310), (192, 550)])
def test_kube_reserved_cpu_bands(vcpu: int, reserved: int) -> None:
    assert cap.overhead(m5_large(vcpu=vcpu), None)["cpu"] == reserved


def test_max_pods_sets_pods_but_al2023_memory_uses_eni_limited_pods() -> None:
    nc = nodeclass(max_pods=110)
    assert cap.capacity(m5_large(), nc)["pods"] == 110
    assert cap.allocatable(m5_large(), nc)["memory"] == 6903 * MI


def test_max_pods_zero_is_respected() -> None:
    assert cap.capacity(m5_large(), nodeclass(max_pods=0)).get("pods") == 0


def test_bottlerocket_memory_uses_final_pods() -> None:
    assert cap.allocatable(m5_large(), nodeclass("Bottlerocket"))["memory"] == 6903 * MI
    alloc = cap.allocatable(m5_large(), nodeclass("Bottlerocket", max_pods=110))
    assert alloc["pods"] == 110
    assert alloc["memory"] == (7577 - (11 * 110 + 255) - 100) * MI
    assert alloc["ephemeral-storage"] == 17 * GI  # /dev/xvdb 20Gi default


def test_pods_per_core_caps_pods_except_bottlerocket() -> None:
    assert cap.capacity(m5_large(), nodeclass(pods_per_core=4))["pods"] == 8
    assert cap.capacity(m5_large(), nodeclass(pods_per_core=100))["pods"] == 29
    assert cap.capacity(m5_large(), nodeclass(max_pods=110, pods_per_core=4))["pods"] == 8
    assert cap.capacity(m5_large(), nodeclass("Bottlerocket", pods_per_core=4))["pods"] == 29
    # AL2023 kube-reserved memory still follows ENI-limited pods
    assert cap.allocatable(m5_large(), nodeclass(pods_per_core=4))["memory"] == 6903 * MI


def test_windows_pods_110_memory_storage_and_private_ipv4() -> None:
    nc = nodeclass("Windows2022")
    capacity = cap.capacity(m5_large(), nc)
    assert capacity["pods"] == 110
    assert capacity["ephemeral-storage"] == 50 * GI
    assert capacity["vpc.amazonaws.com/PrivateIPv4Address"] == 9
    alloc = cap.allocatable(m5_large(), nc)
    assert alloc["memory"] == (7577 - 1465 - 100) * MI
    assert alloc["ephemeral-storage"] == 44 * GI  # 50 - 1 - ceil(10%)=5
    assert cap.capacity(m5_large(), nodeclass("Windows2019", pods_per_core=2))["pods"] == 4


def test_kube_reserved_override_replaces_key_by_key() -> None:
    nc = nodeclass(kube_reserved={"cpu": "200m", "memory": "1Gi", "pid": "1000"})
    over = cap.overhead(m5_large(), nc)
    assert over["cpu"] == 200
    assert over["memory"] == (1024 + 100) * MI
    assert over["ephemeral-storage"] == 3 * GI  # computed 1Gi kept + 2Gi eviction
    assert "pid" not in over
    assert cap.allocatable(m5_large(), nc)["memory"] == (7577 - 1024 - 100) * MI


def test_system_reserved_adds() -> None:
    nc = nodeclass(system_reserved={"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"})
    alloc = cap.allocatable(m5_large(), nc)
    assert (alloc["cpu"], alloc["memory"], alloc["ephemeral-storage"]) == (1830, 6803 * MI, 16 * GI)


def test_eviction_hard_quantity_and_percentages() -> None:
    alloc = cap.allocatable(m5_large(), nodeclass(eviction_hard={"memory.available": "500Mi"}))
    assert alloc["memory"] == (7577 - 574 - 500) * MI
    alloc = cap.allocatable(m5_large(), nodeclass(eviction_hard={"nodefs.available": "15%"}))
    assert alloc["ephemeral-storage"] == 20 * GI - GI - math.ceil(20 * GI * 0.15)
    alloc = cap.allocatable(m5_large(), nodeclass(eviction_hard={"memory.available": "10%"}))
    assert alloc["memory"] == 7577 * MI - 574 * MI - math.ceil(7577 * MI / 100 * 10)
    # 100% disables the threshold
    alloc = cap.allocatable(m5_large(), nodeclass(eviction_hard={"memory.available": "100%"}))
    assert alloc["memory"] == (7577 - 574) * MI
    # evictionSoft never changes allocatable
    alloc = cap.allocatable(m5_large(), nodeclass(eviction_soft={"memory.available": "2Gi"}))
    assert alloc["memory"] == 6903 * MI


def test_ephemeral_storage_from_block_devices_and_raid0() -> None:
    root = EC2NodeClass(name="r", block_device_mappings=(BlockDevice("/dev/sdz", "100Gi", root_volume=True),))
    assert cap.capacity(m5_large(), root)["ephemeral-storage"] == 100 * GI
    assert cap.allocatable(m5_large(), root)["ephemeral-storage"] == 89 * GI
    xvda = EC2NodeClass(name="x", block_device_mappings=(BlockDevice("/dev/xvda", "80Gi"),))
    assert cap.capacity(m5_large(), xvda)["ephemeral-storage"] == 80 * GI
    other = EC2NodeClass(name="o", block_device_mappings=(BlockDevice("/dev/xvdb", "80Gi"),))
    assert cap.capacity(m5_large(), other)["ephemeral-storage"] == 20 * GI
    rocket = EC2NodeClass(
        name="b",
        ami_family="Bottlerocket",
        block_device_mappings=(BlockDevice("/dev/xvda", "4Gi"), BlockDevice("/dev/xvdb", "60Gi")),
    )
    assert cap.capacity(m5_large(), rocket)["ephemeral-storage"] == 60 * GI
    custom = EC2NodeClass(
        name="c",
        ami_family="Custom",
        block_device_mappings=(BlockDevice("/dev/xvda", "30Gi"), BlockDevice("/dev/xvdc", "40Gi")),
    )
    assert cap.capacity(m5_large(), custom)["ephemeral-storage"] == 40 * GI
    raid = EC2NodeClass(name="raid", instance_store_policy="RAID0")
    assert cap.capacity(m5_large(instance_storage_gb=300), raid)["ephemeral-storage"] == 300 * 10**9
    assert cap.capacity(m5_large(), raid)["ephemeral-storage"] == 20 * GI  # no instance store


def test_reserved_enis_and_vm_overhead_options() -> None:
    capacity = cap.capacity(m5_large(), None, reserved_enis=1)
    assert capacity["pods"] == 2 * 9 + 2
    # kube-reserved memory ignores reserved ENIs on AL2023
    assert cap.allocatable(m5_large(), None, reserved_enis=1)["memory"] == 6903 * MI
    assert cap.capacity(m5_large(), None, reserved_enis=3).get("pods") == 0
    assert cap.capacity(m5_large(), None, vm_memory_overhead_percent=0.0)["memory"] == 8192 * MI


def test_extended_resources() -> None:
    gpu = m5_large(gpu_count=8, gpu_manufacturer="nvidia", gpu_name="a100", efa_max=4)
    capacity = cap.capacity(gpu, None)
    assert capacity["nvidia.com/gpu"] == 8
    assert capacity["vpc.amazonaws.com/efa"] == 4
    assert cap.capacity(m5_large(gpu_count=1, gpu_manufacturer="amd"), None)["amd.com/gpu"] == 1
    assert cap.capacity(m5_large(gpu_count=8, gpu_manufacturer="habana"), None)["habana.ai/gaudi"] == 8
    neuron = cap.capacity(
        m5_large(accelerator_count=16, accelerator_manufacturer="aws", neuron_cores=32), None
    )
    assert (neuron["aws.amazon.com/neuron"], neuron["aws.amazon.com/neuroncore"]) == (16, 32)
    # a non-Neuron inference accelerator is only a label, not a resource
    qualcomm = cap.capacity(m5_large(accelerator_count=8, accelerator_manufacturer="qualcomm"), None)
    assert "aws.amazon.com/neuron" not in qualcomm
    assert "vpc.amazonaws.com/pod-eni" not in cap.capacity(m5_large(pod_eni=None), None)


def test_ami_family_names() -> None:
    assert cap.ami_family(None) == "AL2023"
    assert cap.ami_family(EC2NodeClass(name="x", ami_family="bottlerocket")) == "Bottlerocket"
    with pytest.raises(ValueError, match="unknown amiFamily"):
        cap.ami_family(EC2NodeClass(name="x", ami_family="Ubuntu"))
