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
pass had nothing to write for is skipped while its claim, pods and NodePool objects are the
same ones and its Consolidatable condition could not have flipped yet.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from karpy.api import encode
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core import lifecycle
from karpy.model import errors
from karpy.model.objects import NodeClaim, NodePool, Pod
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["CONSOLIDATABLE", "POD_EVENT_DEDUPE", "REQUEUE_SECONDS", "NodeClaimStatus"]

CONSOLIDATABLE = "Consolidatable"
POD_EVENT_DEDUPE = 10.0
REQUEUE_SECONDS = 300.0
RETRY_SECONDS = 1.0

_PodSig = frozenset[tuple[str, str, bool, bool]]


def _signature(pods: tuple[Pod, ...]) -> _PodSig:
    return frozenset((p.key, p.uid, p.is_terminal(), p.deleting) for p in pods)


class NodeClaimStatus:
    name = "nodeclaim.status"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._started = ctx.now()
        self._seen: dict[str, _PodSig] = {}
        self._signatures: dict[str, tuple[tuple[Pod, ...], _PodSig]] = {}  # claim -> (pods, signature)
        # claim -> (claim, pods, NodePool, due) of a pass that had nothing to write for it: while
        # the same three objects come back before ``due`` (when Consolidatable could flip), the
        # claim has nothing to write again and is skipped
        self._quiet: dict[str, tuple[NodeClaim, tuple[Pod, ...], NodePool | None, float]] = {}

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
        alive: set[str] = set()
        for state in cluster.state_nodes(now):
            claim = state.claim
            if claim is None or claim.deleting:
                continue
            alive.add(claim.name)
            pool = cluster.node_pools.get(claim.node_pool)
            quiet = self._quiet.pop(claim.name, None)
            if (
                quiet is not None
                and quiet[0] is claim
                and quiet[1] is state.pods
                and quiet[2] is pool
                and now < quiet[3]
            ):
                self._quiet[claim.name] = quiet  # nothing it reads has changed: nothing to write
                next_flip = min(next_flip, quiet[3] - now)
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
                    next_flip = min(next_flip, flips_at - now)
                    due = flips_at
            if status or conditions is not None:
                if not self._write(claim.name, status, conditions, now):
                    self._seen[claim.name] = seen  # retry the pod event with the next pass
                    next_flip = min(next_flip, RETRY_SECONDS)
            else:
                self._quiet[claim.name] = (claim, state.pods, pool, due)  # (not replaced: no status)
        for name in [n for n in self._seen if n not in alive]:
            del self._seen[name]
        for name in [n for n in self._signatures if n not in alive]:
            del self._signatures[name]
        for name in [n for n in self._quiet if n not in alive]:
            del self._quiet[name]
        return Result(requeue_after=max(0.0, next_flip))

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
