"""CreateFleet: one ``instant`` fleet per launch, identical launches batched into one request.

A :class:`FleetRequest` is one NodeClaim's launch: the capacity type, the overrides (instance type ×
zone, each with the zone's subnet, the launch template of its AMI group and the offering price as
``Priority``) and the tags. :meth:`Fleet.launch` groups equal requests (upstream batches identical
CreateFleet inputs arriving together) and sends each group as one call with
``TotalTargetCapacity`` = the group's size, handing the instances back one per request. Spot uses
``price-capacity-optimized``, on-demand ``lowest-price``; a reserved launch is an on-demand (or
capacity-block) fleet whose launch template targets the reservation.

Errors: each ``Errors[]`` entry with a code of :data:`errors.UNAVAILABLE_OFFERING_CODES` marks that
(capacity type, type, zone) unavailable for 3 minutes (a subnet out of addresses is remembered too,
a spot service-linked-role failure marks spot itself). Requests left without an instance get an
:class:`~karpy.model.errors.InsufficientCapacity` when every error was a capacity error (the caller
retries on the offerings left), else an :class:`AWSError` naming the codes. A template EC2 no
longer has is forgotten by the :class:`LaunchTemplates` cache so the retry recreates it.
Called by :mod:`karpy.providers.aws.provider`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from karpy.model import errors as model_errors
from karpy.providers.aws import errors
from karpy.providers.aws.metrics import AWSMetrics
from karpy.providers.aws.unavailable import UnavailableOfferings

__all__ = ["Fleet", "FleetRequest", "LaunchedInstance", "Override"]

log = logging.getLogger("karpy.aws.fleet")

_SPOT_ROLE_CODES = frozenset({"AuthFailure.ServiceLinkedRoleCreationNotPermitted"})
_TEMPLATE_GONE = ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound")


@dataclass(frozen=True, slots=True)
class Override:
    launch_template: str
    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    price: float


@dataclass(frozen=True, slots=True)
class FleetRequest:
    capacity_type: str  # spot | on-demand | reserved
    overrides: tuple[Override, ...]
    tags: tuple[tuple[str, str], ...]
    context: str = ""
    capacity_block: bool = False

    def key(self) -> str:
        """Equal keys = requests that can share one CreateFleet call."""
        overrides = [
            (o.launch_template, o.instance_type, o.zone, o.subnet_id, o.image_id, o.price)
            for o in self.overrides
        ]
        doc = [self.capacity_type, overrides, self.tags, self.context, self.capacity_block]
        return json.dumps(doc, separators=(",", ":"))

    def api(self, count: int) -> dict[str, object]:
        """CreateFleet's arguments for ``count`` instances of this request."""
        configs: dict[str, list[dict[str, object]]] = {}
        for o in self.overrides:
            configs.setdefault(o.launch_template, []).append(
                {
                    "InstanceType": o.instance_type,
                    "SubnetId": o.subnet_id,
                    "ImageId": o.image_id,
                    "AvailabilityZone": o.zone,
                    "Priority": o.price,
                }
            )
        if self.capacity_type == "spot":
            target = "spot"
        elif self.capacity_block:
            target = "capacity-block"
        else:
            target = "on-demand"
        tags = [{"Key": k, "Value": v} for k, v in self.tags]
        body: dict[str, object] = {
            "Type": "instant",
            "LaunchTemplateConfigs": [
                {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                    "Overrides": overrides,
                }
                for name, overrides in sorted(configs.items())
            ],
            "TargetCapacitySpecification": {
                "TotalTargetCapacity": count,
                "DefaultTargetCapacityType": target,
            },
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tags} for kind in ("instance", "volume", "fleet")
            ],
        }
        if target == "spot":
            body["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
        else:
            body["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
        if self.context:
            body["Context"] = self.context
        return body


@dataclass(frozen=True, slots=True)
class LaunchedInstance:
    instance_id: str
    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    capacity_type: str
    launch_template: str


class Fleet:
    def __init__(
        self,
        ec2: Any,
        *,
        unavailable: UnavailableOfferings,
        metrics: AWSMetrics,
        on_template_gone: Callable[[str], None] = lambda _name: None,
        on_subnet_full: Callable[[str], None] = lambda _subnet: None,
        max_batch: int = 1000,
    ) -> None:
        self._ec2 = ec2
        self._unavailable = unavailable
        self._metrics = metrics
        self._on_template_gone = on_template_gone
        self._on_subnet_full = on_subnet_full
        self.max_batch = max_batch
        self.calls = 0  # CreateFleet requests sent (the benchmark reads it)

    def launch(self, requests: Sequence[FleetRequest]) -> list[LaunchedInstance | model_errors.CloudError]:
        """One result per request, in order: its instance, or the error it failed with."""
        results: list[LaunchedInstance | model_errors.CloudError | None] = [None] * len(requests)
        groups: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(request.key(), []).append(index)
        for indexes in groups.values():
            for start in range(0, len(indexes), self.max_batch):
                chunk = indexes[start : start + self.max_batch]
                for index, result in zip(chunk, self._send(requests[chunk[0]], len(chunk)), strict=True):
                    results[index] = result
        return [r if r is not None else model_errors.CloudError("no result") for r in results]

    def _send(self, request: FleetRequest, count: int) -> list[LaunchedInstance | model_errors.CloudError]:
        self.calls += 1
        self._metrics.create_fleet_calls.labels(capacity_type=request.capacity_type).inc()
        try:
            answer = errors.call(self._ec2.create_fleet, **request.api(count))
        except errors.AWSError as exc:
            self._metrics.api_errors.labels(operation="CreateFleet", code=exc.code).inc()
            if exc.code in _TEMPLATE_GONE:
                for name in {o.launch_template for o in request.overrides}:
                    self._on_template_gone(name)
            return [exc] * count
        by_override = {(o.launch_template, o.instance_type, o.zone): o for o in request.overrides}
        launched: list[LaunchedInstance] = []
        for entry in answer.get("Instances") or []:
            chosen = (entry.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            spec = (entry.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}
            name = str(spec.get("LaunchTemplateName") or "")
            instance_type = str(entry.get("InstanceType") or chosen.get("InstanceType") or "")
            zone = str(chosen.get("AvailabilityZone") or "")
            known = by_override.get((name, instance_type, zone))
            for instance_id in entry.get("InstanceIds") or []:
                launched.append(
                    LaunchedInstance(
                        instance_id=str(instance_id),
                        instance_type=instance_type,
                        zone=zone or (known.zone if known else ""),
                        subnet_id=str(chosen.get("SubnetId") or (known.subnet_id if known else "")),
                        image_id=str(chosen.get("ImageId") or (known.image_id if known else "")),
                        capacity_type=request.capacity_type,
                        launch_template=name,
                    )
                )
        codes = self._record_errors(request, answer.get("Errors") or [])
        out: list[LaunchedInstance | model_errors.CloudError] = list(launched[:count])
        if len(launched) > count:  # never seen, but an extra instance must not leak: GC terminates it
            log.warning("CreateFleet returned %d instances for %d requests", len(launched), count)
        missing = count - len(out)
        if missing:
            out += [self._failure(codes)] * missing
        return out

    def _record_errors(self, request: FleetRequest, raw: list[dict[str, Any]]) -> list[str]:
        codes: list[str] = []
        for err in raw:
            code = str(err.get("ErrorCode") or "")
            codes.append(code)
            chosen = (err.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            instance_type = str(chosen.get("InstanceType") or "")
            zone = str(chosen.get("AvailabilityZone") or "")
            self._metrics.api_errors.labels(operation="CreateFleet", code=code).inc()
            if code in errors.UNAVAILABLE_OFFERING_CODES and instance_type and zone:
                self._unavailable.mark(request.capacity_type, instance_type, zone, reason=code)
            if code == "InsufficientFreeAddressesInSubnet" and chosen.get("SubnetId"):
                self._on_subnet_full(str(chosen["SubnetId"]))
            if code in _SPOT_ROLE_CODES:
                self._unavailable.mark_capacity_type("spot", reason=code)
            if code in _TEMPLATE_GONE:
                for name in {o.launch_template for o in request.overrides}:
                    self._on_template_gone(name)
        return codes

    def _failure(self, codes: list[str]) -> model_errors.CloudError:
        if codes and all(c in errors.UNAVAILABLE_OFFERING_CODES for c in codes):
            return model_errors.InsufficientCapacity(
                "CreateFleet: no capacity for any requested offering (" + ", ".join(sorted(set(codes))) + ")"
            )
        shown = ", ".join(sorted(set(codes))) or "no instance and no error returned"
        return errors.AWSError("CreateFleet", "CreateError", shown)
