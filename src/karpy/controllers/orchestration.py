"""The disruption orchestration queue: carry out a disruption :class:`~karpy.core.disruption.Command`.

Upstream's ``disruption/queue.go``. :class:`Orchestrator` is handed commands by the
disruption controller (:mod:`karpy.controllers.disruption`) and is itself a loop task
(``disruption.queue``):

- ``start(command)`` taints every candidate Node ``karpenter.sh/disrupted:NoSchedule`` and
  sets ``DisruptionReason`` on its NodeClaim (a replace aborts and un-taints on any failure;
  a delete goes on with the candidates that could be tainted), creates the replacement
  NodeClaims (:func:`karpy.controllers.claims.new_claim_object`; a failure un-taints: nothing
  is disrupted), and only then marks the candidates for deletion in the cluster state (so the
  provisioner does not launch for their pods twice) and nominates the replacements.
- ``reconcile()`` waits until every replacement is Initialized, then deletes the candidate
  NodeClaims (the termination controller drains them). A command whose replacement vanished
  (deleted after an insufficient-capacity error or by liveness) or that waited longer than
  ``clamp(80 ms x queued commands, 10 min, 1 h)`` fails: un-taint, clear the condition,
  unmark.

A command without replacements is carried out inside ``start`` (nothing to wait for).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from karpy.api import encode
from karpy.controllers import claims as claims_mod
from karpy.controllers.context import Context
from karpy.controllers.result import Result
from karpy.core.disruption import Command
from karpy.model import errors, labels
from karpy.model.taints import DISRUPTED

__all__ = ["DISRUPTION_REASON", "Orchestrator", "Queued", "queue_timeout"]

DISRUPTION_REASON = "DisruptionReason"
POLL_SECONDS = 1.0  # while commands wait for their replacements
IDLE_SECONDS = 10.0  # when the queue is empty (``wake`` starts it sooner)


def queue_timeout(queued: int) -> float:
    """Upstream's ``clamp(80 ms x len(queue), 10 min, 1 h)``."""
    return min(max(0.08 * queued, 600.0), 3600.0)


@dataclass
class Queued:
    """A started command: its candidates (node -> NodeClaim) and the replacements it waits for."""

    command: Command
    reason: str  # lower-cased, e.g. "drifted"
    claims: dict[str, str]  # candidate node name -> its NodeClaim name
    replacements: tuple[str, ...]
    started: float
    waiting_reported: bool = False

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self.claims))


@dataclass
class _Candidate:
    node: str
    claim: str
    node_pool: str
    capacity_type: str


class Orchestrator:
    """Executes disruption commands; ``in_queue(node)`` tells the disruption controller what it owns."""

    name = "disruption.queue"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queue: list[Queued] = []
        self.wake: Callable[[], None] | None = None  # set by wiring: run this task soon
        self._terminated: dict[str, str] = {}  # node -> claim, deleted but not yet gone
        self._info: dict[str, _Candidate] = {}

    # -- queries -----------------------------------------------------------------------------
    def in_queue(self, node: str) -> bool:
        """The node is a candidate of a queued command, or deleted by one and not gone yet."""
        return node in self._terminated or any(node in q.claims for q in self.queue)

    # -- start -------------------------------------------------------------------------------
    def start(self, command: Command) -> bool:
        """Taint, launch replacements, mark for deletion, enqueue. False when nothing was started."""
        ctx = self.ctx
        reason = command.reason.lower()
        candidates = self._resolve(command)
        if not candidates or (command.replacements and len(candidates) != len(command.candidates)):
            ctx.log.info("disruption command %s: candidates vanished, not started", command.candidates)
            return False
        tainted: list[_Candidate] = []
        for cand in candidates:
            try:
                self._taint(cand.node)
                tainted.append(cand)
                self._set_reason(cand.claim, command)
            except errors.KarpyError as exc:
                ctx.log.warning("disruption: tainting %s failed: %s", cand.node, exc)
                if command.replacements:
                    self._rollback(tainted)
                    return False
        if not tainted:
            return False
        created: list[str] = []
        try:
            for planned in command.replacements:
                pool = ctx.cluster.node_pools.get(planned.node_pool)
                if pool is None:
                    raise errors.NotFound(f"NodePool {planned.node_pool} not found")
                raw = claims_mod.new_claim_object(planned, pool, reason=reason)
                created.append(ctx.kube.create(raw)["metadata"]["name"])
        except errors.KarpyError as exc:
            ctx.log.warning("disruption: creating replacements failed: %s", exc)
            for name in created:
                self._delete_claim(name)
            self._rollback(tainted)
            for cand in tainted:
                ctx.event(
                    "Node",
                    cand.node,
                    "DisruptionBlocked",
                    f"Creating replacement failed: {exc}",
                    warning=True,
                )
            return False
        now = ctx.now()
        ctx.cluster.mark_for_deletion(*(c.node for c in tainted))
        for name in created:
            ctx.cluster.nominate(name, now + 2 * ctx.settings.batch.max_seconds)
        for cand in tainted:
            self._info[cand.node] = cand
        queued = Queued(command, reason, {c.node: c.claim for c in tainted}, tuple(created), now)
        self.queue.append(queued)
        if created:
            names = ", ".join(created)
            for cand in tainted:
                ctx.event(
                    "Node", cand.node, "DisruptionLaunching", f"Launching NodeClaim {names}: {command.reason}"
                )
        self._process(queued)
        if self.queue and self.wake is not None:
            self.wake()
        return True

    def _resolve(self, command: Command) -> list[_Candidate]:
        cluster = self.ctx.cluster
        out = []
        for name in command.candidates:
            node = cluster.nodes.get(name)
            claim = cluster.claim_for_node(node) if node is not None else None
            if node is None or claim is None:
                continue
            out.append(
                _Candidate(
                    name,
                    claim.name,
                    claim.node_pool or node.labels.get(labels.NODEPOOL, ""),
                    node.labels.get(labels.CAPACITY_TYPE, claim.labels.get(labels.CAPACITY_TYPE, "")),
                )
            )
        return out

    # -- reconcile ---------------------------------------------------------------------------
    def reconcile(self) -> Result:
        for queued in list(self.queue):
            self._process(queued)
        self._forget_gone()
        return Result(requeue_after=POLL_SECONDS if self.queue else IDLE_SECONDS)

    def _process(self, queued: Queued) -> None:
        ctx = self.ctx
        vanished = [name for name in queued.replacements if self._vanished(name)]
        if vanished:
            self._fail(
                queued, why="replacement_vanished", message=f"replacement NodeClaim {vanished[0]} was deleted"
            )
            return
        if ctx.now() - queued.started > queue_timeout(len(self.queue)):
            self._fail(queued, why="timeout", message="replacements did not initialize in time")
            return
        waiting = [name for name in queued.replacements if not self._initialized(name)]
        if waiting:
            if not queued.waiting_reported:
                queued.waiting_reported = True
                for node in queued.nodes:
                    ctx.event(
                        "Node",
                        node,
                        "DisruptionWaitingReadiness",
                        "Waiting on readiness to continue disruption",
                    )
            return
        self._terminate(queued)

    def _vanished(self, name: str) -> bool:
        claim = self.ctx.cluster.claims.get(name)
        if claim is not None:
            return claim.deleting
        try:  # the real API server's watch echo may lag behind our own create
            obj = self.ctx.kube.get("NodeClaim", name)
        except errors.NotFound:
            return True
        except errors.KarpyError:
            return False
        return bool(obj.get("metadata", {}).get("deletionTimestamp"))

    def _initialized(self, name: str) -> bool:
        claim = self.ctx.cluster.claims.get(name)
        return claim is not None and claim.is_true("Initialized")

    def _terminate(self, queued: Queued) -> None:
        ctx = self.ctx
        self.queue.remove(queued)
        for node in queued.nodes:
            claim = queued.claims[node]
            self._delete_claim(claim)
            self._terminated[node] = claim
            info = self._info.pop(node, None)
            ctx.event("Node", node, "DisruptionTerminating", f"Disrupting Node: {queued.command.reason}")
            ctx.event(
                "NodeClaim", claim, "DisruptionTerminating", f"Disrupting NodeClaim: {queued.command.reason}"
            )
            ctx.metrics.nodeclaims_disrupted.labels(
                reason=queued.reason,
                nodepool=info.node_pool if info else "",
                capacity_type=info.capacity_type if info else "",
            ).inc()

    def _fail(self, queued: Queued, *, why: str, message: str) -> None:
        ctx = self.ctx
        self.queue.remove(queued)
        ctx.log.warning("disruption command for %s failed: %s", ", ".join(queued.nodes), message)
        cands = [self._info.pop(node, _Candidate(node, queued.claims[node], "", "")) for node in queued.nodes]
        self._rollback(cands)
        ctx.cluster.unmark_for_deletion(*queued.nodes)
        for node in queued.nodes:
            ctx.event("Node", node, "DisruptionBlocked", f"Disruption failed: {message}", warning=True)
        ctx.metrics.disruption_queue_failures.labels(reason=why).inc()

    def _forget_gone(self) -> None:
        cluster = self.ctx.cluster
        for node, claim in sorted(self._terminated.items()):
            if node not in cluster.nodes and claim not in cluster.claims:
                del self._terminated[node]
                cluster.unmark_for_deletion(node)

    # -- writes ------------------------------------------------------------------------------
    def _rollback(self, candidates: list[_Candidate]) -> None:
        for cand in candidates:
            untaint(self.ctx, cand.node)
            clear_reason(self.ctx, cand.claim)

    def _taint(self, node: str) -> None:
        raw = self.ctx.kube.get("Node", node)
        taints: list[dict[str, Any]] = list((raw.get("spec") or {}).get("taints") or [])
        if any(t.get("key") == DISRUPTED.key for t in taints):
            return
        self.ctx.kube.patch("Node", node, {"spec": {"taints": [*taints, encode.taint(DISRUPTED)]}})

    def _set_reason(self, claim: str, command: Command) -> None:
        raw = self.ctx.kube.get("NodeClaim", claim)
        conditions = [
            c for c in (raw.get("status") or {}).get("conditions") or [] if c.get("type") != DISRUPTION_REASON
        ]
        conditions.append(
            {
                "type": DISRUPTION_REASON,
                "status": "True",
                "reason": command.reason,
                "message": command.detail or command.method,
                "lastTransitionTime": encode.time(self.ctx.now()),
            }
        )
        self.ctx.kube.patch("NodeClaim", claim, {"status": {"conditions": conditions}})

    def _delete_claim(self, name: str) -> None:
        try:
            self.ctx.kube.delete("NodeClaim", name)
        except errors.NotFound:
            pass
        except errors.KarpyError as exc:
            self.ctx.log.warning("disruption: deleting NodeClaim %s failed: %s", name, exc)


def untaint(ctx: Context, node: str) -> None:
    """Remove ``karpenter.sh/disrupted`` from a Node (best effort; a gone Node is fine)."""
    try:
        raw = ctx.kube.get("Node", node)
        taints = list((raw.get("spec") or {}).get("taints") or [])
        kept = [t for t in taints if t.get("key") != DISRUPTED.key]
        if len(kept) != len(taints):
            ctx.kube.patch("Node", node, {"spec": {"taints": kept}})
    except errors.NotFound:
        pass
    except errors.KarpyError as exc:
        ctx.log.warning("disruption: un-tainting %s failed: %s", node, exc)


def clear_reason(ctx: Context, claim: str) -> None:
    """Remove the ``DisruptionReason`` condition from a NodeClaim (best effort)."""
    try:
        raw = ctx.kube.get("NodeClaim", claim)
        conditions = list((raw.get("status") or {}).get("conditions") or [])
        kept = [c for c in conditions if c.get("type") != DISRUPTION_REASON]
        if len(kept) != len(conditions):
            ctx.kube.patch("NodeClaim", claim, {"status": {"conditions": kept}})
    except errors.NotFound:
        pass
    except errors.KarpyError as exc:
        ctx.log.warning("disruption: clearing %s on %s failed: %s", DISRUPTION_REASON, claim, exc)
