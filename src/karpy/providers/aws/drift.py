"""EC2NodeClass drift, checked in upstream's order: static hash, AMI, security groups, subnet.

- **Static** (:func:`static_hash`): a hash of the NodeClass spec that launches read, selector
  terms excluded (they drift through what they resolve to, below). The NodeClass controller
  stamps it on the EC2NodeClass (:data:`HASH_ANNOTATION`, :data:`HASH_VERSION_ANNOTATION`) and
  the provider copies it onto each NodeClaim it launches; a claim whose hash differs, under the
  same hash version, is ``NodeClassDrift``. A claim of another version is not drifted (upstream
  re-stamps such claims; karpy's version is its own, so nodes Karpenter launched never all drift).
- **AMI**: the claim's image is not among the AMIs ``status.amis`` maps to its instance type.
- **Security groups**: the instance's set differs from ``status.securityGroups``.
- **Subnet**: the instance's subnet is not in ``status.subnets``.

Pure (no AWS call): :class:`~karpy.providers.aws.provider.AWSCloudProvider.is_drifted` passes
the instance it described. The hash is sha256 over canonical JSON with zero values dropped and
lists as sets (upstream's hashstructure options ``IgnoreZeroValue`` and ``SlicesAsSets``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from karpy.model.nodeclass import AMI, EC2NodeClass
from karpy.model.objects import NodeClaim

__all__ = [
    "AMI_DRIFT",
    "HASH_ANNOTATION",
    "HASH_VERSION",
    "HASH_VERSION_ANNOTATION",
    "NODECLASS_DRIFT",
    "SECURITY_GROUP_DRIFT",
    "SUBNET_DRIFT",
    "drift_reason",
    "static_hash",
]

HASH_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash"
HASH_VERSION_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
HASH_VERSION = "karpy-v1"

NODECLASS_DRIFT = "NodeClassDrift"
AMI_DRIFT = "AMIDrift"
SECURITY_GROUP_DRIFT = "SecurityGroupDrift"
SUBNET_DRIFT = "SubnetDrift"

# spec fields that drift only through the status they resolve to, and bookkeeping fields
_UNHASHED = frozenset(
    {
        "name",
        "ami_aliases",
        "subnet_selector_terms",
        "security_group_selector_terms",
        "ami_selector_terms",
        "capacity_reservation_selector_terms",
        "uid",
        "generation",
        "annotations",
        "deleting",
        "status",
    }
)


def _canonical(value: Any) -> Any:
    """Zero values dropped, mappings sorted, lists as sets (sorted by their canonical JSON)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        out = {str(k): _canonical(v) for k, v in value.items()}
        return {k: v for k, v in sorted(out.items()) if v not in (None, "", 0, False, {}, [])}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_canonical(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    return value


def static_hash(nc: EC2NodeClass) -> str:
    """The hash of what a launch reads from ``nc``'s spec (resolved AMI family included)."""
    doc = {f.name: getattr(nc, f.name) for f in dataclasses.fields(nc) if f.name not in _UNHASHED}
    text = json.dumps(_canonical(doc), sort_keys=True, separators=(",", ":"))
    return str(int(hashlib.sha256(text.encode()).hexdigest()[:16], 16))


def drift_reason(
    claim: NodeClaim,
    nc: EC2NodeClass,
    *,
    amis_for_type: Callable[[str], Iterable[AMI]],
    instance_security_groups: Iterable[str] | None,
    instance_subnet: str | None,
) -> str:
    """Why ``claim`` drifted from ``nc`` (``""`` when it did not). ``amis_for_type(name)`` gives the
    AMIs of ``status.amis`` that serve an instance type; the instance's security groups and subnet
    come from DescribeInstances (None: unknown, not checked)."""
    claim_version = claim.annotations.get(HASH_VERSION_ANNOTATION)
    class_version = nc.annotations.get(HASH_VERSION_ANNOTATION)
    claim_hash = claim.annotations.get(HASH_ANNOTATION)
    class_hash = nc.annotations.get(HASH_ANNOTATION)
    if (
        claim_hash
        and class_hash
        and claim_version == class_version == HASH_VERSION
        and claim_hash != class_hash
    ):
        return NODECLASS_DRIFT
    status = nc.status
    instance_type = claim.labels.get("node.kubernetes.io/instance-type", "")
    if status.amis and claim.image_id and instance_type:
        allowed = {ami.id for ami in amis_for_type(instance_type)}
        if claim.image_id not in allowed:
            return AMI_DRIFT
    groups = {g.id for g in status.security_groups}
    if groups and instance_security_groups is not None and set(instance_security_groups) != groups:
        return SECURITY_GROUP_DRIFT
    if status.subnets and instance_subnet and instance_subnet not in {s.id for s in status.subnets}:
        return SUBNET_DRIFT
    return ""
