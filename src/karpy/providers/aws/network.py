"""Subnets and security groups of an EC2NodeClass, from its selector terms (upstream's subnet and
security-group providers).

Terms are ORed. A tag term is one ``DescribeSubnets`` / ``DescribeSecurityGroups`` call whose
filters (``tag:K`` = V, or ``tag-key`` = K for the value ``*``) AND together; every ``id`` term
is batched into one call (``subnet-id`` / ``group-id`` filter), and so is every security-group
``name`` term (``group-name``, the group's name, not its Name tag). Results are deduplicated by
id. Subnets come sorted by free IPs (most first), then id, so the first subnet of a zone is the
one a launch uses; security groups by id.

Called by :class:`~karpy.providers.aws.nodeclass_status.NodeClassStatusController`, which
writes what they return to ``status.subnets`` / ``status.securityGroups``. A term that cannot
become a filter raises :class:`SelectorError`; AWS failures raise
:class:`~karpy.providers.aws.errors.AWSError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from karpy.model.nodeclass import SecurityGroup, SelectorTerm, Subnet
from karpy.providers.aws import errors

__all__ = [
    "SelectorError",
    "SubnetInfo",
    "resolve_security_groups",
    "resolve_subnets",
    "tag_filters",
]

SUBNET_TERMS = "spec.subnetSelectorTerms"
SECURITY_GROUP_TERMS = "spec.securityGroupSelectorTerms"


class SelectorError(ValueError):
    """A selector term that selects nothing expressible as an EC2 filter; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class SubnetInfo:
    """One discovered subnet: what the status records plus what a launch weighs."""

    id: str
    zone: str
    zone_id: str
    available_ips: int
    map_public_ip: bool = False

    def status(self) -> Subnet:
        """The ``status.subnets`` entry."""
        return Subnet(self.id, self.zone, self.zone_id)


def tag_filters(tags: dict[str, str]) -> list[dict[str, Any]]:
    """EC2 filters for a tag map, ANDed by EC2: ``tag:K`` = V, or ``tag-key`` = K for ``*``."""
    out: list[dict[str, Any]] = []
    for key, value in sorted(tags.items()):
        if value == "*":
            out.append({"Name": "tag-key", "Values": [key]})
        else:
            out.append({"Name": f"tag:{key}", "Values": [value]})
    return out


def _subnet_filter_sets(terms: Sequence[SelectorTerm]) -> list[list[dict[str, Any]]]:
    ids: list[str] = []
    sets: list[list[dict[str, Any]]] = []
    for index, term in enumerate(terms):
        where = f"{SUBNET_TERMS}[{index}]"
        if term.name:
            raise SelectorError(f"{where}.name", "subnets are selected by tags or id, not by name")
        if term.id:
            ids.append(term.id)
        elif term.tags:
            sets.append(tag_filters(term.tags))
        else:
            raise SelectorError(where, "a term needs tags or an id")
    if ids:
        sets.append([{"Name": "subnet-id", "Values": sorted(set(ids))}])
    return sets


def resolve_subnets(ec2: Any, terms: Sequence[SelectorTerm]) -> list[SubnetInfo]:
    """The subnets ``terms`` select, most free IPs first, then by id (empty: none matched)."""
    found: dict[str, SubnetInfo] = {}
    for filters in _subnet_filter_sets(terms):
        for raw in errors.pages(ec2, "describe_subnets", "Subnets", Filters=filters):
            subnet_id = str(raw["SubnetId"])
            found[subnet_id] = SubnetInfo(
                id=subnet_id,
                zone=str(raw.get("AvailabilityZone") or ""),
                zone_id=str(raw.get("AvailabilityZoneId") or ""),
                available_ips=int(raw.get("AvailableIpAddressCount") or 0),
                map_public_ip=bool(raw.get("MapPublicIpOnLaunch")),
            )
    return sorted(found.values(), key=lambda s: (-s.available_ips, s.id))


def _group_filter_sets(terms: Sequence[SelectorTerm]) -> list[list[dict[str, Any]]]:
    ids: list[str] = []
    names: list[str] = []
    sets: list[list[dict[str, Any]]] = []
    for index, term in enumerate(terms):
        if term.id:
            ids.append(term.id)
        elif term.name and not term.tags:
            names.append(term.name)
        elif term.name:  # a name and tags: both must hold, in one call
            sets.append([{"Name": "group-name", "Values": [term.name]}, *tag_filters(term.tags)])
        elif term.tags:
            sets.append(tag_filters(term.tags))
        else:
            raise SelectorError(f"{SECURITY_GROUP_TERMS}[{index}]", "a term needs tags, an id or a name")
    if ids:
        sets.append([{"Name": "group-id", "Values": sorted(set(ids))}])
    if names:
        sets.append([{"Name": "group-name", "Values": sorted(set(names))}])
    return sets


def resolve_security_groups(ec2: Any, terms: Sequence[SelectorTerm]) -> list[SecurityGroup]:
    """The security groups ``terms`` select, by id (empty: none matched)."""
    found: dict[str, SecurityGroup] = {}
    for filters in _group_filter_sets(terms):
        for raw in errors.pages(ec2, "describe_security_groups", "SecurityGroups", Filters=filters):
            group_id = str(raw["GroupId"])
            found[group_id] = SecurityGroup(group_id, str(raw.get("GroupName") or ""))
    return [found[k] for k in sorted(found)]
