"""The launch rule: which instance type and offering a planned NodeClaim becomes.

Among the claim's instance-type options, the type whose cheapest compatible available
offering (zone × capacity type allowed by the claim) is lowest wins; ties go to the type
listed first in the catalog. Of that type, the first compatible available offering in
catalog order at that price is taken (``FORMAT.md`` of the conformance suite). The node's
labels: template labels, single-valued requirement labels, the type's labels, the
offering's zone and capacity type, the NodePool, and the hostname. Used by ``karpy plan``
and the conformance runner (the kwok provider uses it from the runtime issue on).

A solve's claims share their option lists (:mod:`karpy.core.scheduling.finalize` hands claims
with the same options one tuple) and often their requirements: :class:`Launcher` launches many
claims and makes each choice once per (options, requirements), so ``karpy plan`` of 5,000 pods
chooses about 40 times for its 1,000 claims instead of sorting 400 options for each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from karpy.core.scheduling.results import PlannedClaim
from karpy.model import labels
from karpy.model.catalog import InstanceType, Offering
from karpy.model.requirements import Requirements

__all__ = ["Launched", "Launcher", "catalog_rank", "choose", "launch", "node_labels"]


@dataclass(frozen=True, slots=True)
class Launched:
    claim: PlannedClaim
    instance_type: InstanceType
    offering: Offering
    labels: dict[str, str]

    @property
    def price(self) -> float:
        return self.offering.price


def choose(reqs: Requirements, types: Sequence[InstanceType]) -> tuple[InstanceType, Offering] | None:
    """The launch rule over ``types`` (in catalog order) for a claim's requirements.

    Only types the requirements allow are considered (``node.kubernetes.io/instance-type`` and
    every other key); the cheapest compatible available offering wins, ties to catalog order.
    """
    best: tuple[float, InstanceType, Offering] | None = None
    for it in types:
        if best is not None and it.floor_price >= best[0]:
            continue  # not even its cheapest offering beats the best so far (ties keep the first)
        if not it.requirements.overlaps(reqs):
            continue
        offering = it.cheapest_offering(reqs)
        if offering is not None and (best is None or offering.price < best[0]):
            best = (offering.price, it, offering)
    return None if best is None else (best[1], best[2])


def node_labels(
    reqs: Requirements,
    it: InstanceType,
    offering: Offering,
    *,
    template_labels: Mapping[str, str],
    node_pool: str,
    hostname: str,
    well_known: frozenset[str] = labels.CORE_WELL_KNOWN,
) -> dict[str, str]:
    """The labels a launched node carries (FORMAT.md's rule)."""
    out: dict[str, str] = {}
    out.update(reqs.labels(well_known))
    out.update(template_labels)
    out.update(it.labels)
    out.update(
        {
            labels.INSTANCE_TYPE: it.name,
            labels.ZONE: offering.zone,
            labels.CAPACITY_TYPE: offering.capacity_type,
            labels.NODEPOOL: node_pool,
            labels.HOSTNAME: hostname,
        }
    )
    for key in (labels.ARCH, labels.OS):
        req = it.requirements.get(key)
        claim_req = reqs.get(key)
        if key not in out and req is not None and not req.complement:
            allowed = sorted(v for v in req.values if claim_req is None or claim_req.has(v))
            if allowed:
                out[key] = allowed[0]
    return out


def catalog_rank(catalog_order: Sequence[str]) -> dict[str, int]:
    """Each type name's position in ``catalog_order``: pass it to :func:`launch` in place of the
    order when launching many claims (the mapping is then built once)."""
    return {name: i for i, name in enumerate(catalog_order)}


def launch(
    claim: PlannedClaim,
    catalog_order: Sequence[str] | Mapping[str, int] = (),
    *,
    well_known: frozenset[str] = labels.CORE_WELL_KNOWN,
) -> Launched | None:
    """Pick the type and offering for a planned claim; None when no option has an available
    offering. ``catalog_order``: the type names in catalog order, or :func:`catalog_rank` of them.
    For the claims of a solve, one :class:`Launcher` makes each distinct choice once."""
    return Launcher(catalog_order, well_known=well_known).launch(claim)


Choice = tuple[InstanceType, Offering] | None


class Launcher:
    """:func:`launch` for many claims under one catalog order (the claims of a solve, or of a
    disruption command's replacements).

    A choice depends only on the claim's options and requirements: it is kept per (options
    tuple, requirements), the tuple held so that its identity stays its own while the launcher
    lives. Make one per solve: the memo grows with the distinct choices it is asked.
    """

    def __init__(
        self,
        catalog_order: Sequence[str] | Mapping[str, int] = (),
        *,
        well_known: frozenset[str] = labels.CORE_WELL_KNOWN,
    ) -> None:
        self.rank: Mapping[str, int] = (
            catalog_order if isinstance(catalog_order, Mapping) else catalog_rank(catalog_order)
        )
        self.well_known = well_known
        self._chosen: dict[tuple[int, Requirements], tuple[Sequence[InstanceType], Choice]] = {}

    def choice(self, claim: PlannedClaim) -> Choice:
        """The type and offering the launch rule gives ``claim`` (None: no available offering)."""
        options = claim.instance_types
        key = (id(options), claim.requirements)
        hit = self._chosen.get(key)
        if hit is not None:
            return hit[1]
        rank = self.rank
        ordered = sorted(
            enumerate(options), key=lambda item: (rank.get(item[1].name, len(rank) + item[0]), item[0])
        )
        chosen = choose(claim.requirements, [it for _, it in ordered])
        self._chosen[key] = (options, chosen)
        return chosen

    def launch(self, claim: PlannedClaim) -> Launched | None:
        """The launched node for ``claim``, as :func:`launch` gives it."""
        chosen = self.choice(claim)
        if chosen is None:
            return None
        it, offering = chosen
        node = node_labels(
            claim.requirements,
            it,
            offering,
            template_labels=claim.labels,
            node_pool=claim.node_pool,
            hostname=claim.name,
            well_known=self.well_known,
        )
        return Launched(claim, it, offering, node)
