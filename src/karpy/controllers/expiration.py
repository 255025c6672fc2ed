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

A pass looks again only at the claims replaced since the last pass (the cluster's claims
tuple compared entry by entry, by identity), those whose expiry came and those whose delete
must be retried; the others keep the expiry computed before. Claims coming or going, or a
NodePool's ``expireAfter`` changing, make it look at every claim.
"""

from __future__ import annotations

from collections.abc import Iterable

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core import lifecycle
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import NodeClaim, NodePool
from karpy.state.cluster import replaced
from karpy.state.events import ObjectEvent

__all__ = ["RETRY_SECONDS", "Expiration", "expires_at"]

RETRY_SECONDS = 1.0


expires_at = lifecycle.expires_at


class Expiration:
    name = "nodeclaim.expiration"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._deleted: set[str] = set()  # deleted here; the watch echo may lag (real API server)
        # what the last pass read: the claim names and claims (in name order), each NodePool's
        # expireAfter; and per claim it watches (not deleting, not deleted here) when it expires
        self._names: tuple[str, ...] | None = None
        self._claims: tuple[NodeClaim, ...] = ()
        self._pools: dict[str, float | None] = {}
        self._index: dict[str, int] = {}  # claim name -> its place in ``_names``
        self._when: dict[str, float | None] = {}
        self._retry: set[str] = set()  # expired claims whose delete failed: looked at every pass

    def on_event(self, event: ObjectEvent) -> bool:
        """NodeClaim (and NodePool) changes may move the next expiry."""
        return isinstance(event.obj, NodeClaim | NodePool)

    def reconcile(self) -> Result:
        ctx = self.ctx
        now = ctx.now()
        cluster = ctx.cluster
        gone = {name for name in self._deleted if name not in cluster.claims}
        if gone:
            cluster.unmark_for_deletion(*gone)  # the claim is gone: the mark has done its job
            self._deleted -= gone
        names, claims = cluster.claim_names(), cluster.claims_in_order()
        pools = {name: pool.expire_after for name, pool in cluster.node_pools.items()}
        visit: Iterable[int]
        if names is not self._names or pools != self._pools:
            visit = range(len(names))  # claims came or went, or an expireAfter changed: all of them
            self._when = {}
            self._index = {name: i for i, name in enumerate(names)}
        else:  # the claims replaced since, those due and those to retry: the others keep their time
            places = set(replaced(claims, self._claims))
            index = self._index
            places.update(index[n] for n, when in self._when.items() if when is not None and when <= now)
            places.update(index[n] for n in self._retry)
            visit = sorted(places)
        self._names, self._claims, self._pools = names, claims, pools
        retry: set[str] = set()
        for i in visit:
            name, claim = names[i], claims[i]
            if claim.deleting or name in self._deleted:
                self._when.pop(name, None)
                continue
            pool = cluster.node_pools.get(claim.node_pool)
            when = expires_at(claim, pool)
            if lifecycle.expired(claim, pool, now):
                if self._expire(claim, pool):
                    self._when.pop(name, None)
                    continue
                when = now + RETRY_SECONDS
                retry.add(name)
            self._when[name] = when
        self._retry = retry
        next_expiry = min((when for when in self._when.values() if when is not None), default=None)
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
