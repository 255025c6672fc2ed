"""What a disruption pass reads of the snapshot, and until when its time-derived facts hold.

A pass is a pure function of the snapshot's objects and ``now``. Its ``now`` enters through a
few thresholds only: a NodeClaim's expiry, the end of its consolidateAfter window (candidates,
emptiness, and the nodes a consolidation solve keeps running pods off), a pod's
``karpenter.sh/do-not-disrupt`` duration, a NodePool's stabilization window, a budget's cron
window, a rollout guard's settle time or progress deadline
(:func:`~karpy.core.disruption.rollout.moments`), and a Drifted condition's time (the order of
drifted nodes). :func:`next_change` is the first of those after ``now``: over the same objects,
a pass at any time in ``[now, next_change)`` decides what the pass at ``now`` decided.
:func:`state_ids` is the identity key of those objects (plus consolidation's switch), for memos
that keep the snapshot alive so the ids stay valid.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from karpy.core import headroom, lifecycle
from karpy.core.disruption import budgets, candidates, rollout
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.objects import NodePool

__all__ = [
    "STABILIZATION",
    "next_change",
    "node_moments",
    "same_values",
    "stabilization_end",
    "state_ids",
    "switches",
]

STABILIZATION = "karpy.sh/consolidation-stabilization"


def state_ids(snapshot: Snapshot, early_stop: bool) -> tuple[object, ...]:
    """The identities of every node, pod, NodePool, instance-type tuple, DaemonSet, PDB and rollout.

    The pods (tens of thousands) are named by their tuple's identity: a tuple is immutable, so
    the same tuple holds the same pods (another tuple of the same pods only compares unequal,
    which costs a recomputation, never a wrong answer)."""
    pods = snapshot.pods
    return (
        tuple(map(id, snapshot.nodes)),
        ("tuple", id(pods)) if isinstance(pods, tuple) else tuple(map(id, pods)),
        tuple(map(id, snapshot.node_pools)),
        tuple((name, id(its)) for name, its in snapshot.instance_types.items()),
        tuple(map(id, snapshot.daemonsets)),
        tuple(map(id, snapshot.pdbs)),
        tuple(map(id, snapshot.rollouts)),
        *switches(early_stop),
    )


def switches(early_stop: bool) -> tuple[bool]:
    """Consolidation's switch, the last item of :func:`state_ids`."""
    return (early_stop,)


def same_values(a: Snapshot, b: Snapshot) -> bool:
    """The parts :func:`state_ids` leaves out, compared by value."""
    return a.namespaces == b.namespaces and a.well_known == b.well_known and a.settings == b.settings


def next_change(snapshot: Snapshot, now: float) -> float:
    """The first moment after ``now`` at which a time-derived input of a pass may change (inf: none)."""
    soonest = math.inf

    def at(moment: float | None) -> None:
        nonlocal soonest
        if moment is not None and now < moment < soonest:
            soonest = moment

    pools = {p.name: p for p in snapshot.node_pools}
    for node in snapshot.nodes:
        moments = node_moments(node, pools.get(node.node_pool))
        if moments:
            i = bisect.bisect_right(moments, now)
            if i < len(moments):
                at(moments[i])
    for pool in snapshot.node_pools:
        for budget in pool.disruption.budgets:
            try:
                budgets.validate(budget)
            except budgets.BudgetError:
                continue  # an invalid budget fails closed at every time
            at(budgets.active_until(budget, now))
        at(stabilization_end(pool, snapshot.nodes))
    for moment in rollout.moments(snapshot):  # karpy.sh/rollout-guard
        at(moment)
    at(headroom.next_edge(snapshot.node_pools, now))
    return soonest


def node_moments(node: StateNode, pool: NodePool | None) -> tuple[float, ...]:
    """The node's time-derived moments, sorted: its pods' do-not-disrupt ends, its claim's
    expiry, the end of its consolidateAfter window and its Drifted condition's time.

    They read only the node's (immutable) claim and pods and two durations of its NodePool (an
    object replaced on every status update), so they are kept on the StateNode with those.
    """
    durations = None if pool is None else (pool.expire_after, pool.disruption.consolidate_after)
    held = node._derived.get("moments")
    if held is not None and held[0] == durations:
        found: tuple[float, ...] = held[1]
        return found
    moments: list[float] = []
    for pod in node.pods:
        if labels.DO_NOT_DISRUPT in pod.annotations:
            until = candidates.do_not_disrupt_until(pod)
            if until is not None:
                moments.append(until)
    claim = node.claim
    if claim is not None:
        expires = lifecycle.expires_at(claim, pool)
        if expires is not None:
            moments.append(expires)
        after = pool.disruption.consolidate_after if pool is not None else None
        since = lifecycle.consolidatable_since(claim)
        if after is not None and since is not None:
            moments.append(since + after)
        drifted = claim.condition("Drifted")
        if drifted is not None and drifted.last_transition is not None:
            moments.append(drifted.last_transition)
    found = tuple(sorted(moments))
    node._derived["moments"] = (durations, found)
    return found


def stabilization_end(pool: NodePool, nodes: Sequence[StateNode]) -> float | None:
    """When the pool's ``karpy.sh/consolidation-stabilization`` window after its last pod event
    ends (None: no window, or no pod event yet); the pool stabilizes while ``now`` is before it."""
    text = pool.meta_annotations.get(STABILIZATION)
    window = candidates._duration(text) if text else None
    if window is None:
        return None
    events = [
        n.claim.last_pod_event
        for n in nodes
        if n.claim is not None and n.node_pool == pool.name and n.claim.last_pod_event is not None
    ]
    return max(events) + window if events else None
