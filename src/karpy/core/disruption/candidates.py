"""Which nodes may be disrupted, and at what cost (Karpenter's ``NewCandidate``).

Base conditions (both classes): a managed node (Node and NodeClaim), initialized, not
being deleted, not nominated, no ``karpenter.sh/do-not-disrupt`` on the Node, a known
NodePool. Graceful disruption (emptiness, consolidation) also needs every pod evictable:
no active ``do-not-disrupt`` pod (``"true"`` or a duration since the pod started) and no pod
a PDB protects. Eventual disruption (drift) keeps a node whose pods block eviction when its
NodeClaim has a ``terminationGracePeriod``. Pods without an owner are evicted, not
blocking; DaemonSet and mirror pods are not rescheduled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from karpy.core.disruption import pdbs as pdbs_mod
from karpy.core.disruption.types import Candidate
from karpy.core.snapshot import StateNode
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import NodePool, Pod
from karpy.model.requirements import Requirements
from karpy.model.taints import NO_SCHEDULE, Taint, first_untolerated

__all__ = ["EVENTUAL", "GRACEFUL", "build", "do_not_disrupt_active", "eviction_cost", "reschedulable"]

DISRUPTED_TAINT = Taint("karpenter.sh/disrupted", NO_SCHEDULE)
GRACEFUL = "graceful"
EVENTUAL = "eventual"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def _duration(text: str) -> float | None:
    units = {"s": 1, "m": 60, "h": 3600}
    total = 0.0
    number = ""
    for char in text.strip():
        if char.isdigit() or char == ".":
            number += char
        elif char in units and number:
            total += float(number) * units[char]
            number = ""
        else:
            return None
    return total if not number and total > 0 else None


def do_not_disrupt_active(pod: Pod, now: float) -> bool:
    """``karpenter.sh/do-not-disrupt``: ``"true"``, or a duration counted from the pod's start."""
    value = pod.annotations.get(labels.DO_NOT_DISRUPT)
    if value is None or pod.is_terminal() or pod.deleting:
        return False
    if value == "true":
        return True
    seconds = _duration(value)
    if seconds is None:
        return False  # invalid values are ignored (upstream emits an event)
    started = pod.started if pod.started is not None else pod.created
    return now < started + seconds


def reschedulable(pod: Pod) -> bool:
    """Active pods that are neither DaemonSet-owned nor mirror (node-owned) pods."""
    if pod.is_terminal() or pod.deleting:
        return False
    owner = pod.controller
    return not (owner is not None and owner.kind in ("DaemonSet", "Node"))


def evictable(pod: Pod) -> bool:
    """Pods a drain evicts: active, not mirror pods, not tolerating ``karpenter.sh/disrupted``."""
    if pod.is_terminal() or pod.deleting:
        return False
    owner = pod.controller
    if owner is not None and owner.kind == "Node":
        return False
    return first_untolerated(pod.tolerations, (DISRUPTED_TAINT,)) is not None


def eviction_cost(pod: Pod) -> float:
    """``1 + deletion-cost/2^27 + priority/2^25``, clamped to [-10, 10]."""
    cost = 1.0
    raw = pod.annotations.get(DELETION_COST)
    if raw is not None:
        with contextlib.suppress(ValueError):
            cost += int(raw) / 2**27
    cost += pod.priority / 2**25
    return max(-10.0, min(10.0, cost))


def _lifetime_remaining(pool: NodePool, node: StateNode, now: float) -> float:
    claim = node.claim
    expire_after = (
        claim.expire_after if claim is not None and claim.expire_after is not None else pool.expire_after
    )
    if expire_after is None or claim is None or expire_after <= 0:
        return 1.0
    return max(0.0, min(1.0, 1 - (now - claim.created) / expire_after))


def _price(it: InstanceType | None, node_labels: Mapping[str, str]) -> float | None:
    if it is None:
        return None
    reqs = Requirements.from_labels(
        {k: v for k, v in node_labels.items() if k in (labels.ZONE, labels.CAPACITY_TYPE)}
    )
    compatible = [o.price for o in it.offerings if o.compatible(reqs)]
    return min(compatible) if compatible else None


def build(
    node: StateNode,
    *,
    pools: Mapping[str, NodePool],
    instance_types: Mapping[str, Mapping[str, InstanceType]],
    limits: pdbs_mod.Limits,
    now: float,
    disruption_class: str,
) -> tuple[Candidate | None, str]:
    """The candidate for ``node`` under a disruption class, or None and why not."""
    if node.claim is None or node.node is None:
        return (
            None,
            "not managed: no NodeClaim" if node.claim is None else "NodeClaim has not registered a Node",
        )
    if not node.initialized:
        return None, "not initialized"
    if node.marked_for_deletion or node.node.deleting or node.claim.deleting:
        return None, "already being deleted"
    if node.nominated:
        return None, "nominated for pending pods"
    if node.node.annotations.get(labels.DO_NOT_DISRUPT) == "true":
        return None, "node annotated karpenter.sh/do-not-disrupt=true"
    pool = pools.get(node.node_pool)
    if pool is None:
        return None, f"NodePool {node.node_pool!r} not found"
    pods = tuple(p for p in node.pods if not p.is_terminal())
    blocked = ""
    for pod in pods:
        if do_not_disrupt_active(pod, now):
            blocked = (
                f"pod {pod.key} has karpenter.sh/do-not-disrupt={pod.annotations[labels.DO_NOT_DISRUPT]}"
            )
            break
        if evictable(pod):
            why = limits.blocking(pod)
            if why is not None:
                blocked = why
                break
    if blocked:
        eventual_ok = disruption_class == EVENTUAL and node.claim.termination_grace_period is not None
        if not eventual_ok:
            return None, blocked
    node_labels = node.labels
    it = instance_types.get(pool.name, {}).get(node_labels.get(labels.INSTANCE_TYPE, ""))
    moving = tuple(p for p in pods if reschedulable(p))
    return (
        Candidate(
            node=node,
            pool=pool,
            instance_type=it,
            capacity_type=node_labels.get(labels.CAPACITY_TYPE, ""),
            zone=node_labels.get(labels.ZONE, ""),
            price=_price(it, node_labels),
            reschedulable=moving,
            pods=pods,
            reschedule_cost=1 + sum(max(0.0, eviction_cost(p)) for p in moving),
            disruption_cost=sum(eviction_cost(p) for p in pods) * _lifetime_remaining(pool, node, now),
            blocked_eviction=blocked,
        ),
        "",
    )


def build_all(
    nodes: Sequence[StateNode],
    *,
    pools: Mapping[str, NodePool],
    instance_types: Mapping[str, Mapping[str, InstanceType]],
    limits: pdbs_mod.Limits,
    now: float,
    disruption_class: str,
) -> tuple[list[Candidate], dict[str, str]]:
    out: list[Candidate] = []
    why_not: dict[str, str] = {}
    for node in nodes:
        candidate, reason = build(
            node,
            pools=pools,
            instance_types=instance_types,
            limits=limits,
            now=now,
            disruption_class=disruption_class,
        )
        if candidate is None:
            why_not[node.name] = reason
        else:
            out.append(candidate)
    return out, why_not
