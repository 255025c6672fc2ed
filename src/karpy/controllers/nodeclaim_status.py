"""NodeClaim disruption status: ``status.lastPodEventTime`` and the ``Consolidatable`` condition.

Upstream's ``nodeclaim/podevents`` and ``nodeclaim/disruption`` (consolidation part) in one
task, ``nodeclaim.status``; the wiring wakes it on pod, NodeClaim and NodePool events
(:meth:`NodeClaimStatus.on_event`).

- **Pod events.** For every NodeClaim the controller remembers the pods on its node (key,
  uid, terminal, terminating). A difference from what it saw last (a pod bound, removed,
  gone terminal or terminating) is a pod event: it writes ``lastPodEventTime = now`` unless
  the stored time is less than 10 s old (upstream's dedupe: the event is dropped, not
  deferred). The first time it sees a claim created after the controller started it
  compares with an empty node; older claims are taken as they are (a restart is no event).
- **Consolidatable** is True when :func:`karpy.core.lifecycle.consolidatable` holds, and
  absent otherwise (cleared as upstream does). The controller requeues at the earliest time
  a claim could become Consolidatable, at most 5 min ahead.

Writes are JSON merge patches of ``status`` (the conditions list is rebuilt from a fresh
``get``). Deleting claims and claims whose NodePool is unknown keep their condition as is.

A claim's pod signature is recomputed only when its StateNode holds a different tuple of
pods (the cluster hands back the same tuple while the node's pods are unchanged). A claim a
pass had nothing to write for is skipped while its claim and pods objects are the same ones,
its NodePool's ``consolidateAfter`` (all it reads of the NodePool: a NodePool status write
changes nothing here) is the same, and its Consolidatable condition could not have flipped
yet. Such a claim is not even looked at: a pass compares the cluster's StateNodes with the
last pass's by identity and visits only the replaced ones, the claims it wrote for (or must
retry) last time and those whose flip time came; anything else (a node or claim come, gone
or moved, a NodePool's ``consolidateAfter`` changed) makes it a sweep over every claim.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core import lifecycle
from karpy.core.snapshot import StateNode
from karpy.model import errors
from karpy.model.objects import NodeClaim, NodePool, Pod
from karpy.state.cluster import replaced
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["CONSOLIDATABLE", "POD_EVENT_DEDUPE", "REQUEUE_SECONDS", "NodeClaimStatus"]

CONSOLIDATABLE = "Consolidatable"
POD_EVENT_DEDUPE = 10.0
REQUEUE_SECONDS = 300.0
RETRY_SECONDS = 1.0

_PodSig = frozenset[tuple[str, str, bool, bool]]
_PoolReads = tuple[float | None]  # what a claim's status reads of its NodePool: consolidateAfter


def _signature(pods: tuple[Pod, ...]) -> _PodSig:
    return frozenset((p.key, p.uid, p.is_terminal(), p.deleting) for p in pods)


def _claim_name(state: StateNode) -> str | None:
    return state.claim.name if state.claim is not None else None


class NodeClaimStatus:
    name = "nodeclaim.status"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._started = ctx.now()
        self._seen: dict[str, _PodSig] = {}
        self._signatures: dict[str, tuple[tuple[Pod, ...], _PodSig]] = {}  # claim -> (pods, signature)
        # claim -> (claim, pods, NodePool reads, due) of a pass that had nothing to write for it:
        # while the same claim and pods objects and equal reads come back before ``due`` (when
        # Consolidatable could flip), the claim has nothing to write again and is skipped
        self._quiet: dict[str, tuple[NodeClaim, tuple[Pod, ...], _PoolReads | None, float]] = {}
        self._loud: set[str] = set()  # claims a pass wrote for (or must retry): looked at next pass
        # what the last pass read: the StateNodes, each NodePool's reads, and (after a sweep that
        # found each claim at one place) every claim's place; see ``_changed``
        self._states: tuple[StateNode, ...] = ()
        self._pools_seen: dict[str, _PoolReads] = {}
        self._positions: dict[str, int] | None = None

    def on_event(self, event: ObjectEvent) -> bool:
        """True for the events that may change a claim's pod events or Consolidatable."""
        obj = event.obj
        if isinstance(obj, Pod):
            return bool(obj.node_name) or event.type == DELETED
        return isinstance(obj, NodeClaim | NodePool)

    def reconcile(self) -> Result:
        ctx = self.ctx
        now = ctx.now()
        cluster = ctx.cluster
        next_flip = REQUEUE_SECONDS
        states = cluster.state_nodes(now)
        pools = {name: (pool.disruption.consolidate_after,) for name, pool in cluster.node_pools.items()}
        visit = self._changed(states, pools, now)
        sweep = visit is None
        alive: set[str] = set()
        positions: dict[str, int] = {}
        places = 0  # (places of alive claims a sweep found: more than ``alive`` if a claim is at two)
        soonest = math.inf  # (in a sweep: the earliest due of the quiet claims, every one visited)
        for i in range(len(states)) if visit is None else visit:
            state = states[i]
            claim = state.claim
            if claim is None:
                continue
            if claim.deleting:
                if not sweep:  # (a sweep forgets it with every other claim not alive, below)
                    self._forget(claim.name)
                continue
            if sweep:
                alive.add(claim.name)
                positions[claim.name] = i
                places += 1
            self._loud.discard(claim.name)
            pool = cluster.node_pools.get(claim.node_pool)
            reads = pools.get(claim.node_pool)
            quiet = self._quiet.pop(claim.name, None)
            if (
                quiet is not None
                and quiet[0] is claim
                and quiet[1] is state.pods
                and quiet[2] == reads
                and now < quiet[3]
            ):
                self._quiet[claim.name] = quiet  # nothing it reads has changed: nothing to write
                soonest = min(soonest, quiet[3])
                continue
            status: dict[str, Any] = {}
            cached = self._signatures.get(claim.name)
            if cached is not None and cached[0] is state.pods:
                current = cached[1]
            else:
                current = _signature(state.pods)
                self._signatures[claim.name] = (state.pods, current)
            seen = self._seen.get(claim.name)
            if seen is None:
                seen = frozenset() if claim.created + 1.0 > self._started else current
            self._seen[claim.name] = current
            if current != seen and (
                claim.last_pod_event is None or now - claim.last_pod_event >= POD_EVENT_DEDUPE
            ):
                status["lastPodEventTime"] = encode.time(now)
                claim = dataclasses.replace(claim, last_pod_event=float(math.floor(now)))
            conditions = None
            due = math.inf
            if pool is not None:
                conditions, flips_at = self._consolidatable(pool, claim, now)
                if flips_at is not None:
                    due = flips_at
            if status or conditions is not None:
                self._loud.add(claim.name)  # looked at again by the next pass, whatever changed
                if due < math.inf:
                    next_flip = min(next_flip, due - now)
                if not self._write(claim.name, status, conditions, now):
                    self._seen[claim.name] = seen  # retry the pod event with the next pass
                    next_flip = min(next_flip, RETRY_SECONDS)
            else:
                self._quiet[claim.name] = (claim, state.pods, reads, due)  # (not replaced: no status)
                soonest = min(soonest, due)
        if sweep:
            for store in (self._seen, self._signatures, self._quiet):
                for name in [n for n in store if n not in alive]:
                    del store[name]
            self._loud &= alive
            # a claim at two places (two Nodes with its providerID) is looked at twice per sweep:
            # only a sweep does that again
            self._positions = positions if len(alive) == places else None
        else:
            soonest = min((q[3] for q in self._quiet.values()), default=math.inf)
        self._states = states
        next_flip = min(next_flip, soonest - now)
        return Result(requeue_after=max(0.0, next_flip))

    def _changed(
        self, states: tuple[StateNode, ...], pools: dict[str, _PoolReads], now: float
    ) -> list[int] | None:
        """The places in ``states`` a pass must look at, in order, or None for all of them.

        A pass skips a claim with a quiet entry while its claim and pods objects and NodePool
        reads are the ones the entry holds and its due time is ahead: with the same NodePool
        reads and the StateNodes at the same places, only the replaced StateNodes, the claims
        written (or to retry) last pass and the claims whose due time came can have anything to
        do. Any other change (a NodePool's reads, a node or claim come, gone or moved) makes the
        pass a sweep.
        """
        previous, positions = self._states, self._positions
        if positions is None or pools != self._pools_seen or len(states) != len(previous):
            self._pools_seen = pools
            return None
        places = set(replaced(states, previous))
        for i in places:
            new, old = states[i], previous[i]
            if new.name != old.name or _claim_name(new) != _claim_name(old):
                return None
        for name in self._loud:
            places.add(positions[name])
        for name, quiet in self._quiet.items():
            if quiet[3] <= now:
                places.add(positions[name])
        return sorted(places)

    def _forget(self, name: str) -> None:
        for store in (self._seen, self._signatures, self._quiet):
            store.pop(name, None)
        self._loud.discard(name)

    def _consolidatable(
        self, pool: NodePool, claim: NodeClaim, now: float
    ) -> tuple[bool | None, float | None]:
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

    def _write(self, name: str, status: dict[str, Any], consolidatable: bool | None, now: float) -> bool:
        """Patch the claim's status; False when it should be retried."""
        kube = self.ctx.kube
        try:
            if consolidatable is not None:
                fresh = kube.get("NodeClaim", name)
                conditions = [
                    c
                    for c in (fresh.get("status") or {}).get("conditions") or []
                    if c.get("type") != CONSOLIDATABLE
                ]
                if consolidatable:
                    conditions.append(
                        {
                            "type": CONSOLIDATABLE,
                            "status": "True",
                            "reason": CONSOLIDATABLE,
                            "lastTransitionTime": encode.time(now),
                        }
                    )
                status["conditions"] = conditions
            kube.patch("NodeClaim", name, {"status": status})
        except errors.NotFound:
            return True  # gone: forgotten on the next pass
        except errors.KubeError as exc:
            self.ctx.log.warning("updating the status of nodeclaim %s failed: %s", name, exc)
            return False
        return True
