"""Turning a packed NodeClaim into a :class:`PlannedClaim` (upstream's ``FinalizeScheduling``).

Options are ordered by their cheapest compatible offering (then name) and truncated to the
configured maximum; ``minValues`` is checked after truncation; the requirements get the
instance-type and capacity-type lists; the requests get the smallest DaemonSet overhead over
the options. The price order and its companions are computed with the template's
:class:`~karpy.core.scheduling.typeindex.TypeIndex` and shared by claims with the same options,
zones and capacity types. Used by :mod:`karpy.core.scheduling.scheduler`.

A NodePool annotated ``karpy.sh/sizing: usable-price`` orders the options by price per usable
resource instead (:mod:`karpy.core.scheduling.sizing`): the best-ranked type first, then only
the types that cost more, so the type launched (the cheapest allowed option) is the best-ranked
one. Without the annotation nothing here changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.core.scheduling import sizing
from karpy.core.scheduling.nodeclaim import ClaimInProgress, min_values_shortfall
from karpy.core.scheduling.results import PlannedClaim
from karpy.core.scheduling.typeindex import Options, TypeIndex
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import CPU, MEMORY, Resources

__all__ = ["Finalizer"]


@dataclass(frozen=True, slots=True)
class _Final:
    instance_types: tuple[InstanceType, ...]
    names: frozenset[str]
    capacity_types: list[str]
    smallest_daemon: Resources


class Finalizer:
    def __init__(self, max_types: int | None) -> None:
        self.max_types = max_types
        self.finals: dict[object, _Final] = {}

    def _final(self, index: TypeIndex, ordered: Options, reqs: Requirements) -> _Final:
        ordered = ordered[: self.max_types]
        its = index.select(ordered)
        daemon = [o.requests for o in index.overheads(ordered)]
        smallest = min(daemon, key=lambda r: (r.get(CPU), r.get(MEMORY))) if daemon else Resources()
        names = frozenset(it.name for it in its)
        return _Final(tuple(its), names, index.capacity_types_of(ordered, reqs), smallest)

    def _options(self, claim: ClaimInProgress, reqs: Requirements) -> _Final:
        """Price-ordered, truncated options with their names, capacity types and smallest
        DaemonSet overhead; shared by claims with the same options, zones and capacity types."""
        index = claim.index
        memo = (id(index), claim.bits, reqs.get(labels.ZONE), reqs.get(labels.CAPACITY_TYPE))
        cached = self.finals.get(memo)
        if cached is None:
            cached = self._final(index, index.order_by_price(claim.options, reqs), reqs)
            self.finals[memo] = cached
        return cached

    def _sized_options(self, claim: ClaimInProgress, reqs: Requirements) -> _Final | None:
        """The options under ``karpy.sh/sizing: usable-price`` (best type by price per usable
        resource first, then the pricier ones); None when they are the default order, or when
        they would miss the pool's ``minValues`` (the default order is then kept)."""
        index = claim.index
        ordered = index.order_by_price(claim.options, reqs)
        kept = sizing.sized(index, ordered, reqs, claim.requests)
        if kept is ordered:
            return None
        memo = (id(index), kept.tobytes(), reqs.get(labels.ZONE), reqs.get(labels.CAPACITY_TYPE), "sized")
        cached = self.finals.get(memo)
        if cached is None:
            cached = self._final(index, kept, reqs)
            self.finals[memo] = cached
        if reqs.has_min_values() and min_values_shortfall(cached.instance_types, reqs) is not None:
            return None
        return cached

    def finalize(self, claim: ClaimInProgress) -> PlannedClaim | str:
        reqs = claim.requirements.without(labels.HOSTNAME)
        final = None
        if sizing.enabled(claim.template.pool):
            final = self._sized_options(claim, reqs)
        if final is None:
            final = self._options(claim, reqs)
        its = final.instance_types
        if reqs.has_min_values():
            shortfall = min_values_shortfall(its, reqs)
            if shortfall is not None:
                return f"NodePool couldn't meet minValues requirements after truncation ({shortfall})"
        type_req = reqs.get(labels.INSTANCE_TYPE)
        min_values = type_req.min_values if type_req is not None else None
        reqs = reqs.add(Requirement(labels.INSTANCE_TYPE, False, final.names, min_values=min_values))
        reqs = reqs.add(Requirement(labels.CAPACITY_TYPE, False, frozenset(final.capacity_types)))
        return PlannedClaim(
            name=claim.hostname,
            node_pool=claim.template.pool.name,
            requirements=reqs,
            instance_types=its,
            pods=tuple(claim.pods),
            requests=claim.requests + final.smallest_daemon,
            labels=dict(claim.template.labels),
            taints=claim.template.taints,
            startup_taints=claim.template.startup_taints,
        )
