"""The EBS CSI attach limit per instance type (karpy.catalog.ebs), on the shipped catalog's facts."""

from __future__ import annotations

import pytest

from karpy.catalog import aws, ebs
from karpy.core import capacity
from karpy.model.nodeclass import BlockDevice, EC2NodeClass


def shape(**kw: object) -> capacity.Ec2Shape:
    fields: dict[str, object] = {
        "name": "x.large",
        "family": "x",
        "size": "large",
        "vcpu": 2,
        "memory_mib": 8192,
    }
    fields.update(kw)
    return capacity.Ec2Shape(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "limit"),
    [
        ({"hypervisor": "nitro", "max_enis": 3}, 25),  # 28 - 2 ENIs - root
        ({"hypervisor": "nitro", "max_enis": 1}, 26),  # only one ENI to attach
        ({"hypervisor": "nitro", "max_enis": 4, "local_nvme_gb": 75}, 24),  # one instance-store disk
        ({"hypervisor": "", "bare_metal": True, "max_enis": 15}, 25),  # bare metal: Nitro slots
        ({"hypervisor": "xen", "max_enis": 3}, 38),  # 39 - root
    ],
)
def test_attach_limit(kw: dict[str, object], limit: int) -> None:
    assert ebs.attach_limit(shape(**kw)) == limit


def test_the_nodeclass_block_devices_take_slots() -> None:
    mappings = (BlockDevice("/dev/xvda", volume_size="20Gi"), BlockDevice("/dev/xvdb", volume_size="100Gi"))
    nodeclass = EC2NodeClass("nc", block_device_mappings=mappings)
    assert ebs.attach_limit(shape(hypervisor="nitro", max_enis=3), nodeclass) == 24


def test_the_shipped_catalog_carries_the_limit() -> None:
    types = {it.name: it for it in aws.instance_types("us-east-1")}
    assert types["m5.large"].volume_limits == {"ebs.csi.aws.com": 25}
    assert types["c4.large"].volume_limits == {"ebs.csi.aws.com": 38}
