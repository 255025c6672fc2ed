"""NodePool limits over a re-packing, as the scheduler applies them.

The claims kept as planned spend first; then each re-packed claim keeps only the
instance-type options within what is left and spends its largest option's capacity and a
node (the scheduler's pessimistic rule).

Pure: no I/O, no clock. Used by :mod:`karpy.core.optimize.repack`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from karpy.core.optimize.packer import Bin
from karpy.core.scheduling import Launched, PlannedClaim
from karpy.core.snapshot import Snapshot
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool
from karpy.model.requirements import Requirement

__all__ = ["exceeded_pool", "largest", "limit_options", "limit_room", "spend"]


def limit_room(snapshot: Snapshot, pool: NodePool) -> dict[str, int] | None:
    """What the pool's limits leave after its existing nodes (None: no limits)."""
    if pool.limits is None:
        return None
    used: dict[str, int] = {}
    for state in snapshot.nodes:
        if state.node_pool != pool.name:
            continue
        capacity: Mapping[str, int] = state.allocatable
        if state.node is not None and state.node.capacity:
            capacity = state.node.capacity
        if state.claim is not None and state.claim.capacity:
            capacity = state.claim.capacity
        for key, value in (*capacity.items(), ("nodes", 1)):
            used[key] = used.get(key, 0) + value
    return {k: v - used.get(k, 0) for k, v in pool.limits.items()}


def largest(its: Sequence[InstanceType]) -> dict[str, int]:
    """Per resource, the largest capacity any of ``its`` has."""
    out: dict[str, int] = {}
    for it in its:
        for key, value in it.capacity.items():
            out[key] = max(out.get(key, 0), value)
    return out


def limit_options(claim: PlannedClaim, left: dict[str, int]) -> PlannedClaim | None:
    """The claim with only the options within what the limits leave (None: none is)."""
    kept = tuple(
        it
        for it in claim.instance_types
        if all(it.capacity.get(k, 0) <= v for k, v in left.items() if k in it.capacity)
    )
    if not kept:
        return None
    if len(kept) == len(claim.instance_types):
        return claim
    reqs = claim.requirements.without(labels.CAPACITY_TYPE).add(
        Requirement(labels.INSTANCE_TYPE, False, frozenset(it.name for it in kept))
    )
    capacity_types = sorted(
        {o.capacity_type for it in kept for o in it.offerings if o.available and o.compatible(reqs)}
    )
    reqs = reqs.add(Requirement(labels.CAPACITY_TYPE, False, frozenset(capacity_types)))
    return replace(claim, instance_types=kept, requirements=reqs)


def spend(left: dict[str, int], claim: PlannedClaim) -> None:
    """The scheduler's pessimistic rule: a claim spends its largest option's capacity and a node."""
    biggest = largest(claim.instance_types)
    for key in left:
        left[key] -= 1 if key == "nodes" else biggest.get(key, 0)


def _pool_exceeds(
    *,
    budget: dict[str, int],
    pool_name: str,
    launched: Sequence[Launched],
    bins: Sequence[Bin],
    replaced: set[str],
) -> bool:
    """Spend ``budget`` on the pool's kept claims, then limit and spend its re-packed ones;
    True when a re-packed claim has no option left (or the budget goes negative)."""
    for node in launched:
        if node.claim.node_pool == pool_name and node.claim.name not in replaced:
            spend(budget, node.claim)
    for item in bins:
        if item.pool != pool_name:
            continue
        assert item.claim is not None and item.node is not None
        limited = limit_options(item.claim, budget) if min(budget.values(), default=0) >= 0 else None
        if limited is None or item.node.instance_type not in limited.instance_types:
            return True
        item.claim, item.node = limited, replace(item.node, claim=limited)
        spend(budget, limited)
    return any(v < 0 for v in budget.values())


def exceeded_pool(
    *,
    snapshot: Snapshot,
    by_name: Mapping[str, NodePool],
    launched: Sequence[Launched],
    bins: Sequence[Bin],
    replaced: set[str],
) -> str | None:
    """Apply every re-packed NodePool's limits to ``bins`` (narrowing their options in place);
    the first NodePool (by name) whose limits the re-packing would exceed, or None."""
    for pool_name in sorted({item.pool for item in bins}):
        budget = limit_room(snapshot, by_name[pool_name])
        if budget is None:
            continue
        if _pool_exceeds(budget=budget, pool_name=pool_name, launched=launched, bins=bins, replaced=replaced):
            return pool_name
    return None
