"""On-demand capacity reservations and capacity blocks an EC2NodeClass selects (upstream's
``capacityreservation`` provider and ``CapacityReservationFromEC2``).

Each tag term is one ``DescribeCapacityReservations`` call (``tag:K`` / ``tag-key`` filters,
plus ``owner-id`` and ``instance-match-criteria`` when the term sets them); every ``id`` term is
batched into one call (``CapacityReservationIds``); all ask for ``state=active`` only. With no
terms no call is made. Reservations with an instance match criteria other than open/targeted
are skipped (a future kind karpy does not know); a capacity block ending within 40 minutes is
``expiring`` (launches stop using it). Results are deduplicated and sorted by id.

Called by :class:`~karpy.providers.aws.nodeclass_status.NodeClassStatusController` (for
``status.capacityReservations``); failures raise :class:`~karpy.providers.aws.errors.AWSError`
(an endpoint without the call, such as moto, gives code ``NotImplemented``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from karpy.model.nodeclass import CapacityReservation, CapacityReservationSelectorTerm
from karpy.providers.aws import errors
from karpy.providers.aws.network import SelectorError, tag_filters

__all__ = ["EXPIRY_WINDOW", "TERMS", "parse_reservation", "resolve_capacity_reservations"]

log = logging.getLogger("karpy.aws.capacityreservations")

EXPIRY_WINDOW = 40 * 60.0  # a capacity block this close to its end is "expiring"
TERMS = "spec.capacityReservationSelectorTerms"
_STATE_ACTIVE = {"Name": "state", "Values": ["active"]}
_MATCH_CRITERIA = ("open", "targeted")


def _requests(terms: Sequence[CapacityReservationSelectorTerm]) -> list[dict[str, Any]]:
    ids: list[str] = []
    out: list[dict[str, Any]] = []
    for index, term in enumerate(terms):
        if term.id:
            ids.append(term.id)
            continue
        if not term.tags:
            raise SelectorError(f"{TERMS}[{index}]", "a term needs tags or an id")
        filters: list[dict[str, Any]] = [dict(_STATE_ACTIVE)]
        if term.owner_id:
            filters.append({"Name": "owner-id", "Values": [term.owner_id]})
        if term.instance_match_criteria:
            filters.append({"Name": "instance-match-criteria", "Values": [term.instance_match_criteria]})
        filters += tag_filters(term.tags)
        out.append({"Filters": filters})
    if ids:
        out.append({"CapacityReservationIds": sorted(set(ids)), "Filters": [dict(_STATE_ACTIVE)]})
    return out


def _timestamp(value: object) -> float | None:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    return None


def parse_reservation(raw: dict[str, Any], *, now: float) -> CapacityReservation | None:
    """The status entry of one reservation as EC2 describes it; None for one karpy cannot use."""
    reservation_id = str(raw.get("CapacityReservationId") or "")
    criteria = str(raw.get("InstanceMatchCriteria") or "")
    if not reservation_id or criteria not in _MATCH_CRITERIA:
        log.warning(
            "capacity reservation %s: unsupported instance match criteria %r", reservation_id, criteria
        )
        return None
    end_time = _timestamp(raw.get("EndDate"))
    kind = "capacity-block" if raw.get("ReservationType") == "capacity-block" else "default"
    expiring = kind == "capacity-block" and end_time is not None and now >= end_time - EXPIRY_WINDOW
    return CapacityReservation(
        id=reservation_id,
        instance_type=str(raw.get("InstanceType") or ""),
        availability_zone=str(raw.get("AvailabilityZone") or ""),
        owner_id=str(raw.get("OwnerId") or ""),
        instance_match_criteria=criteria,
        reservation_type=kind,
        state="expiring" if expiring else "active",
        end_time=end_time,
    )


def resolve_capacity_reservations(
    ec2: Any, terms: Sequence[CapacityReservationSelectorTerm], *, now: float
) -> list[CapacityReservation]:
    """The active reservations ``terms`` select, by id (no terms: no call, nothing)."""
    found: dict[str, CapacityReservation] = {}
    for kwargs in _requests(terms):
        try:
            items = errors.pages(ec2, "describe_capacity_reservations", "CapacityReservations", **kwargs)
        except errors.AWSError as exc:
            if exc.not_implemented:
                raise errors.AWSError(
                    exc.operation, exc.code, "the endpoint does not implement DescribeCapacityReservations"
                ) from None
            raise
        for raw in items:
            reservation = parse_reservation(raw, now=now)
            if reservation is not None:
                found[reservation.id] = reservation
    return [found[k] for k in sorted(found)]
