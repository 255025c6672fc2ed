"""The EBS CSI driver's attach limit per instance type, from the catalog's EC2 facts.

What ``ebs.csi.aws.com`` reports in a new node's CSINode (``allocatable.count``), as the driver
computes it at start-up (``getVolumesLimit`` of aws-ebs-csi-driver):

- **Nitro** (``hypervisor`` ``nitro``, and bare metal): 28 attachment slots shared by EBS volumes,
  network interfaces and NVMe instance-store disks; less the ENIs attached at start-up (the
  primary and the VPC CNI's one warm ENI: 2, at most the type's ``max_enis``), less one slot per
  instance-store disk, less the root volume and every other volume of the NodeClass's
  ``blockDeviceMappings``.
- **Xen**: 39 EBS volumes, less the root volume and the NodeClass's other volumes.
- never below 1 (the driver's floor).

Approximate where the catalog lacks the fact, both ways: the number of instance-store disks is
not in the data (any NVMe instance storage counts as one disk; i4i.32xlarge has eight, so its
limit comes out seven too high), and the *dedicated* EBS limits of some newer types (up to 128
volumes, not shared with ENIs) are not either (they get the shared formula, lower than theirs).
ENIs the CNI attaches after start-up take slots the driver's own count still offers. Used by
:mod:`karpy.catalog.aws` for every AWS instance type (``InstanceType.volume_limits``), the shipped
catalog and the live provider alike.
"""

from __future__ import annotations

from karpy.core import capacity as capacity_mod
from karpy.model.nodeclass import EC2NodeClass
from karpy.model.volumes import EBS_CSI_DRIVER

__all__ = ["DRIVER", "NITRO_SLOTS", "STARTUP_ENIS", "XEN_VOLUMES", "attach_limit", "volume_limits"]

DRIVER = EBS_CSI_DRIVER
NITRO_SLOTS = 28  # shared by EBS volumes, ENIs and NVMe instance-store disks
XEN_VOLUMES = 39  # EBS volumes (the driver's default for non-Nitro types)
STARTUP_ENIS = 2  # the primary ENI and the VPC CNI's warm one (WARM_ENI_TARGET=1)


def _block_devices(nodeclass: EC2NodeClass | None) -> int:
    """EBS volumes the node boots with: the NodeClass's mappings, at least the root volume."""
    if nodeclass is None:
        return 1
    return max(1, len(nodeclass.block_device_mappings))


def attach_limit(shape: capacity_mod.Ec2Shape, nodeclass: EC2NodeClass | None = None) -> int:
    """The EBS volumes a node of ``shape`` can attach beyond the ones it boots with (module doc)."""
    booted = _block_devices(nodeclass)
    if shape.hypervisor == "xen":
        return max(1, XEN_VOLUMES - booted)
    enis = min(STARTUP_ENIS, shape.max_enis or 1)
    disks = 1 if shape.local_nvme_gb else 0
    return max(1, NITRO_SLOTS - enis - disks - booted)


def volume_limits(shape: capacity_mod.Ec2Shape, nodeclass: EC2NodeClass | None = None) -> dict[str, int]:
    """``InstanceType.volume_limits`` of an AWS type: the EBS CSI driver's."""
    return {DRIVER: attach_limit(shape, nodeclass)}
