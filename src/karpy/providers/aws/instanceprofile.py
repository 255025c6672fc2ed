"""The instance profile an EC2NodeClass launches with (upstream's ``instanceprofile`` provider).

- ``spec.role``: karpy creates and owns one instance profile per NodeClass, named
  ``<cluster>_<stable hash of region + NodeClass uid>`` (at most 128 characters) at the IAM path
  ``/karpenter/<region>/<cluster>/<uid>/``, tagged ``kubernetes.io/cluster/<cluster>=owned``,
  ``eks:eks-cluster-name``, ``karpenter.k8s.aws/ec2nodeclass``, ``topology.kubernetes.io/region``
  plus the NodeClass's tags, holding the role. An existing profile is reused: missing tags are
  added, and a changed role replaces the one it holds (an instance profile holds one role).
- ``spec.instanceProfile``: user-managed; karpy only checks that it exists.

:func:`ensure_instance_profile` returns the name for ``status.instanceProfile``;
:func:`delete_instance_profile` removes the managed profile when the NodeClass is deleted (one
already gone is fine). Called by
:class:`~karpy.providers.aws.nodeclass_status.NodeClassStatusController`. Failures of
:func:`ensure_instance_profile` raise :class:`InstanceProfileError`, naming the spec field.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from karpy.model.nodeclass import EC2NodeClass
from karpy.providers.aws import errors

__all__ = [
    "MAX_NAME",
    "InstanceProfileError",
    "delete_instance_profile",
    "ensure_instance_profile",
    "profile_name",
    "profile_path",
    "profile_tags",
]

log = logging.getLogger("karpy.aws.instanceprofile")

MAX_NAME = 128  # IAM's limit on instance profile names
PATH_PREFIX = "/karpenter/"
ROLE_FIELD = "spec.role"
PROFILE_FIELD = "spec.instanceProfile"


class InstanceProfileError(Exception):
    """The instance profile cannot be used: ``field`` (``spec.role`` / ``spec.instanceProfile``)
    and the condition ``reason`` (``InstanceProfileNotFound``, ``RoleNotFound``...)."""

    def __init__(self, field: str, reason: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = reason
        self.message = message


def profile_name(*, cluster: str, region: str, uid: str) -> str:
    """The managed profile's name: the cluster name (cut to fit) and a hash of region and uid."""
    digest = int(hashlib.sha256(f"{region}{uid}".encode()).hexdigest()[:16], 16)
    suffix = f"_{digest}"
    return cluster[: MAX_NAME - len(suffix)] + suffix


def profile_path(*, cluster: str, region: str, uid: str) -> str:
    return f"{PATH_PREFIX}{region}/{cluster}/{uid}/"


def profile_tags(nc: EC2NodeClass, *, cluster: str, region: str) -> dict[str, str]:
    """The managed profile's tags: the NodeClass's, then karpy's own (which win)."""
    return {
        **nc.tags,
        f"kubernetes.io/cluster/{cluster}": "owned",
        "eks:eks-cluster-name": cluster,
        "karpenter.k8s.aws/ec2nodeclass": nc.name,
        "topology.kubernetes.io/region": region,
    }


def _role_name(role: str) -> str:
    """A role name from ``spec.role`` (a name, or an ARN whose last path segment is the name)."""
    return role.rsplit("/", 1)[-1] if role.startswith("arn:") else role


def _get(iam: Any, name: str) -> dict[str, Any] | None:
    try:
        return dict(errors.call(iam.get_instance_profile, InstanceProfileName=name)["InstanceProfile"])
    except errors.AWSError as exc:
        if exc.not_found:
            return None
        raise


def _verify(iam: Any, name: str) -> str:
    try:
        found = _get(iam, name)
    except errors.AWSError as exc:
        raise InstanceProfileError(PROFILE_FIELD, "InstanceProfileCheckFailed", str(exc)) from exc
    if found is None:
        raise InstanceProfileError(
            PROFILE_FIELD, "InstanceProfileNotFound", f"instance profile {name} not found"
        )
    return name


def _create(iam: Any, nc: EC2NodeClass, *, name: str, cluster: str, region: str) -> dict[str, Any]:
    tags = profile_tags(nc, cluster=cluster, region=region)
    try:
        created = errors.call(
            iam.create_instance_profile,
            InstanceProfileName=name,
            Path=profile_path(cluster=cluster, region=region, uid=nc.uid),
            Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())],
        )
    except errors.AWSError as exc:
        if exc.code != "EntityAlreadyExists":
            raise
        found = _get(iam, name)  # created meanwhile (another replica, a retried request)
        if found is None:
            raise
        return found
    log.info("created instance profile %s for EC2NodeClass %s", name, nc.name)
    return dict(created["InstanceProfile"])


def _ensure(iam: Any, nc: EC2NodeClass, *, cluster: str, region: str) -> str:
    name = profile_name(cluster=cluster, region=region, uid=nc.uid)
    profile = _get(iam, name)
    if profile is None:
        profile = _create(iam, nc, name=name, cluster=cluster, region=region)
    have = {str(t["Key"]): str(t["Value"]) for t in profile.get("Tags") or []}
    want = profile_tags(nc, cluster=cluster, region=region)
    missing = {k: v for k, v in want.items() if have.get(k) != v}
    if missing:
        errors.call(
            iam.tag_instance_profile,
            InstanceProfileName=name,
            Tags=[{"Key": k, "Value": v} for k, v in sorted(missing.items())],
        )
    role = _role_name(nc.role)
    held = [str(r["RoleName"]) for r in profile.get("Roles") or []]
    for other in held:
        if other != role:
            log.info("instance profile %s: replacing role %s with %s", name, other, role)
            try:
                errors.call(iam.remove_role_from_instance_profile, InstanceProfileName=name, RoleName=other)
            except errors.AWSError as exc:
                if not exc.not_found:
                    raise
    if role not in held:
        try:
            errors.call(iam.add_role_to_instance_profile, InstanceProfileName=name, RoleName=role)
        except errors.AWSError as exc:
            if exc.not_found:
                raise InstanceProfileError(ROLE_FIELD, "RoleNotFound", f"role {role} not found") from exc
            raise
    return name


def ensure_instance_profile(iam: Any, nc: EC2NodeClass, *, cluster: str, region: str) -> str:
    """The instance profile ``nc`` launches with: the managed one for ``spec.role`` (created,
    tagged and holding the role), or ``spec.instanceProfile`` once found to exist."""
    if nc.instance_profile:
        return _verify(iam, nc.instance_profile)
    if not nc.role:
        raise InstanceProfileError(
            "spec", "InstanceProfileNotFound", "one of role or instanceProfile is required"
        )
    if not nc.uid:
        raise InstanceProfileError(
            ROLE_FIELD, "InstanceProfileCreationFailed", "the EC2NodeClass has no uid yet"
        )
    try:
        return _ensure(iam, nc, cluster=cluster, region=region)
    except errors.AWSError as exc:
        raise InstanceProfileError(ROLE_FIELD, "InstanceProfileCreationFailed", str(exc)) from exc


def delete_instance_profile(iam: Any, nc: EC2NodeClass, *, cluster: str, region: str) -> None:
    """Remove the role from the managed profile of ``nc`` and delete it (gone already: fine).
    A profile of that name outside karpy's IAM path is left alone. Raises ``AWSError``."""
    if not nc.uid:
        return
    name = profile_name(cluster=cluster, region=region, uid=nc.uid)
    profile = _get(iam, name)
    if profile is None:
        return
    if not str(profile.get("Path") or "").startswith(PATH_PREFIX):
        log.warning("instance profile %s is not under %s: not deleting it", name, PATH_PREFIX)
        return
    for role in profile.get("Roles") or []:
        try:
            errors.call(
                iam.remove_role_from_instance_profile, InstanceProfileName=name, RoleName=role["RoleName"]
            )
        except errors.AWSError as exc:
            if not exc.not_found:
                raise
    try:
        errors.call(iam.delete_instance_profile, InstanceProfileName=name)
    except errors.AWSError as exc:
        if not exc.not_found:
            raise
    log.info("deleted instance profile %s of EC2NodeClass %s", name, nc.name)
