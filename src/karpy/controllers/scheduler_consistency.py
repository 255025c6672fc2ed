"""Scheduler consistency: where karpy nominated each pod against where kube-scheduler bound it.

karpy's provisioning solve is a simulation of kube-scheduler; this controller measures how
often the real (or, in the simulator, the stand-in) scheduler agrees with it. It is driven by
events only (it has no loop task):

- :meth:`SchedulerConsistency.nominated` is a
  :attr:`~karpy.controllers.provisioning.Provisioner.nomination_listeners` entry: it remembers,
  per pending pod (by key), the latest target of the provisioner's nomination, a Node
  (``node/NAME``) or a NodeClaim (``nodeclaim/NAME``). A pod that is already bound in the
  cluster state (one of a leaving node's pods) is not remembered.
- :meth:`SchedulerConsistency.on_event` gets every applied feed event. When a remembered pod
  shows up bound (``spec.nodeName`` set) it is compared and forgotten:

  - the pod is on the nominated Node, or on the Node of the nominated NodeClaim (its
    ``status.nodeName``, or the Node with its providerID): **bound**;
  - elsewhere, a **divergence**, classed at the moment of binding as ``gone`` (the nominated
    Node or NodeClaim was deleted, or is being deleted), ``not-ready`` (the NodeClaim has no
    registered Node yet, or the Node is not Ready) or ``scoring`` (the nominated Node existed
    and was Ready: kube-scheduler's scoring preferred another node). A divergence posts a
    Warning ``SchedulerDivergence`` on the pod: "karpy nominated nodeclaim/A, kube-scheduler
    bound node/B (reason: not-ready)".

  A deleted pod is forgotten; Node and NodeClaim deletions are remembered (by name, until the
  name is added again) so that a later binding elsewhere counts as ``gone``.

Memory is bounded: at most ``max_tracked`` pods (default :data:`MAX_TRACKED`) and as many
deleted names; the oldest nomination is forgotten first.

Read by tests and the simulator's report (plain attributes):

- ``bound: int``: pods bound where karpy nominated them;
- ``diverged: int``: pods bound elsewhere;
- ``divergence: dict[str, int]``: ``diverged`` by reason, always with the keys ``gone``,
  ``not-ready`` and ``scoring`` (in that order);
- ``tracked`` (property): pods remembered now.

Metrics: ``karpy_scheduler_nominations_bound_total`` and
``karpy_scheduler_nomination_divergence_total{reason}``. Wired by
:func:`karpy.runtime.wiring.build` (``Controllers.scheduler_consistency``).
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.controllers.context import Context
from karpy.model.objects import Node, NodeClaim, Pod
from karpy.state.events import ADDED, DELETED, ObjectEvent

__all__ = ["GONE", "MAX_TRACKED", "NOT_READY", "REASONS", "SCORING", "SchedulerConsistency"]

GONE = "gone"
NOT_READY = "not-ready"
SCORING = "scoring"
REASONS = (GONE, NOT_READY, SCORING)
MAX_TRACKED = 10_000


@dataclass(frozen=True, slots=True)
class _Nomination:
    kind: str  # "node" | "nodeclaim"
    name: str

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"


class SchedulerConsistency:
    name = "scheduler-consistency"

    def __init__(self, ctx: Context, *, max_tracked: int = MAX_TRACKED) -> None:
        self.ctx = ctx
        self.max_tracked = max(1, max_tracked)
        self.bound = 0
        self.diverged = 0
        self.divergence: dict[str, int] = dict.fromkeys(REASONS, 0)
        self._nominations: dict[str, _Nomination] = {}  # pod key -> latest nomination (oldest first)
        self._gone: dict[tuple[str, str], None] = {}  # (kind, name) of deleted targets (oldest first)

    @property
    def tracked(self) -> int:
        """Pods whose nomination is remembered now."""
        return len(self._nominations)

    def nominated(self, pod: Pod, kind: str, name: str) -> None:
        """The provisioner nominated ``kind``/``name`` (``node`` or ``nodeclaim``) for ``pod``."""
        current = self.ctx.cluster.pods.get(pod.key)
        if current is not None and current.node_name:
            return
        self._nominations.pop(pod.key, None)  # re-inserted: the latest nomination is the newest
        self._nominations[pod.key] = _Nomination(kind, name)
        while len(self._nominations) > self.max_tracked:
            del self._nominations[next(iter(self._nominations))]

    def on_event(self, event: ObjectEvent) -> bool:
        """Compare a remembered pod that is now bound; True when one was compared."""
        obj = event.obj
        if isinstance(obj, Pod):
            if event.type == DELETED:
                self._nominations.pop(obj.key, None)
                return False
            if not obj.node_name:
                return False
            nomination = self._nominations.pop(obj.key, None)
            if nomination is None:
                return False
            self._compare(obj, nomination)
            return True
        if isinstance(obj, Node | NodeClaim):
            key = ("node" if isinstance(obj, Node) else "nodeclaim", obj.name)
            if event.type == DELETED:
                self._gone.pop(key, None)
                self._gone[key] = None
                while len(self._gone) > self.max_tracked:
                    del self._gone[next(iter(self._gone))]
            elif event.type == ADDED:
                self._gone.pop(key, None)
        return False

    # -- the comparison ------------------------------------------------------------------------
    def _compare(self, pod: Pod, nomination: _Nomination) -> None:
        ctx = self.ctx
        if self._on_target(pod.node_name, nomination):
            self.bound += 1
            ctx.metrics.nominations_bound.inc()
            return
        reason = self._why(nomination)
        self.diverged += 1
        self.divergence[reason] += 1
        ctx.metrics.nomination_divergence.labels(reason=reason).inc()
        ctx.log.info(
            "pod %s: karpy nominated %s, kube-scheduler bound node/%s (%s)",
            pod.key,
            nomination.ref,
            pod.node_name,
            reason,
        )
        ctx.event(
            "Pod",
            pod.name,
            "SchedulerDivergence",
            f"karpy nominated {nomination.ref}, kube-scheduler bound node/{pod.node_name} (reason: {reason})",
            namespace=pod.namespace,
            warning=True,
        )

    def _on_target(self, node_name: str, nomination: _Nomination) -> bool:
        """Is ``node_name`` the nominated Node, or the Node of the nominated NodeClaim?"""
        if nomination.kind == "node":
            return node_name == nomination.name
        cluster = self.ctx.cluster
        claim = cluster.claims.get(nomination.name)
        if claim is not None and claim.node_name == node_name:
            return True
        node = cluster.nodes.get(node_name)
        joined = cluster.claim_for_node(node) if node is not None else None
        return joined is not None and joined.name == nomination.name

    def _why(self, nomination: _Nomination) -> str:
        """``gone`` | ``not-ready`` | ``scoring``, from the nominated target's state now."""
        cluster = self.ctx.cluster
        if (nomination.kind, nomination.name) in self._gone:
            return GONE
        node: Node | None
        if nomination.kind == "node":
            node = cluster.nodes.get(nomination.name)
            if node is None or node.deleting:
                return GONE
        else:
            claim = cluster.claims.get(nomination.name)
            if claim is None:
                return NOT_READY  # created, but its watch event has not arrived yet
            if claim.deleting:
                return GONE
            node = cluster.nodes.get(claim.node_name) if claim.node_name else None
            if node is None and claim.provider_id:
                node = cluster.node_for_provider(claim.provider_id)
            if node is None:
                return NOT_READY
            if node.deleting:
                return GONE
        return SCORING if node.ready else NOT_READY
