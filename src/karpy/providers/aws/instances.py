"""EC2 instances karpy launched: describe, list for the cluster, terminate, tag; providerIDs.

An :class:`Instance` is what DescribeInstances says of one instance (type, zone, subnet, image,
security groups, tags, state, launch time, spot or not). :func:`list_instances` lists every
instance of this cluster karpy manages (tags ``karpenter.sh/nodepool``,
``karpenter.k8s.aws/ec2nodeclass`` present and ``eks:eks-cluster-name=<cluster>``; states pending to
shutting-down), for garbage collection; :func:`terminate` is idempotent (an id EC2 no longer knows
is success). providerIDs are ``aws:///<zone>/<instance-id>`` (:func:`provider_id`, :func:`parse`).
Called by :mod:`karpy.providers.aws.provider`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from karpy.providers.aws import errors

__all__ = [
    "LIVE_STATES",
    "Instance",
    "describe",
    "list_instances",
    "parse",
    "provider_id",
    "tag",
    "terminate",
]

LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
_PROVIDER_ID = re.compile(r"^aws:///([^/]*)/(i-[0-9a-zA-Z]+)$")
_BATCH = 500  # ids per DescribeInstances / TerminateInstances request (upstream batches up to 500)


@dataclass(frozen=True, slots=True)
class Instance:
    id: str
    instance_type: str
    zone: str
    state: str
    capacity_type: str = "on-demand"
    image_id: str = ""
    subnet_id: str = ""
    security_groups: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    launch_time: float = 0.0
    private_dns_name: str = ""

    @property
    def provider_id(self) -> str:
        return provider_id(self.zone, self.id)


def provider_id(zone: str, instance_id: str) -> str:
    return f"aws:///{zone}/{instance_id}"


def parse(value: str) -> tuple[str, str] | None:
    """``(zone, instance id)`` of an ``aws:///zone/i-...`` providerID, or None for another provider's."""
    match = _PROVIDER_ID.match(value)
    return None if match is None else (match.group(1), match.group(2))


def _time(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return 0.0


def from_description(raw: dict[str, Any]) -> Instance:
    """An :class:`Instance` from one DescribeInstances ``Instances[]`` entry."""
    lifecycle = raw.get("InstanceLifecycle") or ""
    spot = bool(raw.get("SpotInstanceRequestId")) or lifecycle == "spot"
    return Instance(
        id=str(raw["InstanceId"]),
        instance_type=str(raw.get("InstanceType") or ""),
        zone=str((raw.get("Placement") or {}).get("AvailabilityZone") or ""),
        state=str((raw.get("State") or {}).get("Name") or ""),
        capacity_type="spot" if spot else "on-demand",
        image_id=str(raw.get("ImageId") or ""),
        subnet_id=str(raw.get("SubnetId") or ""),
        security_groups=tuple(sorted(str(g["GroupId"]) for g in raw.get("SecurityGroups") or [])),
        tags={str(t["Key"]): str(t.get("Value", "")) for t in raw.get("Tags") or []},
        launch_time=_time(raw.get("LaunchTime")),
        private_dns_name=str(raw.get("PrivateDnsName") or ""),
    )


def _instances(reservations: Iterable[dict[str, Any]]) -> list[Instance]:
    out = [from_description(i) for r in reservations for i in r.get("Instances") or []]
    return sorted(out, key=lambda i: i.id)


def describe(ec2: Any, ids: Sequence[str]) -> list[Instance]:
    """The instances of ``ids`` that EC2 still knows (any state); unknown ids are left out."""
    found: list[Instance] = []
    for start in range(0, len(ids), _BATCH):
        chunk = list(ids[start : start + _BATCH])
        try:
            found += _instances(errors.pages(ec2, "describe_instances", "Reservations", InstanceIds=chunk))
        except errors.AWSError as exc:
            if not exc.not_found or len(chunk) == 1:
                if exc.not_found:
                    continue
                raise
            for one in chunk:  # one unknown id fails the whole request: ask one by one
                found += describe(ec2, [one])
    return sorted(found, key=lambda i: i.id)


def list_instances(ec2: Any, *, cluster: str) -> list[Instance]:
    """Every live instance karpy launched for ``cluster`` (tag filters as upstream's GC)."""
    filters = [
        {"Name": "tag-key", "Values": ["karpenter.sh/nodepool"]},
        {"Name": "tag-key", "Values": ["karpenter.k8s.aws/ec2nodeclass"]},
        {"Name": "tag:eks:eks-cluster-name", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": list(LIVE_STATES)},
    ]
    return _instances(errors.pages(ec2, "describe_instances", "Reservations", Filters=filters))


def terminate(ec2: Any, ids: Sequence[str]) -> list[str]:
    """Terminate ``ids``; the ids EC2 answered for. An id it no longer knows counts as done."""
    done: list[str] = []
    for start in range(0, len(ids), _BATCH):
        chunk = list(ids[start : start + _BATCH])
        try:
            answer = errors.call(ec2.terminate_instances, InstanceIds=chunk)
        except errors.AWSError as exc:
            if not exc.not_found:
                raise
            if len(chunk) > 1:
                for one in chunk:
                    done += terminate(ec2, [one])
            continue
        done += [str(t["InstanceId"]) for t in answer.get("TerminatingInstances") or []]
    return done


def tag(ec2: Any, ids: Sequence[str], tags: dict[str, str]) -> None:
    """Add ``tags`` to the instances ``ids`` (one CreateTags request)."""
    if ids and tags:
        errors.call(
            ec2.create_tags,
            Resources=list(ids),
            Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())],
        )
