"""Launch templates: content-addressed, created on demand, reused, deleted once unused.

A :class:`LaunchTemplateSpec` is everything a launch template holds (AMI, user data, security
groups, instance profile, block devices, metadata options with IMDSv2 required and hop limit 1 by
default, detailed monitoring, public-IP choice, capacity reservation, tags). Its name is
``karpenter.k8s.aws/<hash of the spec>`` (:func:`name_of`), so equal specs share one template and
any change makes a new one. :class:`LaunchTemplates` keeps the names in use in memory: ``ensure``
finds a template by name (cache, then DescribeLaunchTemplates, then CreateLaunchTemplate);
``sweep`` deletes the templates not used for :data:`TTL` seconds (upstream keeps them for a minute
after the last use); ``hydrate`` adopts, at start, the templates karpy made for this cluster
before a restart (they are deleted after a minute unless used again); ``delete_for_node_class``
removes a deleted EC2NodeClass's. Only templates tagged ``karpy.sh/managed-by=karpy`` and
``eks:eks-cluster-name=<cluster>`` are ever deleted.

Used by :mod:`karpy.providers.aws.provider` (ensure) and the operator's sweep task.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.model import quantity
from karpy.model.nodeclass import BlockDevice, MetadataOptions
from karpy.ports import Clock
from karpy.providers.aws import errors

__all__ = [
    "MANAGED_BY_TAG",
    "NAME_PREFIX",
    "TTL",
    "LaunchTemplateSpec",
    "LaunchTemplates",
    "default_block_devices",
    "name_of",
    "template_data",
]

NAME_PREFIX = "karpenter.k8s.aws/"
MANAGED_BY_TAG = ("karpy.sh/managed-by", "karpy")
CLUSTER_TAG = "eks:eks-cluster-name"
NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
TTL = 60.0
_GI = 2**30

log = logging.getLogger("karpy.aws.launchtemplates")


@dataclass(frozen=True, slots=True)
class LaunchTemplateSpec:
    image_id: str
    user_data: str  # plain text; base64-encoded into the template
    security_group_ids: tuple[str, ...]
    instance_profile: str
    block_devices: tuple[BlockDevice, ...] = ()
    metadata_options: MetadataOptions = field(default_factory=MetadataOptions)
    detailed_monitoring: bool = False
    associate_public_ip_address: bool | None = None
    capacity_reservation_id: str = ""
    tags: tuple[tuple[str, str], ...] = ()  # the launch template's and its network interfaces'
    node_class: str = ""


def default_block_devices(family: str) -> tuple[BlockDevice, ...]:
    """The volumes upstream gives each AMI family when the NodeClass lists none (Custom: the AMI's)."""
    if family in ("AL2", "AL2023"):
        return (BlockDevice("/dev/xvda", "20Gi", True, volume_type="gp3", encrypted=True),)
    if family == "Bottlerocket":
        return (
            BlockDevice("/dev/xvda", "4Gi", False, volume_type="gp3", encrypted=True),
            BlockDevice("/dev/xvdb", "20Gi", True, volume_type="gp3", encrypted=True),
        )
    if family.startswith("Windows"):
        return (BlockDevice("/dev/sda1", "50Gi", True, volume_type="gp3", encrypted=True),)
    return ()


def _ebs(device: BlockDevice) -> dict[str, Any]:
    ebs: dict[str, Any] = {"VolumeType": device.volume_type or "gp3"}
    if device.volume_size is not None:
        ebs["VolumeSize"] = math.ceil(quantity.to_units(device.volume_size) / _GI)  # EC2 takes GiB
    for key, value in (
        ("Iops", device.iops),
        ("Throughput", device.throughput),
        ("Encrypted", device.encrypted),
        ("DeleteOnTermination", device.delete_on_termination),
        ("VolumeInitializationRate", device.volume_initialization_rate),
    ):
        if value is not None:
            ebs[key] = value
    if device.kms_key_id:
        ebs["KmsKeyId"] = device.kms_key_id
    if device.snapshot_id:
        ebs["SnapshotId"] = device.snapshot_id
    return ebs


def _tag_list(tags: Mapping[str, str] | tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    items = sorted(tags.items()) if isinstance(tags, Mapping) else sorted(tags)
    return [{"Key": k, "Value": v} for k, v in items]


def template_data(spec: LaunchTemplateSpec) -> dict[str, Any]:
    """The ``LaunchTemplateData`` of ``spec`` (CreateLaunchTemplate's shape)."""
    meta = spec.metadata_options
    data: dict[str, Any] = {
        "ImageId": spec.image_id,
        "UserData": base64.b64encode(spec.user_data.encode()).decode(),
        "MetadataOptions": {
            "HttpEndpoint": meta.http_endpoint,
            "HttpProtocolIpv6": meta.http_protocol_ipv6,
            "HttpPutResponseHopLimit": meta.http_put_response_hop_limit,
            "HttpTokens": meta.http_tokens,
            "InstanceMetadataTags": "disabled",
        },
        "Monitoring": {"Enabled": spec.detailed_monitoring},
    }
    if spec.instance_profile:
        data["IamInstanceProfile"] = {"Name": spec.instance_profile}
    if spec.block_devices:
        data["BlockDeviceMappings"] = [
            {"DeviceName": d.device_name, "Ebs": _ebs(d)} for d in spec.block_devices
        ]
    if spec.associate_public_ip_address is not None:
        data["NetworkInterfaces"] = [
            {
                "DeviceIndex": 0,
                "AssociatePublicIpAddress": spec.associate_public_ip_address,
                "Groups": list(spec.security_group_ids),
            }
        ]
    else:
        data["SecurityGroupIds"] = list(spec.security_group_ids)
    if spec.capacity_reservation_id:
        data["CapacityReservationSpecification"] = {
            "CapacityReservationTarget": {"CapacityReservationId": spec.capacity_reservation_id}
        }
    if spec.tags:
        data["TagSpecifications"] = [{"ResourceType": "network-interface", "Tags": _tag_list(spec.tags)}]
    return data


def name_of(spec: LaunchTemplateSpec) -> str:
    """``karpenter.k8s.aws/<hash>``: equal specs give equal names."""
    doc = {"data": template_data(spec), "tags": sorted(spec.tags), "nodeClass": spec.node_class}
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return NAME_PREFIX + str(int(digest[:16], 16))


class LaunchTemplates:
    """The cluster's launch templates (see the module docstring)."""

    def __init__(self, ec2: Any, *, cluster: str, clock: Clock, ttl: float = TTL) -> None:
        self._ec2 = ec2
        self.cluster = cluster
        self._clock = clock
        self.ttl = ttl
        self._used: dict[str, float] = {}  # name -> last used
        self.created: list[str] = []  # names this process created (tests, benchmark)

    def __len__(self) -> int:
        return len(self._used)

    def names(self) -> list[str]:
        return sorted(self._used)

    def _managed_tags(self, spec: LaunchTemplateSpec) -> dict[str, str]:
        tags = dict(spec.tags)
        tags.update({CLUSTER_TAG: self.cluster, MANAGED_BY_TAG[0]: MANAGED_BY_TAG[1]})
        if spec.node_class:
            tags[NODECLASS_TAG] = spec.node_class
        return tags

    def ensure(self, spec: LaunchTemplateSpec) -> str:
        """The name of a launch template holding ``spec``, created if EC2 has none."""
        name = name_of(spec)
        now = self._clock.now()
        if name in self._used:
            self._used[name] = now
            return name
        try:
            found = errors.call(self._ec2.describe_launch_templates, LaunchTemplateNames=[name])
        except errors.AWSError as exc:
            if not exc.not_found:
                raise
            found = {}
        if not found.get("LaunchTemplates"):
            try:
                errors.call(
                    self._ec2.create_launch_template,
                    LaunchTemplateName=name,
                    LaunchTemplateData=template_data(spec),
                    TagSpecifications=[
                        {"ResourceType": "launch-template", "Tags": _tag_list(self._managed_tags(spec))}
                    ],
                )
            except errors.AWSError as exc:
                if "AlreadyExists" not in exc.code:  # another replica made it a moment ago
                    raise
            else:
                self.created.append(name)
                log.info("created launch template %s (image %s)", name, spec.image_id)
        self._used[name] = now
        return name

    def use(self, name: str, spec: LaunchTemplateSpec) -> str:
        """``name`` (known to be ``name_of(spec)``) marked used now; ensured again if it was swept."""
        if name in self._used:
            self._used[name] = self._clock.now()
            return name
        return self.ensure(spec)

    def forget(self, name: str) -> None:
        """Drop ``name`` from the cache (EC2 said it does not exist): the next ensure recreates it."""
        self._used.pop(name, None)

    def _delete(self, name: str) -> bool:
        try:
            errors.call(self._ec2.delete_launch_template, LaunchTemplateName=name)
        except errors.AWSError as exc:
            if not exc.not_found:
                log.warning("deleting launch template %s failed: %s", name, exc)
                return False
        log.info("deleted launch template %s (unused for %.0f s)", name, self.ttl)
        return True

    def sweep(self) -> int:
        """Delete the templates unused for ``ttl`` seconds; how many were deleted."""
        now = self._clock.now()
        gone = 0
        for name in sorted(n for n, used in self._used.items() if now - used >= self.ttl):
            if self._delete(name):
                del self._used[name]
                gone += 1
        return gone

    def _listed(self, *extra: dict[str, Any]) -> list[str]:
        filters = [
            {"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster]},
            {"Name": f"tag:{MANAGED_BY_TAG[0]}", "Values": [MANAGED_BY_TAG[1]]},
            *extra,
        ]
        found = errors.pages(self._ec2, "describe_launch_templates", "LaunchTemplates", Filters=filters)
        return sorted(str(t["LaunchTemplateName"]) for t in found)

    def hydrate(self) -> int:
        """Adopt the cluster's karpy templates (a restart): each is kept ``ttl`` seconds more."""
        now = self._clock.now()
        names = self._listed()
        for name in names:
            self._used.setdefault(name, now)
        return len(names)

    def delete_for_node_class(self, node_class: str) -> int:
        """Delete every karpy template of ``node_class`` (the EC2NodeClass is being deleted)."""
        gone = 0
        for name in self._listed({"Name": f"tag:{NODECLASS_TAG}", "Values": [node_class]}):
            if self._delete(name):
                self._used.pop(name, None)
                gone += 1
        return gone
