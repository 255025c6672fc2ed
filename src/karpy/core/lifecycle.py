"""Time-derived NodeClaim states: Consolidatable and expiry (pure functions of ``now``).

``consolidatable_since`` is when the quiet period began (``status.lastPodEventTime``, else
the Initialized condition's time); a claim is Consolidatable once ``consolidateAfter`` has
passed since then. Used by the scheduler (consolidation simulations never move running
pods onto a node still inside its window) and by the disruption core.
"""

from __future__ import annotations

import math

from karpy.model.objects import NodeClaim, NodePool

__all__ = ["consolidatable", "consolidatable_since", "expired", "expires_at", "under_consolidate_after"]


def consolidatable_since(claim: NodeClaim) -> float | None:
    initialized = claim.condition("Initialized")
    if initialized is None or initialized.status != "True":
        return None
    if claim.last_pod_event is not None:
        return claim.last_pod_event
    return initialized.last_transition if initialized.last_transition is not None else claim.created


def consolidatable(pool: NodePool, claim: NodeClaim, now: float) -> bool:
    """Initialized and ``now - since >= consolidateAfter`` (never when consolidateAfter is Never)."""
    after = pool.disruption.consolidate_after
    since = consolidatable_since(claim)
    return after is not None and since is not None and now - since >= after


def under_consolidate_after(pool: NodePool | None, claim: NodeClaim | None, now: float) -> bool:
    """Still inside the consolidateAfter window (Never is never 'inside the window')."""
    if pool is None or claim is None:
        return False
    after = pool.disruption.consolidate_after
    if after is None:
        return False
    since = consolidatable_since(claim)
    if since is None:
        return False
    return now - since < after


def expires_at(claim: NodeClaim, pool: NodePool | None) -> float | None:
    """When the claim expires: created + its own expireAfter, else its NodePool's (None = never)."""
    expire_after = claim.expire_after
    if expire_after is None and pool is not None:
        expire_after = pool.expire_after
    if expire_after is None or math.isinf(expire_after):
        return None
    return claim.created + expire_after


def expired(claim: NodeClaim, pool: NodePool | None, now: float) -> bool:
    """``now >= created + expireAfter`` (see :func:`expires_at`)."""
    at = expires_at(claim, pool)
    return at is not None and now >= at
