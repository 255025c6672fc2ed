"""NodeClaim disruption status: ``status.lastPodEventTime`` and the ``Consolidatable`` condition.

Upstream's ``nodeclaim/podevents`` and ``nodeclaim/disruption`` (consolidation part) in one
task, ``nodeclaim.status``; the wiring wakes it on pod, NodeClaim and NodePool events
(:meth:`NodeClaimStatus.on_event`). Each claim a pass looks at goes through two
sub-reconcilers, and gets at most one write:

- **Pod events** (:mod:`karpy.controllers.nodeclaim_podevents`): a change of the pods on
  the claim's node writes ``lastPodEventTime = now`` unless the stored time is less than
  10 s old. The first time it sees a claim created after the controller started it compares
  with an empty node; older claims are taken as they are (a restart is no event).
- **Consolidatable** (:mod:`karpy.controllers.nodeclaim_consolidatable`) is True when
  :func:`karpy.core.lifecycle.consolidatable` holds, and absent otherwise (cleared as
  upstream does). The controller requeues at the earliest time a claim could become
  Consolidatable, at most 5 min ahead.

Writes are JSON merge patches of ``status`` (the conditions list is rebuilt from a fresh
``get``). Deleting claims and claims whose NodePool is unknown keep their condition as is.

A claim a pass had nothing to write for is skipped while its claim and pods objects are the
same ones, its NodePool's ``consolidateAfter`` (all it reads of the NodePool: a NodePool
status write changes nothing here) is the same, and its Consolidatable condition could not
have flipped yet. Such a claim is not even looked at: a pass compares the cluster's
StateNodes with the last pass's by identity and visits only the replaced ones, the claims it
wrote for (or must retry) last time and those whose flip time came; anything else (a node or
claim come, gone or moved, a NodePool's ``consolidateAfter`` changed) makes it a sweep over
every claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from karpy.controllers import nodeclaim_consolidatable
from karpy.controllers.context import Context
from karpy.controllers.nodeclaim_consolidatable import CONSOLIDATABLE
from karpy.controllers.nodeclaim_podevents import POD_EVENT_DEDUPE, PodEvents
from karpy.controllers.result import Result
from karpy.core.snapshot import StateNode
from karpy.model import errors
from karpy.model.objects import NodeClaim, NodePool, Pod
from karpy.state.cluster import replaced
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["CONSOLIDATABLE", "POD_EVENT_DEDUPE", "REQUEUE_SECONDS", "NodeClaimStatus"]

REQUEUE_SECONDS = 300.0
RETRY_SECONDS = 1.0

_PoolReads = tuple[float | None]  # what a claim's status reads of its NodePool: consolidateAfter


def _claim_name(state: StateNode) -> str | None:
    return state.claim.name if state.claim is not None else None


@dataclass(slots=True)
class _Pass:
    """What one pass has gathered so far."""

    now: float
    sweep: bool  # every claim is looked at (else only the places ``_changed`` gave)
    pools: dict[str, _PoolReads]
    next_flip: float = REQUEUE_SECONDS  # (seconds from now)
    alive: set[str] = field(default_factory=set)  # (sweep only, as the next two)
    positions: dict[str, int] = field(default_factory=dict)
    places: int = 0  # places of alive claims found: more than ``alive`` if a claim is at two
    soonest: float = math.inf  # in a sweep: the earliest due of the quiet claims, every one visited


class NodeClaimStatus:
    name = "nodeclaim.status"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._pod_events = PodEvents(ctx.now())
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
        now = self.ctx.now()
        cluster = self.ctx.cluster
        states = cluster.state_nodes(now)
        pools = {name: (pool.disruption.consolidate_after,) for name, pool in cluster.node_pools.items()}
        visit = self._changed(states, pools, now)
        run = _Pass(now=now, sweep=visit is None, pools=pools)
        for i in range(len(states)) if visit is None else visit:
            self._visit(run, i, states[i])
        if run.sweep:
            self._end_sweep(run)
        else:
            run.soonest = min((q[3] for q in self._quiet.values()), default=math.inf)
        self._states = states
        next_flip = min(run.next_flip, run.soonest - now)
        return Result(requeue_after=max(0.0, next_flip))

    def _visit(self, run: _Pass, i: int, state: StateNode) -> None:
        """Look at the claim of ``state`` (at place ``i``): skip it if quiet, else reconcile it."""
        claim = state.claim
        if claim is None:
            return
        if claim.deleting:
            if not run.sweep:  # (a sweep forgets it with every other claim not alive)
                self._forget(claim.name)
            return
        if run.sweep:
            run.alive.add(claim.name)
            run.positions[claim.name] = i
            run.places += 1
        self._loud.discard(claim.name)
        reads = run.pools.get(claim.node_pool)
        if not self._still_quiet(run, claim, state, reads):
            self._reconcile_claim(run, claim, state, reads)

    def _still_quiet(self, run: _Pass, claim: NodeClaim, state: StateNode, reads: _PoolReads | None) -> bool:
        """True when nothing ``claim`` reads has changed since a pass had nothing to write for it."""
        quiet = self._quiet.pop(claim.name, None)
        if quiet is None or quiet[0] is not claim or quiet[1] is not state.pods:
            return False
        if quiet[2] != reads or not run.now < quiet[3]:
            return False
        self._quiet[claim.name] = quiet  # nothing it reads has changed: nothing to write
        run.soonest = min(run.soonest, quiet[3])
        return True

    def _reconcile_claim(
        self, run: _Pass, claim: NodeClaim, state: StateNode, reads: _PoolReads | None
    ) -> None:
        """Run the sub-reconcilers on one claim and write what they ask for, in one patch."""
        now = run.now
        pool = self.ctx.cluster.node_pools.get(claim.node_pool)
        status, claim, seen = self._pod_events.observe(claim, state.pods, now)
        conditions = None
        due = math.inf
        if pool is not None:
            conditions, flips_at = nodeclaim_consolidatable.change(pool, claim, now)
            if flips_at is not None:
                due = flips_at
        if status or conditions is not None:
            self._loud.add(claim.name)  # looked at again by the next pass, whatever changed
            if due < math.inf:
                run.next_flip = min(run.next_flip, due - now)
            if not self._write(claim.name, status, conditions, now):
                self._pod_events.retry(claim.name, seen)  # retry the pod event with the next pass
                run.next_flip = min(run.next_flip, RETRY_SECONDS)
        else:
            self._quiet[claim.name] = (claim, state.pods, reads, due)  # (not replaced: no status)
            run.soonest = min(run.soonest, due)

    def _end_sweep(self, run: _Pass) -> None:
        """Forget every claim a sweep did not find, and remember where it found the others."""
        self._pod_events.keep(run.alive)
        for name in [n for n in self._quiet if n not in run.alive]:
            del self._quiet[name]
        self._loud &= run.alive
        # a claim at two places (two Nodes with its providerID) is looked at twice per sweep:
        # only a sweep does that again
        self._positions = run.positions if len(run.alive) == run.places else None

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
        self._pod_events.forget(name)
        self._quiet.pop(name, None)
        self._loud.discard(name)

    def _write(self, name: str, status: dict[str, Any], consolidatable: bool | None, now: float) -> bool:
        """Patch the claim's status; False when it should be retried."""
        kube = self.ctx.kube
        try:
            if consolidatable is not None:
                status["conditions"] = nodeclaim_consolidatable.conditions(
                    kube.get("NodeClaim", name), consolidatable, now
                )
            kube.patch("NodeClaim", name, {"status": status})
        except errors.NotFound:
            return True  # gone: forgotten on the next pass
        except errors.KubeError as exc:
            self.ctx.log.warning("updating the status of nodeclaim %s failed: %s", name, exc)
            return False
        return True
