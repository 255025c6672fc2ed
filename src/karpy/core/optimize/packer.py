"""Nodes being re-packed (:class:`Bin`) and how they are finalized and merged (:class:`Packer`).

A bin is a shrunk faithful NodeClaim that keeps the pods which may not move, or a new one.
:meth:`Packer.settle` turns a bin into a NodeClaim and launches it; :meth:`Packer.merge`
merges two nodes of a NodePool wherever one node costs less.

Pure: no I/O, no clock. Used by :mod:`karpy.core.optimize.repack`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from karpy.core.optimize import bound
from karpy.core.optimize import pools as pools_mod
from karpy.core.scheduling import Launched, PlannedClaim, launch, podinfo
from karpy.model import labels
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirements

__all__ = ["Bin", "Packer", "shrunk_requirements"]


def shrunk_requirements(
    claim: PlannedClaim, pool: NodePool, pods: Sequence[Pod], respect: bool
) -> Requirements:
    """The claim's requirements with the instance-type and capacity-type options it was finalized
    with taken out again (what its NodePool and its remaining pods ask for stays)."""
    reqs = claim.requirements.without(labels.INSTANCE_TYPE, labels.CAPACITY_TYPE)
    keys = (labels.INSTANCE_TYPE, labels.CAPACITY_TYPE)
    sources = [bound.template_requirements(pool)]
    sources += [podinfo.pod_data(p, respect_preferences=respect).requirements for p in pods]
    for source in sources:
        reqs = reqs.add(*(source[k] for k in keys if k in source))
    return reqs


@dataclass(slots=True)
class Bin:
    """A node being re-packed: a shrunk faithful NodeClaim (``fixed``: it keeps pods that may
    not move) or a new one; ``reqs`` are its requirements before instance-type options."""

    name: str
    pool: str
    reqs: Requirements
    pods: list[Pod]
    fixed: bool
    claim: PlannedClaim | None = None
    node: Launched | None = None
    need: np.ndarray | None = None

    @property
    def price(self) -> float:
        return math.inf if self.node is None else self.node.price


class Packer:
    """Finalizes, launches and merges bins with the instance types of their NodePools."""

    def __init__(
        self,
        pools: pools_mod.Pools,
        catalog_order: Sequence[str],
        well_known: frozenset[str],
        labels_of: dict[str, dict[str, str]],
    ) -> None:
        self.pools = pools
        self.catalog_order = catalog_order
        self.well_known = well_known
        self.labels_of = labels_of

    def settle(self, item: Bin) -> bool:
        """Finalize ``item``'s claim and launch it; False when no option or offering is left."""
        made = self.pools.claim(item.name, item.pool, item.reqs, item.pods)
        if made is None:
            return False
        claim, tied = made
        if item.name in self.labels_of:
            claim = replace(claim, labels=dict(self.labels_of[item.name]))
        # the launch rule over the cheapest options only (no other option can win), for speed
        node = launch(replace(claim, instance_types=tied), self.catalog_order, well_known=self.well_known)
        if node is None:
            return False
        item.claim, item.node = claim, replace(node, claim=claim)
        item.need = self.pools.need(item.pool, item.pods)
        return True

    def merge(self, bins: list[Bin]) -> None:
        """Merge two nodes of a pool into one wherever one node costs less (never two fixed ones)."""
        while True:
            merged_any = False
            taken: set[int] = set()
            for _, i, j in self._estimates(bins):
                if i in taken or j in taken:
                    continue
                a, b = bins[i], bins[j]
                if not a.reqs.overlaps(b.reqs):
                    continue
                keep, other = (a, b) if a.fixed or not b.fixed else (b, a)
                merged = Bin(
                    keep.name,
                    keep.pool,
                    keep.reqs.union_with(other.reqs),
                    [*keep.pods, *other.pods],
                    keep.fixed,
                )
                if not self.settle(merged) or merged.price >= a.price + b.price - 1e-9:
                    continue
                bins[i] = merged
                bins[j] = merged  # placeholder, dropped below
                taken.update((i, j))
                merged_any = True
            if not merged_any:
                return
            seen: set[int] = set()
            kept: list[Bin] = []
            for item in bins:
                if id(item) not in seen:
                    seen.add(id(item))
                    kept.append(item)
            bins[:] = kept

    def _estimates(self, bins: list[Bin]) -> list[tuple[float, int, int]]:
        """Pairs whose pods fit one type priced below the pair (ignoring requirements), best first."""
        out: list[tuple[float, int, int]] = []
        by_pool: dict[str, list[int]] = {}
        for i, item in enumerate(bins):
            if item.need is not None:
                by_pool.setdefault(item.pool, []).append(i)
        for pool, members in by_pool.items():
            if len(members) < 2:
                continue
            room, price = self.pools.frontier(pool)
            need = np.array([bins[i].need for i in members], dtype=np.int64)
            cost = np.array([bins[i].price for i in members])
            fixed = np.array([bins[i].fixed for i in members])
            for x in range(len(members) - 1):
                pair = need[x] + need[x + 1 :]
                fits = (pair[:, None, :] <= room[None, :, :]).all(axis=2)
                cheapest = np.where(fits, price[None, :], np.inf).min(axis=1)
                saving = cost[x] + cost[x + 1 :] - cheapest
                ok = (saving > 1e-9) & ~(fixed[x] & fixed[x + 1 :])
                out.extend(
                    (float(saving[y]), members[x], members[x + 1 + int(y)]) for y in np.flatnonzero(ok)
                )
        out.sort(key=lambda item: (-item[0], item[1], item[2]))
        return out
