"""NodePool limits during a solve: what a pool's nodes use, and which options stay within them.

Upstream subtracts, per new NodeClaim, the capacity of its *largest* option (pessimistic).
Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

from collections.abc import Sequence

from karpy.core.snapshot import StateNode
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool
from karpy.model.resources import Resources

__all__ = ["max_capacity", "pool_usage", "within_limits"]


def pool_usage(pool: NodePool, nodes: Sequence[StateNode]) -> Resources:
    """What the pool's nodes count against its limits: their capacity, plus ``nodes`` per node."""
    out: dict[str, int] = {}
    for node in nodes:
        if node.node_pool != pool.name:
            continue
        for key, value in node.limit_capacity.items():
            out[key] = out.get(key, 0) + value
        out["nodes"] = out.get("nodes", 0) + 1
    return Resources(out)


def max_capacity(its: Sequence[InstanceType]) -> Resources:
    out = Resources()
    for it in its:
        out = out.max(it.capacity)
    return out


def within_limits(it: InstanceType, remaining: dict[str, int] | None) -> bool:
    if remaining is None:
        return True
    return all(it.capacity.get(name, 0) <= left for name, left in remaining.items() if name in it.capacity)
