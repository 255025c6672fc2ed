"""Drift: which NodeClaims no longer match their NodePool.

A claim is drifted when it carries ``Drifted=True``, when its ``karpenter.sh/nodepool-hash``
annotation differs from the NodePool's current hash *and* its hash-version annotation is
karpy's (:data:`HASH_VERSION`; a claim with no hash or another version is not drifted —
the lifecycle controller re-stamps it, so nodes adopted from Karpenter do not all drift at
once), or when a NodePool requirement conflicts with a label the claim has. The hash covers
what upstream hashes: template labels, annotations, taints, startup taints, nodeClassRef,
expireAfter and terminationGracePeriod (requirements and budgets excluded; taints as sets).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from karpy.core.snapshot import StateNode
from karpy.model.objects import NodePool
from karpy.model.requirements import Requirements

__all__ = [
    "HASH_ANNOTATION",
    "HASH_VERSION",
    "HASH_VERSION_ANNOTATION",
    "drift_reason",
    "drifted_since",
    "pool_hash",
    "requirement_conflicts",
]

HASH_ANNOTATION = "karpenter.sh/nodepool-hash"
HASH_VERSION_ANNOTATION = "karpenter.sh/nodepool-hash-version"
HASH_VERSION = "karpy-v1"


def pool_hash(pool: NodePool) -> str:
    ref = pool.node_class_ref
    doc = {
        "labels": sorted(pool.labels.items()),
        "annotations": sorted(pool.annotations.items()),
        "taints": sorted((t.key, t.value, t.effect) for t in pool.taints),
        "startupTaints": sorted((t.key, t.value, t.effect) for t in pool.startup_taints),
        "nodeClassRef": [ref.group, ref.kind, ref.name] if ref is not None else None,
        "expireAfter": pool.expire_after,
        "terminationGracePeriod": pool.termination_grace_period,
    }
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return str(int(digest[:16], 16))


def requirement_conflicts(node: StateNode, pool: NodePool) -> str | None:
    """The NodePool requirements the node's labels no longer meet, or None."""
    node_labels = node.labels
    present = Requirements(r for r in pool.requirement_set().values() if r.key in node_labels)
    conflicts = Requirements.from_labels(node_labels).intersects(present)
    if conflicts:
        return "NodePool requirements changed: " + "; ".join(conflicts)
    return None


def drift_reason(
    node: StateNode,
    pool: NodePool,
    *,
    hash_of: Callable[[NodePool], str] = pool_hash,
    conflicts_of: Callable[[StateNode, NodePool], str | None] = requirement_conflicts,
) -> str | None:
    """Why the node's claim is drifted, or None.

    ``hash_of`` and ``conflicts_of`` are :func:`pool_hash` and :func:`requirement_conflicts`,
    or memos of them.
    """
    claim = node.claim
    if claim is None:
        return None
    cond = claim.condition("Drifted")
    if cond is not None and cond.status == "True":
        return f"Drifted condition ({cond.reason or 'Drifted'})"
    annotations = claim.annotations
    stamped = annotations.get(HASH_ANNOTATION)
    if stamped is not None and annotations.get(HASH_VERSION_ANNOTATION) == HASH_VERSION:
        current = hash_of(pool)
        if stamped != current:
            return f"NodePool template changed (hash {stamped} -> {current})"
    return conflicts_of(node, pool)


def drifted_since(node: StateNode, now: float) -> float:
    claim = node.claim
    cond = claim.condition("Drifted") if claim is not None else None
    if cond is not None and cond.last_transition is not None:
        return cond.last_transition
    return now
