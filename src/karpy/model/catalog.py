"""Instance types and their offerings (Karpenter's ``cloudprovider.InstanceType``).

An :class:`InstanceType` carries its label requirements, capacity, overhead and
offerings; an :class:`Offering` is one (zone, capacity type) with a price and an
availability flag. Catalogs are loaded by :mod:`karpy.catalog`; allocatable for AWS
types is computed by :mod:`karpy.core.capacity`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from karpy.model import labels
from karpy.model.requirements import Requirements
from karpy.model.resources import EMPTY, Resources

__all__ = ["Catalog", "InstanceType", "Offering"]


@dataclass(frozen=True, slots=True)
class Offering:
    zone: str
    capacity_type: str
    price: float
    available: bool = True
    reservation_id: str = ""

    def requirements(self) -> Requirements:
        return Requirements.from_labels({labels.ZONE: self.zone, labels.CAPACITY_TYPE: self.capacity_type})

    def compatible(self, reqs: Requirements) -> bool:
        zone = reqs.get(labels.ZONE)
        if zone is not None and not zone.has(self.zone):
            return False
        ct = reqs.get(labels.CAPACITY_TYPE)
        return ct is None or ct.has(self.capacity_type)


@dataclass(frozen=True, slots=True)
class InstanceType:
    """One launchable shape; ``requirements`` include instance-type, arch, os, zones and capacity types."""

    name: str
    requirements: Requirements
    offerings: tuple[Offering, ...]
    capacity: Resources
    overhead: Resources = EMPTY
    labels: dict[str, str] = field(default_factory=dict)
    # CSI driver -> volumes a node of this type can attach (none listed: no limit known); the
    # AWS catalog gives the EBS CSI driver's (karpy.catalog.ebs)
    volume_limits: dict[str, int] = field(default_factory=dict)

    _allocatable: Resources = field(default=EMPTY, init=False, repr=False, compare=False)
    _floor_price: float = field(default=0.0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allocatable", self.capacity - self.overhead)
        prices = [o.price for o in self.offerings if o.available]
        object.__setattr__(self, "_floor_price", min(prices) if prices else math.inf)

    @property
    def floor_price(self) -> float:
        """The lowest price of an available offering (``inf`` with none): no offering compatible
        with any requirements is cheaper, so a launch choice can skip the type by it alone."""
        return self._floor_price

    @property
    def allocatable(self) -> Resources:
        return self._allocatable

    def available_offerings(self) -> tuple[Offering, ...]:
        return tuple(o for o in self.offerings if o.available)

    def cheapest_offering(self, reqs: Requirements) -> Offering | None:
        """Cheapest available offering compatible with ``reqs``; ties keep catalog order."""
        best: Offering | None = None
        for offering in self.offerings:
            if (
                offering.available
                and offering.compatible(reqs)
                and (best is None or offering.price < best.price)
            ):
                best = offering
        return best


@dataclass(frozen=True, slots=True)
class Catalog:
    """A named list of instance types plus the extra label keys they make well-known."""

    name: str
    instance_types: tuple[InstanceType, ...]
    well_known: frozenset[str] = labels.CORE_WELL_KNOWN
    region: str = ""
