"""Turning a packed NodeClaim into a :class:`PlannedClaim` (upstream's ``FinalizeScheduling``).

Options are ordered by their cheapest compatible offering (then name) and truncated to the
configured maximum; ``minValues`` is checked after truncation; the requirements get the
instance-type and capacity-type lists; the requests get the smallest DaemonSet overhead over
the options. The price order and its companions are computed with the template's
:class:`~karpy.core.scheduling.typeindex.TypeIndex` and shared by claims with the same options,
zones and capacity types. Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.core.scheduling.nodeclaim import ClaimInProgress, min_values_shortfall
from karpy.core.scheduling.results import PlannedClaim
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

    def _options(self, claim: ClaimInProgress, reqs: Requirements) -> _Final:
        """Price-ordered, truncated options with their names, capacity types and smallest
        DaemonSet overhead; shared by claims with the same options, zones and capacity types."""
        index = claim.index
        memo = (id(index), claim.options.tobytes(), reqs.get(labels.ZONE), reqs.get(labels.CAPACITY_TYPE))
        cached = self.finals.get(memo)
        if cached is None:
            ordered = index.order_by_price(claim.options, reqs)[: self.max_types]
            its = index.select(ordered)
            daemon = [o.requests for o in index.overheads(ordered)]
            smallest = min(daemon, key=lambda r: (r.get(CPU), r.get(MEMORY))) if daemon else Resources()
            names = frozenset(it.name for it in its)
            cached = _Final(tuple(its), names, index.capacity_types_of(ordered, reqs), smallest)
            self.finals[memo] = cached
        return cached

    def finalize(self, claim: ClaimInProgress) -> PlannedClaim | str:
        reqs = claim.requirements.without(labels.HOSTNAME)
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
