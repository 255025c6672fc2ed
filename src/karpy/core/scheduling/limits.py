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

__all__ = ["max_capacity", "pool_usage", "pool_usages", "remaining_limits", "within_limits"]


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

    def __init__(
        self,
        nodes: tuple[StateNode, ...],
        by_id: dict[int, StateNode],
        usage: dict[str, dict[str, int]] | None = None,
    ) -> None:
        self.nodes = nodes
        self.by_id = by_id  # id -> node of ``nodes`` (fewer entries: a node repeated)
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


_LAST: list[_Tally] = []  # the tally of the last node tuple counted
MAX_DIFFERENCE = 64  # nodes in or out (beyond those that count the same) past which a full count is cheaper


def pool_usages(
    nodes: Sequence[StateNode], *, without: frozenset[str] = frozenset()
) -> dict[str, dict[str, int]]:
    """:func:`pool_usage` of every pool at once, by pool name (missing keys are zero), of the
    ``nodes`` whose names are not in ``without``. Each node tuple is counted from the last one's
    tally, corrected by the nodes in and out (exact: integer sums, nodes by identity); a node
    replaced by one that counts the same (same name, NodePool and capacity: its pods or its
    claim's status changed) needs no correction. The solves of a disruption pass subtract
    different nodes from one tuple: its tally is kept. Callers must not modify the result."""
    nodes = tuple(nodes)
    ref = _LAST[0] if _LAST else None
    if ref is None or ref.nodes is not nodes:
        ref = _tally(nodes, ref)
        _LAST[:] = [ref]
    if not without:
        return ref.usage
    usage = {name: dict(counts) for name, counts in ref.usage.items()}
    for node in ref.named(without):
        _count(usage, node, -1)
    return usage


def _tally(nodes: tuple[StateNode, ...], ref: _Tally | None) -> _Tally:
    """The tally of ``nodes``: ``ref``'s corrected by the nodes in and out, or a full count."""
    by_id = dict(zip(map(id, nodes), nodes, strict=True))
    if ref is None or len(by_id) != len(nodes) or len(ref.by_id) != len(ref.nodes):
        return _Tally(nodes, by_id)
    changes = _changes(ref, by_id)
    if changes is None:
        return _Tally(nodes, by_id)
    added, removed = changes
    usage = {name: dict(counts) for name, counts in ref.usage.items()}
    for node in added:
        _count(usage, node, 1)
    for node in removed:
        _count(usage, node, -1)
    return _Tally(nodes, by_id, usage)


def _changes(ref: _Tally, by_id: dict[int, StateNode]) -> tuple[list[StateNode], list[StateNode]] | None:
    """The nodes in and out since ``ref``, less the pairs of an old and a new node that count the
    same; None when more than :data:`MAX_DIFFERENCE` are left."""
    old = ref.by_id
    out_by_name: dict[str, list[StateNode]] = {}
    for i in old.keys() - by_id.keys():
        node = old[i]
        out_by_name.setdefault(node.name, []).append(node)
    added: list[StateNode] = []
    for i in by_id.keys() - old.keys():
        node = by_id[i]
        gone = out_by_name.get(node.name)
        if gone and _counts_the_same(gone[-1], node):
            gone.pop()
            continue
        added.append(node)
        if len(added) > MAX_DIFFERENCE:
            return None
    removed = [node for gone in out_by_name.values() for node in gone]
    if len(added) + len(removed) > MAX_DIFFERENCE:
        return None
    return added, removed


def _counts_the_same(a: StateNode, b: StateNode) -> bool:
    """Whether ``_count`` adds the same to the same pool for both nodes."""
    if a.node_pool != b.node_pool:
        return False
    ca, cb = a.limit_capacity, b.limit_capacity
    return ca is cb or ca == cb


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


def remaining_limits(
    pools: Sequence[NodePool], nodes: Sequence[StateNode], without: frozenset[str] = frozenset()
) -> dict[str, dict[str, int] | None]:
    """Per NodePool, what its limits leave for new claims given ``nodes`` less the ``without``
    ones (None: the pool has no limits)."""
    usages: dict[str, dict[str, int]] = {}
    if any(p.limits is not None for p in pools):
        usages = pool_usages(nodes, without=without)
    remaining: dict[str, dict[str, int] | None] = {}
    for pool in pools:
        if pool.limits is None:
            remaining[pool.name] = None
        else:
            used = usages.get(pool.name, {})
            remaining[pool.name] = {k: v - used.get(k, 0) for k, v in pool.limits.items()}
    return remaining
