"""Per NodePool: instance types, DaemonSet overhead and room as arrays, and NodeClaims built
from them the way the scheduler finalizes one.

Pure: no I/O, no clock. Used by :mod:`karpy.core.optimize.repack` and
:mod:`karpy.core.optimize.packer`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from karpy.core.optimize import bound
from karpy.core.scheduling import PlannedClaim, podinfo
from karpy.core.scheduling.nodeclaim import min_values_shortfall
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import CPU, MEMORY, Resources, total

__all__ = ["Pools"]


class Pools:
    """Per NodePool: instance types, DaemonSet overhead and room as arrays (built on first use)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.by_name = {p.name: p for p in snapshot.node_pools}
        self.max_types = snapshot.settings.scheduling.max_instance_types
        self._types: dict[str, tuple[list[InstanceType], dict[str, Resources]]] = {}
        self._matrix: dict[str, tuple[np.ndarray, np.ndarray, tuple[str, ...]]] = {}
        self._allowed: dict[
            tuple[str, Requirements], tuple[np.ndarray, np.ndarray, list[frozenset[str]]]
        ] = {}

    def types(self, pool: str) -> tuple[list[InstanceType], dict[str, Resources]]:
        if pool not in self._types:
            self._types[pool] = bound.pool_types(self.snapshot, self.by_name[pool])
        return self._types[pool]

    def matrix(self, pool: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
        """Room for pods (types × resources), the cheapest available price per type, resource names."""
        if pool not in self._matrix:
            types, overhead = self.types(pool)
            names = tuple(sorted({k for it in types for k in it.allocatable}))
            room = np.array(
                [[it.allocatable.get(r, 0) - overhead[it.name].get(r, 0) for r in names] for it in types],
                dtype=np.int64,
            ).reshape(len(types), len(names))
            prices = [min((o.price for o in it.offerings if o.available), default=math.inf) for it in types]
            self._matrix[pool] = (room, np.array(prices, dtype=float), names)
        return self._matrix[pool]

    def need(self, pool: str, pods: Sequence[Pod]) -> np.ndarray | None:
        """Summed requests as a vector over the pool's resources (None: a resource no type has)."""
        _, _, names = self.matrix(pool)
        requests = total(podinfo.pod_requests(p) for p in pods)
        if any(v > 0 and k not in names for k, v in requests.items()):
            return None
        return np.array([requests.get(r, 0) for r in names], dtype=np.int64)

    def allowed(self, pool: str, reqs: Requirements) -> tuple[np.ndarray, np.ndarray, list[frozenset[str]]]:
        """The pool's types ``reqs`` allow with an available offering: indices, cheapest prices
        and capacity types offered (adding instance-type options to ``reqs`` changes none of it)."""
        key = (pool, reqs)
        if key not in self._allowed:
            types, _ = self.types(pool)
            index: list[int] = []
            prices: list[float] = []
            kinds: list[frozenset[str]] = []
            for i, it in enumerate(types):
                if not it.requirements.overlaps(reqs):
                    continue
                offered = [o for o in it.offerings if o.available and o.compatible(reqs)]
                if offered:
                    index.append(i)
                    prices.append(min(o.price for o in offered))
                    kinds.append(frozenset(o.capacity_type for o in offered))
            self._allowed[key] = (np.array(index, dtype=np.int64), np.array(prices, dtype=float), kinds)
        return self._allowed[key]

    def claim(
        self, name: str, pool_name: str, reqs: Requirements, pods: Sequence[Pod]
    ) -> tuple[PlannedClaim, tuple[InstanceType, ...]] | None:
        """A NodeClaim for ``pods`` under ``reqs``: every type of the pool that allows them and
        fits them beside its DaemonSets is an option (cheapest first), as the scheduler finalizes;
        with the options that share the lowest price."""
        pool = self.by_name[pool_name]
        types, overhead = self.types(pool_name)
        need = self.need(pool_name, pods)
        if need is None:
            return None
        room, _, _ = self.matrix(pool_name)
        index, prices, offered = self.allowed(pool_name, reqs)
        if not len(index):
            return None
        fits = np.flatnonzero((room[index] >= need[None, :]).all(axis=1))
        ranked = sorted(fits, key=lambda j: (prices[j], types[int(index[j])].name))[: self.max_types]
        if not ranked:
            return None
        options = [types[int(index[j])] for j in ranked]
        if reqs.has_min_values() and min_values_shortfall(options, reqs) is not None:
            return None
        lowest = prices[ranked[0]]
        tied = tuple(types[int(index[j])] for j in ranked if prices[j] <= lowest)
        capacity_types = sorted(set().union(*(offered[j] for j in ranked)))
        reqs = reqs.add(
            Requirement(labels.INSTANCE_TYPE, False, frozenset(it.name for it in options)),
            Requirement(labels.CAPACITY_TYPE, False, frozenset(capacity_types)),
        )
        smallest = min((overhead[it.name] for it in options), key=lambda r: (r.get(CPU), r.get(MEMORY)))
        claim = PlannedClaim(
            name=name,
            node_pool=pool.name,
            requirements=reqs,
            instance_types=tuple(options),
            pods=tuple(pods),
            requests=total(podinfo.pod_requests(p) for p in pods) + smallest,
            labels={**pool.labels, labels.NODEPOOL: pool.name},
            taints=pool.taints,
            startup_taints=pool.startup_taints,
        )
        return claim, tied

    def frontier(self, pool: str) -> tuple[np.ndarray, np.ndarray]:
        """Room and price of the types no cheaper-or-equal type with as much room dominates."""
        room, price, _ = self.matrix(pool)
        order = np.lexsort((-room.sum(axis=1), price))
        kept: list[int] = []
        for i in order:
            if not np.isfinite(price[i]):
                continue
            if kept and (room[kept] >= room[i]).all(axis=1).any():
                continue
            kept.append(int(i))
        return room[kept], price[kept]
