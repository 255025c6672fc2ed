"""The ``Consolidatable`` condition of a NodeClaim.

Upstream's ``nodeclaim/disruption`` (consolidation part), as a sub-reconciler of
:class:`karpy.controllers.nodeclaim_status.NodeClaimStatus`. The condition is True when
:func:`karpy.core.lifecycle.consolidatable` holds, and absent otherwise (cleared as upstream
does). :func:`change` also says when it could flip next, for the requeue;
:func:`conditions` rebuilds a claim's conditions list from a fresh ``get``.
"""

from __future__ import annotations

from typing import Any

from karpy.api import encode
from karpy.core import lifecycle
from karpy.model.objects import NodeClaim, NodePool

__all__ = ["CONSOLIDATABLE", "change", "conditions"]

CONSOLIDATABLE = "Consolidatable"


def change(pool: NodePool, claim: NodeClaim, now: float) -> tuple[bool | None, float | None]:
    """(desired Consolidatable when it must change, else None; when it could flip next)."""
    want = lifecycle.consolidatable(pool, claim, now)
    has = claim.is_true(CONSOLIDATABLE)
    flips_at: float | None = None
    since = lifecycle.consolidatable_since(claim)
    after = pool.disruption.consolidate_after
    if not want and since is not None and after is not None:
        flips_at = since + after
    if want and not has:
        return True, flips_at
    if not want and claim.condition(CONSOLIDATABLE) is not None:
        return False, flips_at
    return None, flips_at


def conditions(fresh: dict[str, Any], consolidatable: bool, now: float) -> list[dict[str, Any]]:
    """The conditions of the raw claim ``fresh`` with Consolidatable set (True) or removed."""
    out = [c for c in (fresh.get("status") or {}).get("conditions") or [] if c.get("type") != CONSOLIDATABLE]
    if consolidatable:
        out.append(
            {
                "type": CONSOLIDATABLE,
                "status": "True",
                "reason": CONSOLIDATABLE,
                "lastTransitionTime": encode.time(now),
            }
        )
    return out
