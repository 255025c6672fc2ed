"""Expiration: delete NodeClaims whose ``expireAfter`` has elapsed (upstream ``nodeclaim.expiration``).

The loop task ``nodeclaim.expiration``; the wiring wakes it on NodeClaim events. A claim
expires at ``created + expireAfter`` (its own ``spec.expireAfter``, else its NodePool's;
:func:`karpy.core.lifecycle.expired`). Expiration is forceful: no disruption budgets, no
do-not-disrupt, no replacement first. The controller deletes the NodeClaim through the API
(its finalizer hands it to termination), marks it for deletion in the cluster state at once
(so provisioning finds room for its pods and disruption leaves it alone; unmarked once the
claim is gone), records a ``Disrupted`` event ("Expired") on the
NodeClaim and its Node and ``nodeclaims_disrupted{reason="expired"}``, and requeues at the
next claim's expiry.
"""

from __future__ import annotations

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core import lifecycle
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClaim, NodePool
from karpy.state.events import ObjectEvent

__all__ = ["RETRY_SECONDS", "Expiration", "expires_at"]

RETRY_SECONDS = 1.0


expires_at = lifecycle.expires_at


class Expiration:
    name = "nodeclaim.expiration"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._deleted: set[str] = set()  # deleted here; the watch echo may lag (real API server)

    def on_event(self, event: ObjectEvent) -> bool:
        """NodeClaim (and NodePool) changes may move the next expiry."""
        return isinstance(event.obj, NodeClaim | NodePool)

    def reconcile(self) -> Result:
        ctx = self.ctx
        now = ctx.now()
        cluster = ctx.cluster
        next_expiry: float | None = None
        gone = {name for name in self._deleted if name not in cluster.claims}
        if gone:
            cluster.unmark_for_deletion(*gone)  # the claim is gone: the mark has done its job
            self._deleted -= gone
        for name in cluster.claim_names():
            claim = cluster.claims[name]
            if claim.deleting or name in self._deleted:
                continue
            pool = cluster.node_pools.get(claim.node_pool)
            when = expires_at(claim, pool)
            if lifecycle.expired(claim, pool, now):
                if self._expire(claim, pool):
                    continue
                when = now + RETRY_SECONDS
            if when is not None:
                next_expiry = when if next_expiry is None else min(next_expiry, when)
        if next_expiry is None:
            return Result()
        return Result(requeue_after=max(0.0, next_expiry - now))

    def _expire(self, claim: NodeClaim, pool: NodePool | None) -> bool:
        """Delete the expired claim; False when the delete should be retried."""
        ctx = self.ctx
        try:
            ctx.kube.delete("NodeClaim", claim.name)
        except errors.NotFound:
            return True
        except errors.KubeError as exc:
            ctx.log.warning("deleting expired nodeclaim %s failed: %s", claim.name, exc)
            return False
        self._deleted.add(claim.name)
        ctx.cluster.mark_for_deletion(claim.name)
        after = (
            claim.expire_after if claim.expire_after is not None else (pool.expire_after if pool else None)
        )
        ctx.log.info("deleting expired nodeclaim %s (expireAfter %s)", claim.name, encode.duration(after))
        ctx.metrics.nodeclaims_disrupted.labels(
            reason="expired",
            nodepool=claim.node_pool,
            capacity_type=claim.labels.get(wk.CAPACITY_TYPE, ""),
        ).inc()
        message = f"Disrupting NodeClaim: Expired (expireAfter {encode.duration(after)} elapsed)"
        ctx.event("NodeClaim", claim.name, "Disrupted", message)
        if claim.node_name:
            ctx.event("Node", claim.node_name, "Disrupted", message.replace("NodeClaim", "Node", 1))
        return True
