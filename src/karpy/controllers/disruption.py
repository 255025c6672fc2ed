"""The disruption controller: one :func:`karpy.core.disruption.compute` pass every 10 s.

Upstream's ``disruption/controller.go``. :class:`Disruption` is a loop task (``disruption``)
that hands at most one command per pass to the :class:`~karpy.controllers.orchestration.Orchestrator`:

- A pass first strips a stale ``karpenter.sh/disrupted`` taint and ``DisruptionReason``
  condition from managed nodes that are neither queued nor being deleted (crash recovery).
  The names of the nodes carrying either mark are kept from pass to pass and judged again
  only for the StateNodes replaced since (all of them when nodes or claims come, go or move).
- Facts of a pass that do not depend on the time (per Pod, node, NodePool) are kept in a
  :class:`~karpy.core.disruption.Memo` from pass to pass.
- Each consolidation method (emptiness, multi-node, single-node) is skipped while the
  cluster's consolidation state (:class:`~karpy.controllers.consolidation_state.ConsolidationState`:
  upstream's rules of what changes it, and its 5-minute staleness) is the one in which the
  method last found nothing to do without a budget holding a candidate back (upstream's
  ``IsConsolidated``/``markConsolidated``, kept per method as upstream does; a method with no
  candidate is not run by upstream, and so never counts as having found nothing).
  ``mark_dirty()`` (called by the wiring for the feed events :meth:`Disruption.on_event`
  counts) changes the state. Drift runs every pass, as upstream's.
- ``Expired`` commands belong to the expiration controller: when the core reports expired
  claims, the pass is recomputed on a snapshot in which they are already being deleted (what
  the state will show once the expiration controller has acted).
- ``Empty`` and ``Underutilized`` commands wait the 15 s validation delay (kept as state with a
  deadline). An emptiness command then goes on with its candidates that a recomputed pass's
  emptiness command still deletes. A consolidation command is validated as upstream does
  (:func:`karpy.core.disruption.validate`): only its own candidates are re-checked (still
  consolidation candidates, within budget) and re-simulated (a delete still needs no new
  NodeClaim; a replace exactly one whose instance types include the pending replacement's),
  whatever another pass would now prefer. Otherwise it is dropped with
  ``ConsolidationRejected`` and ``disruption_failed_validations{reason}``. ``Drifted``
  commands start at once.

Events of a computed pass (upstream's reasons), on the Node and on its NodeClaim:

- ``DisruptionBlocked`` for a managed node that is not a candidate (the decision's last reason:
  do-not-disrupt, a PDB, ...), posted again only when its message changes; and on the NodePool
  for each disruption reason whose budget allows none.
- ``Unconsolidatable`` for a consolidation candidate that cannot be consolidated: the reason
  single-node consolidation gave (its note ``not consolidated: <why>``), or consolidation being
  off for its NodePool (``consolidateAfter is Never``, a ``consolidationPolicy`` other than
  ``WhenEmptyOrUnderutilized``/``Balanced``); the message is that text without its
  ``not consolidated: ``/``not consolidatable: `` prefix. The same object, reason and message
  are not posted again within :data:`UNCONSOLIDATABLE_DEDUPE` (15 min).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from karpy.controllers import orchestration
from karpy.controllers.consolidation_state import ConsolidationState
from karpy.controllers.context import Context
from karpy.controllers.dedupe import Dedupe
from karpy.controllers.result import Result
from karpy.core import disruption as core
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.objects import Node, NodeClaim
from karpy.model.taints import DISRUPTED
from karpy.state.cluster import replaced
from karpy.state.events import ObjectEvent

__all__ = ["PASS_SECONDS", "UNCONSOLIDATABLE_DEDUPE", "VALIDATION_SECONDS", "Disruption", "Pending"]

PASS_SECONDS = 10.0
VALIDATION_SECONDS = 15.0
UNCONSOLIDATABLE_DEDUPE = 900.0
# the notes of a consolidation candidate that make it Unconsolidatable, and the prefix to drop
_UNCONSOLIDATABLE = (
    ("not consolidated: ", "not consolidated: "),
    ("not consolidatable: consolidateAfter is Never", "not consolidatable: "),
    ("not consolidatable: consolidationPolicy ", "not consolidatable: "),
)
_VALIDATED = (core.EMPTY, core.UNDERUTILIZED)
_UNINTERESTING = ("already being deleted", "not initialized")
_CONSOLIDATION_TYPES = {core.EMPTINESS: "empty", core.MULTI_NODE: "multi", core.SINGLE_NODE: "single"}


@dataclass(frozen=True, slots=True)
class Pending:
    """A consolidation command waiting for its validation deadline."""

    command: core.Command
    deadline: float


class Disruption:
    name = "disruption"

    def __init__(self, ctx: Context, queue: orchestration.Orchestrator) -> None:
        self.ctx = ctx
        self.queue = queue
        self.pending: Pending | None = None
        self.state = ConsolidationState(ctx.cluster)
        # consolidation method -> the consolidation state (its time) in which it last found nothing
        self.settled: dict[str, float] = {}
        self.passes = 0  # computed passes (not skipped ones); for tests and logs
        self.skipped: frozenset[str] = frozenset()  # the methods the last computed pass left out
        self._blocked: dict[tuple[str, str, str], str] = {}  # (kind, name, topic) -> last message
        self._unconsolidatable = Dedupe(UNCONSOLIDATABLE_DEDUPE, {})  # (kind, name, message)
        self.memo = core.Memo()  # now-independent facts carried from pass to pass
        # the StateNodes of the last pass and the names of those with a disruption mark (see _flagged)
        self._states: tuple[StateNode, ...] = ()
        self._stale: set[str] = set()

    def mark_dirty(self) -> None:
        """The cluster's consolidation state changed now: every consolidation method runs again."""
        self.state.mark(self.ctx.now())

    def on_event(self, event: ObjectEvent) -> bool:
        """True for the changes of the consolidation state (the wiring then calls
        :meth:`mark_dirty`): upstream's rules, in :mod:`~karpy.controllers.consolidation_state`."""
        return self.state.changes(event)

    # -- the pass ----------------------------------------------------------------------------
    def reconcile(self) -> Result:
        ctx = self.ctx
        now = ctx.now()
        if not ctx.cluster.synced():
            return Result(requeue_after=PASS_SECONDS)
        self._strip_stale()
        if self.pending is not None:
            if now < self.pending.deadline:
                return Result(requeue_after=self.pending.deadline - now)
            pending, self.pending = self.pending, None
            return Result(requeue_after=0.0 if self._validate(pending) else PASS_SECONDS)
        state = self.state.at(now)
        skip = frozenset(m for m in core.CONSOLIDATION_METHODS if self.settled.get(m) == state)
        self.skipped = skip
        snapshot = ctx.cluster.snapshot(now)
        decision = self._compute(snapshot, skip)
        claims = {n.name: n.claim.name for n in snapshot.nodes if n.claim is not None}
        self._report_blocked(decision, claims)
        self._report_unconsolidatable(decision, claims, now)
        for method in core.CONSOLIDATION_METHODS:
            if method in decision.settled:
                self.settled[method] = state
            elif method not in skip:
                self.settled.pop(method, None)
        command = decision.command
        if command is None:
            return Result(requeue_after=PASS_SECONDS)
        if command.reason in _VALIDATED:
            self.pending = Pending(command, now + VALIDATION_SECONDS)
            ctx.log.info("disruption: %s of %s pending validation", command.method, command.candidates)
            return Result(requeue_after=VALIDATION_SECONDS)
        return Result(requeue_after=0.0 if self._execute(command) else PASS_SECONDS)

    def _compute(self, snapshot: Snapshot, skip: frozenset[str] = frozenset()) -> core.Decision:
        """``core.disruption.compute`` (without the ``skip`` methods) without Expired commands (the
        expiration controller's)."""
        self.passes += 1
        decision = core.compute(snapshot, snapshot.now, memo=self.memo, skip=skip)
        command = decision.command
        if command is not None and command.reason == core.EXPIRED:
            expired = _expired_deleting(snapshot, command.candidates)
            decision = core.compute(expired, snapshot.now, memo=self.memo, skip=skip)
        return decision

    # -- validation and execution ----------------------------------------------------------
    def _validate(self, pending: Pending) -> bool:
        """Re-check at the deadline; start what is still valid. True when a command started."""
        ctx = self.ctx
        command = pending.command
        if command.reason == core.UNDERUTILIZED:
            why = core.validate(ctx.cluster.snapshot(ctx.now()), command, memo=self.memo)
            if why is None:
                return self._execute(command)
            self._reject(command, why, f"{command.method} rejected at validation ({why}): no longer valid")
            return False
        # emptiness: the candidates that the fresh pass's emptiness command still deletes
        decision = self._compute(ctx.cluster.snapshot(ctx.now()))
        fresh = decision.command
        valid: core.Command | None = None
        if fresh is not None and fresh.reason == command.reason:
            still = tuple(name for name in command.candidates if name in fresh.candidates)
            valid = dataclasses.replace(command, candidates=still) if still else None
        if valid is None:
            why = _rejection_reason(command, decision)
            message = f"{command.method} rejected at validation ({why}): " + (
                "no longer valid" if fresh is None else f"now {fresh.method} of {', '.join(fresh.candidates)}"
            )
            self._reject(command, why, message)
            return False
        return self._execute(valid)

    def _reject(self, command: core.Command, why: str, message: str) -> None:
        for name in command.candidates:
            self.ctx.event("Node", name, "ConsolidationRejected", message)
        self.ctx.metrics.disruption_failed_validations.labels(reason=why).inc()

    def _execute(self, command: core.Command) -> bool:
        started = self.queue.start(command)
        if started:
            self.ctx.metrics.disruption_decisions.labels(
                decision=command.decision,
                reason=command.reason.lower(),
                consolidation_type=_CONSOLIDATION_TYPES.get(command.method, ""),
            ).inc()
        return started

    # -- crash recovery and events -----------------------------------------------------------
    def _strip_stale(self) -> None:
        cluster = self.ctx.cluster
        for name in self._flagged(cluster.state_nodes(self.ctx.now())):
            node = cluster.nodes.get(name)
            claim = cluster.claim_for_node(node, last=True) if node is not None else None
            if node is None or claim is None:
                continue
            tainted, reason = _marks(node, claim)
            if not (tainted or reason):
                continue
            if node.deleting or claim.deleting or self.queue.in_queue(name):
                continue
            if name in cluster.marked_for_deletion or claim.name in cluster.marked_for_deletion:
                continue
            if tainted:
                self.ctx.log.info("disruption: removing a stale %s taint from %s", DISRUPTED.key, name)
                orchestration.untaint(self.ctx, name)
            if reason:
                orchestration.clear_reason(self.ctx, claim.name)

    def _flagged(self, states: tuple[StateNode, ...]) -> list[str]:
        """The names of the Nodes with the disrupted taint or whose NodeClaim has a DisruptionReason,
        sorted: kept from pass to pass, judged again only for the StateNodes replaced since (any
        other change to the tuple: all of them)."""
        previous, self._states = self._states, states
        flagged = self._stale
        if len(states) != len(previous):
            changed: Iterable[int] = range(len(states))
            flagged.clear()
        else:
            changed = replaced(states, previous)
            for i in changed:
                new, old = states[i], previous[i]
                if new.name != old.name or (new.node is None) != (old.node is None):
                    changed = range(len(states))
                    flagged.clear()
                    break
        for i in changed:
            state = states[i]
            if state.node is not None:
                if _marked(state.node, state.claim):
                    flagged.add(state.name)
                else:
                    flagged.discard(state.name)
        return sorted(flagged)

    def _report_blocked(self, decision: core.Decision, claims: dict[str, str]) -> None:
        """``DisruptionBlocked`` (once per message) for managed non-candidates (on the Node and its
        NodeClaim) and budget-bound pools. ``claims``: node name -> its NodeClaim's name."""
        seen: dict[tuple[str, str, str], str] = {}
        for name in sorted(decision.records):
            record = decision.records[name]
            if record.verdict != "blocked" or not record.reasons:
                continue
            why = record.reasons[-1]
            if why not in _UNINTERESTING:
                seen[("Node", name, "")] = why
                if name in claims:
                    seen[("NodeClaim", claims[name], "")] = why
        for pool in sorted(decision.budgets):
            for reason, allowed in sorted(decision.budgets[pool].items()):
                if allowed <= 0:
                    seen[("NodePool", pool, reason)] = (
                        f"No allowed disruptions for disruption reason {reason} due to blocking budget"
                    )
        for (kind, name, topic), message in sorted(seen.items()):
            if self._blocked.get((kind, name, topic)) != message:
                self.ctx.event(kind, name, "DisruptionBlocked", message)
        self._blocked = seen

    def _report_unconsolidatable(self, decision: core.Decision, claims: dict[str, str], now: float) -> None:
        """``Unconsolidatable`` on the Node and its NodeClaim for each consolidation candidate the
        pass could not consolidate (see the module docstring), 15 min dedupe."""
        self._unconsolidatable.prune(now)
        for name in sorted(decision.records):
            record = decision.records[name]
            if record.verdict != "candidate":
                continue
            message = _unconsolidatable(record.reasons)
            if not message:
                continue
            for kind, obj in (("Node", name), ("NodeClaim", claims.get(name, ""))):
                if obj and self._unconsolidatable.allow((kind, obj, message), now):
                    self.ctx.event(kind, obj, "Unconsolidatable", message)


def _unconsolidatable(notes: tuple[str, ...]) -> str:
    """Why a candidate cannot be consolidated ("" when its notes say no such thing)."""
    for note in notes:
        for prefix, drop in _UNCONSOLIDATABLE:
            if note.startswith(prefix):
                return note[len(drop) :]
    return ""


def _marked(node: Node, joined: NodeClaim | None) -> bool:
    """Does the Node carry the disrupted taint, or its NodeClaim (the one with its providerID that a
    StateNode joins it with) a DisruptionReason condition?"""
    if joined is None or not node.provider_id or joined.provider_id != node.provider_id:
        return False  # (joined by name only: claim_for_node finds no claim for it)
    return any(_marks(node, joined))


def _marks(node: Node, claim: NodeClaim) -> tuple[bool, bool]:
    """Whether the Node carries the disrupted taint, and whether the NodeClaim has a DisruptionReason."""
    tainted = any(t.key == DISRUPTED.key for t in node.taints)
    return tainted, claim.condition(orchestration.DISRUPTION_REASON) is not None


def _expired_deleting(snapshot: Snapshot, names: tuple[str, ...]) -> Snapshot:
    """The snapshot as it will be once the expiration controller deletes these claims."""
    expired = set(names)
    nodes = tuple(
        dataclasses.replace(n, claim=dataclasses.replace(n.claim, deleting=True))
        if n.name in expired and n.claim is not None
        else n
        for n in snapshot.nodes
    )
    return dataclasses.replace(snapshot, nodes=nodes)


def _rejection_reason(command: core.Command, decision: core.Decision) -> str:
    """``budget`` | ``churn`` (a candidate is no longer one) | ``scheduling`` (the simulation differs)."""
    records = [decision.records.get(name) for name in command.candidates]
    if any(r is not None and any("budget" in note for note in r.reasons) for r in records):
        return "budget"
    if any(r is None or r.verdict in ("blocked", "not-managed") for r in records):
        return "churn"
    return "scheduling"
