"""The unavailable-offerings cache: offerings that just failed for lack of capacity, for 3 minutes.

Karpenter's ``pkg/cache/unavailableofferings.go``. An offering is a (capacity type, instance type,
zone); :meth:`UnavailableOfferings.mark` records one after an insufficient-capacity CreateFleet
error or a spot interruption, :meth:`mark_capacity_type` a whole capacity type (spot without its
service-linked role). Entries expire :data:`TTL` seconds later by the injected clock. ``seq``
moves whenever the set changes, so the instance-type provider can cache offerings per ``seq``.
Shared by the fleet, the instance-type provider and the interruption controller.
"""

from __future__ import annotations

import logging

from karpy.ports import Clock

__all__ = ["TTL", "OfferingKey", "UnavailableOfferings"]

TTL = 180.0
OfferingKey = tuple[str, str, str]  # (capacity type, instance type, zone)

log = logging.getLogger("karpy.aws.offerings")


class UnavailableOfferings:
    def __init__(self, clock: Clock, ttl: float = TTL) -> None:
        self._clock = clock
        self.ttl = ttl
        self._offerings: dict[OfferingKey, float] = {}  # key -> expiry
        self._capacity_types: dict[str, float] = {}
        self.seq = 0

    def mark(self, capacity_type: str, instance_type: str, zone: str, *, reason: str = "") -> None:
        key = (capacity_type, instance_type, zone)
        if key not in self._offerings:
            self.seq += 1
            log.info("offering %s/%s/%s unavailable for %.0f s (%s)", *key, self.ttl, reason or "marked")
        self._offerings[key] = self._clock.now() + self.ttl

    def mark_capacity_type(self, capacity_type: str, *, reason: str = "") -> None:
        if capacity_type not in self._capacity_types:
            self.seq += 1
            log.info(
                "capacity type %s unavailable for %.0f s (%s)", capacity_type, self.ttl, reason or "marked"
            )
        self._capacity_types[capacity_type] = self._clock.now() + self.ttl

    def _expire(self) -> None:
        now = self._clock.now()
        gone = [k for k, until in self._offerings.items() if until <= now]
        for key in gone:
            del self._offerings[key]
        types = [k for k, until in self._capacity_types.items() if until <= now]
        for ct in types:
            del self._capacity_types[ct]
        if gone or types:
            self.seq += 1

    def is_unavailable(self, capacity_type: str, instance_type: str, zone: str) -> bool:
        self._expire()
        return (
            capacity_type in self._capacity_types or (capacity_type, instance_type, zone) in self._offerings
        )

    def current(self) -> tuple[frozenset[OfferingKey], frozenset[str]]:
        """The offerings and the capacity types unavailable now."""
        self._expire()
        return frozenset(self._offerings), frozenset(self._capacity_types)

    def version(self) -> int:
        """``seq`` after dropping what expired: equal versions mean an equal set."""
        self._expire()
        return self.seq
