"""The launch rule: which instance type and offering a planned NodeClaim becomes.

Among the claim's instance-type options, the type whose cheapest compatible available
offering (zone × capacity type allowed by the claim) is lowest wins; ties go to the type
listed first in the catalog. Of that type, the first compatible available offering in
catalog order at that price is taken (``FORMAT.md`` of the conformance suite). The node's
labels: template labels, single-valued requirement labels, the type's labels, the
offering's zone and capacity type, the NodePool, and the hostname. Used by ``karpy plan``
and the conformance runner (the kwok provider uses it from the runtime issue on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpy.core.scheduling.results import PlannedClaim
from karpy.model import labels
from karpy.model.catalog import InstanceType, Offering

__all__ = ["Launched", "launch"]


@dataclass(frozen=True, slots=True)
class Launched:
    claim: PlannedClaim
    instance_type: InstanceType
    offering: Offering
    labels: dict[str, str]

    @property
    def price(self) -> float:
        return self.offering.price


def launch(
    claim: PlannedClaim,
    catalog_order: Sequence[str] = (),
    *,
    well_known: frozenset[str] = labels.CORE_WELL_KNOWN,
) -> Launched | None:
    """Pick the type and offering for ``claim``; None when no option has an available offering."""
    rank = {name: i for i, name in enumerate(catalog_order)}
    best: tuple[float, int, InstanceType, Offering] | None = None
    for position, it in enumerate(claim.instance_types):
        offering = it.cheapest_offering(claim.requirements)
        if offering is None:
            continue
        order = rank.get(it.name, len(rank) + position)
        if best is None or (offering.price, order) < best[:2]:
            best = (offering.price, order, it, offering)
    if best is None:
        return None
    _, _, it, offering = best
    node_labels: dict[str, str] = {}
    node_labels.update(claim.requirements.labels(well_known))
    node_labels.update(claim.labels)
    node_labels.update(it.labels)
    node_labels.update(
        {
            labels.INSTANCE_TYPE: it.name,
            labels.ZONE: offering.zone,
            labels.CAPACITY_TYPE: offering.capacity_type,
            labels.NODEPOOL: claim.node_pool,
            labels.HOSTNAME: claim.name,
        }
    )
    for key in (labels.ARCH, labels.OS):
        req = it.requirements.get(key)
        claim_req = claim.requirements.get(key)
        if key not in node_labels and req is not None and not req.complement:
            allowed = sorted(v for v in req.values if claim_req is None or claim_req.has(v))
            if allowed:
                node_labels[key] = allowed[0]
    return Launched(claim, it, offering, node_labels)
