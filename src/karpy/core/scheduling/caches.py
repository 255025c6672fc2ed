"""The caches the scheduling core shares between solves, owned by whoever runs the solves.

A :class:`SchedulingCaches` holds the structures that only depend on objects a caller passes
again and again (see :mod:`karpy.core.scheduling.cache` for how inputs are matched): the
:class:`~karpy.core.scheduling.existing.Places` of a node tuple, the topology domain universe
and NodePool templates of NodePools and instance types, the bound-pod index of a pod tuple,
the whole-snapshot topology counts of a disruption pass, and what consolidation's early stop
reads of NodePools and bound pods. Every entry is a pure function of its inputs, so a fresh
object (what a solve uses when given none) gives the same results, only slower. The
provisioning controller keeps one for its lifetime; the disruption
:class:`~karpy.core.disruption.Memo` carries another from pass to pass.
"""

from __future__ import annotations

from karpy.core.scheduling.boundpods import BoundIndex
from karpy.core.scheduling.cache import IdentityCache
from karpy.core.scheduling.existing import Places
from karpy.core.scheduling.nodeclaim import Template
from karpy.core.scheduling.topocounts import Whole
from karpy.core.scheduling.topogroups import DomainGroup

__all__ = ["SchedulingCaches"]


class SchedulingCaches:
    """Bounded caches of pure scheduling structures (least recently used evicted first)."""

    __slots__ = (
        "bound_ct_anti",
        "bound_indexes",
        "domain_groups",
        "places",
        "pool_facts",
        "templates",
        "wholes",
    )

    def __init__(self) -> None:
        self.places: IdentityCache[Places] = IdentityCache(4)  # per (node tuple, DaemonSets)
        self.domain_groups: IdentityCache[dict[str, DomainGroup]] = IdentityCache()
        self.templates: IdentityCache[Template] = IdentityCache(64)  # per NodePool and its inputs
        self.bound_indexes: IdentityCache[BoundIndex] = IdentityCache(4)  # the last few pod tuples
        self.wholes: IdentityCache[Whole] = IdentityCache(2)  # a pass uses one, a provisioning solve another
        # per NodePools + instance types: (no NodePool has minValues, the NodePools whose claims allow spot)
        self.pool_facts: IdentityCache[tuple[bool, frozenset[str]]] = IdentityCache()
        # per bound-pod tuple: whether a bound pod's required anti-affinity is keyed on capacity type
        self.bound_ct_anti: IdentityCache[bool] = IdentityCache(4)

    def clear(self) -> None:
        """Forget every entry."""
        for cache in (
            self.places,
            self.domain_groups,
            self.templates,
            self.bound_indexes,
            self.wholes,
            self.pool_facts,
            self.bound_ct_anti,
        ):
            cache.clear()
