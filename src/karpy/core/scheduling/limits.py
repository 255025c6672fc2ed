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

__all__ = ["max_capacity", "pool_usage", "pool_usages", "within_limits"]


def pool_usage(pool: NodePool, nodes: Sequence[StateNode]) -> Resources:
    """What the pool's nodes count against its limits: their capacity, plus ``nodes`` per node."""
    usage: dict[str, dict[str, int]] = {}
    for node in nodes:
        if node.node_pool == pool.name:
            _count(usage, node, 1)
    return Resources(usage.get(pool.name, {}))


class _Tally:
    """Per-pool usage of one node tuple (kept alive, so the ids below stay valid)."""

    __slots__ = ("_by_name", "by_id", "nodes", "usage")

    def __init__(self, nodes: tuple[StateNode, ...], usage: dict[str, dict[str, int]] | None = None) -> None:
        self.nodes = nodes
        self.by_id = dict(zip(map(id, nodes), nodes, strict=True))
        self._by_name: dict[str, list[StateNode]] | None = None
        if usage is None:
            usage = {}
            for node in nodes:
                _count(usage, node, 1)
        self.usage = usage

    def named(self, names: frozenset[str]) -> list[StateNode]:
        """The nodes whose names are in ``names`` (in no particular order: sums do not care)."""
        index = self._by_name
        if index is None:
            index = self._by_name = {}
            for node in self.nodes:
                index.setdefault(node.name, []).append(node)
        return [node for name in names for node in index.get(name, ())]


def _count(usage: dict[str, dict[str, int]], node: StateNode, sign: int) -> None:
    out = usage.setdefault(node.node_pool, {})
    for key, value in node.limit_capacity.items():
        out[key] = out.get(key, 0) + sign * value
    out["nodes"] = out.get("nodes", 0) + sign


_LAST: list[_Tally] = []  # the reference tally of the last full count
MAX_DIFFERENCE = 16  # nodes in or out beyond which a full count (and a new reference) is cheaper


def pool_usages(
    nodes: Sequence[StateNode], *, without: frozenset[str] = frozenset()
) -> dict[str, dict[str, int]]:
    """:func:`pool_usage` of every pool at once, by pool name (missing keys are zero), of the
    ``nodes`` whose names are not in ``without``. The solves of a disruption pass count snapshots
    that differ by a node or two from the last full count: its sums are corrected by the nodes
    in and out (exact: integer sums, nodes by identity). Callers must not modify the result."""
    nodes = tuple(nodes)
    if without:
        ref = _LAST[0] if _LAST else None
        if ref is None or ref.nodes is not nodes:
            # the solves of a pass subtract different nodes from one tuple: keep its tally
            ref = _Tally(nodes, pool_usages(nodes))
            _LAST[:] = [ref]
        usage = {name: dict(counts) for name, counts in ref.usage.items()}
        for node in ref.named(without):
            _count(usage, node, -1)
        return usage
    if _LAST:
        ref = _LAST[0]
        if ref.nodes is nodes:
            return ref.usage
        by_id = dict(zip(map(id, nodes), nodes, strict=True))
        if len(by_id) == len(nodes) and len(ref.by_id) == len(ref.nodes):
            added = by_id.keys() - ref.by_id.keys()
            removed = ref.by_id.keys() - by_id.keys()
            if len(added) + len(removed) <= MAX_DIFFERENCE:
                usage = {name: dict(counts) for name, counts in ref.usage.items()}
                for i in added:
                    _count(usage, by_id[i], 1)
                for i in removed:
                    _count(usage, ref.by_id[i], -1)
                return usage
    tally = _Tally(nodes)
    _LAST[:] = [tally]
    return tally.usage


def max_capacity(its: Sequence[InstanceType]) -> Resources:
    """Per-resource maximum of the capacities (``Resources.max`` folded, in one dict)."""
    out: dict[str, int] = {}
    for it in its:
        for key, value in it.capacity.items():
            if value > out.get(key, 0):
                out[key] = value
    return Resources(out)


def within_limits(it: InstanceType, remaining: dict[str, int] | None) -> bool:
    if remaining is None:
        return True
    capacity = it.capacity
    for name, left in remaining.items():
        value = capacity.get(name)  # 0: not in the capacity (Resources keeps no zeros), not limited
        if value and value > left:
            return False
    return True
