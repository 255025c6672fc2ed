"""Termination: drain and remove Nodes and NodeClaims that are being deleted.

Karpenter's ``node/termination`` and the NodeClaim lifecycle's finalizer. For a NodeClaim
with a deletionTimestamp (and karpy's ``karpenter.sh/termination`` finalizer) it stamps
``karpenter.sh/nodeclaim-termination-timestamp`` (deletion + ``terminationGracePeriod``) and
deletes its Node. For a Node being deleted that carries the finalizer (its NodeClaim is
deleted too if it is not yet) it taints ``karpenter.sh/disrupted:NoSchedule``, then drains in
upstream's order — non-critical non-DaemonSet, non-critical DaemonSet, critical non-DaemonSet,
critical DaemonSet pods, a tier only once the previous one is gone — through the Eviction API
(a PDB's 429 is retried with backoff; ``do-not-disrupt`` pods are waited on). Pods whose
``terminationGracePeriodSeconds`` would run past the termination timestamp are deleted
outright, PDBs and ``do-not-disrupt`` notwithstanding. Once drained: ``CloudProvider.delete``
until ``NodeClaimNotFound``, then the Node's finalizer goes, then the NodeClaim's. Pods that
tolerate the disrupted taint, mirror pods and pods already terminating are not waited on.
Nodes without karpy's finalizer (unmanaged) are left alone. Registered as a loop task by
the wiring; it requeues itself while anything is terminating. A pass reads the cluster's
sorted names of the NodeClaims and Nodes being deleted, not every claim and Node.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from karpy.api import common as api_common
from karpy.api import encode
from karpy.controllers.claims import without_finalizer
from karpy.controllers.context import Context
from karpy.controllers.lifecycle import set_conditions
from karpy.controllers.result import Result
from karpy.core.disruption import candidates
from karpy.core.disruption.budgets import INSTANCE_TERMINATING
from karpy.model import errors, labels
from karpy.model.objects import Condition, Node, NodeClaim, Pod
from karpy.model.taints import DISRUPTED

__all__ = ["CRITICAL_PRIORITY_CLASSES", "TERMINATION_TIMESTAMP", "Termination", "tier"]

TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
EXCLUDE_LB = "node.kubernetes.io/exclude-from-external-load-balancers"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
INSTANCE_POLL = 5.0  # CloudProvider.Delete is repeated until NotFound
DRAIN_POLL = 1.0  # while evicted pods go away
BACKOFF_MIN, BACKOFF_MAX = 1.0, 10.0  # an eviction a PDB refused


def tier(pod: Pod) -> int:
    """0 non-critical, 1 non-critical DaemonSet, 2 critical, 3 critical DaemonSet (drain order)."""
    critical = pod.priority_class in CRITICAL_PRIORITY_CLASSES
    return 2 * critical + pod.is_daemonset_pod()


def _deleting(names: tuple[str, ...], deleting: Callable[[], tuple[str, ...]]) -> Iterator[str]:
    """The ``names`` (sorted) that are being deleted when the walk reaches them, in order.

    The same names as walking every one of ``names`` and looking whether it is being deleted
    at that moment, without the walk: each step reads the cluster's sorted tuple of names being
    deleted anew (a step's API calls may delete more), and skips the names that came later."""
    last: str | None = None
    while True:
        current = deleting()
        i = 0 if last is None else bisect.bisect_right(current, last)
        while i < len(current):
            name = current[i]
            at = bisect.bisect_left(names, name)
            if at < len(names) and names[at] == name:
                break
            i += 1
        else:
            return
        last = name
        yield name


class Termination:
    name = "termination"

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._blocked: dict[str, tuple[int, float]] = {}  # node -> (passes without progress, next try)
        self._instance_gone: set[str] = set()  # claims whose CloudProvider.delete said NotFound
        self._told: set[tuple[str, str]] = set()  # (node, message) events already recorded
        # the claim and node names at the last clean-up of the tables above: while the cluster
        # hands back the same tuples, nothing went, and every entry (made for names then known) stays
        self._cleaned_for: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    def reconcile(self) -> Result:
        now = self.ctx.now()
        cluster = self.ctx.cluster
        waits: list[float] = []
        for name in _deleting(cluster.claim_names(), cluster.deleting_claim_names):
            wait = self._claim(cluster.claims[name])
            if wait is not None:
                waits.append(wait)
        for name in _deleting(cluster.node_names(), cluster.deleting_node_names):
            wait = self._node(cluster.nodes[name], now)
            if wait is not None:
                waits.append(wait)
        names = (self.ctx.cluster.claim_names(), self.ctx.cluster.node_names())
        last = self._cleaned_for
        if last is None or names[0] is not last[0] or names[1] is not last[1]:
            known_claims, known_nodes = set(names[0]), set(names[1])
            self._instance_gone &= known_claims
            self._blocked = {k: v for k, v in self._blocked.items() if k in known_nodes}
            self._told = {t for t in self._told if t[0] in known_nodes}
            self._cleaned_for = names
        return Result(requeue_after=min(waits) if waits else None)

    # -- NodeClaims ----------------------------------------------------------------------
    def _claim(self, claim: NodeClaim) -> float | None:
        """One step for a NodeClaim being deleted; the delay until another look (None: done)."""
        try:
            raw = self.ctx.kube.get("NodeClaim", claim.name)
        except errors.NotFound:
            return None
        meta = raw["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if labels.TERMINATION_FINALIZER not in finalizers:
            return INSTANCE_POLL  # someone else's finalizer holds it
        self._stamp_termination_time(claim, meta)
        node = self._node_of(claim)
        if node is not None:
            if not node.deleting:
                with contextlib.suppress(errors.NotFound):
                    self.ctx.kube.delete("Node", node.name)
            return INSTANCE_POLL  # the Node's own termination drains it and deletes the instance
        if not self._delete_instance(claim):
            return INSTANCE_POLL
        rest = without_finalizer(finalizers)
        try:
            self.ctx.kube.patch("NodeClaim", claim.name, {"metadata": {"finalizers": rest}})
        except errors.NotFound:
            return None
        self.ctx.metrics.nodeclaims_terminated.labels(nodepool=claim.node_pool).inc()
        self.ctx.log.info("NodeClaim %s terminated", claim.name)
        return None

    def _stamp_termination_time(self, claim: NodeClaim, meta: dict[str, Any]) -> None:
        grace = claim.termination_grace_period
        if grace is None or TERMINATION_TIMESTAMP in (meta.get("annotations") or {}):
            return
        deleted = meta.get("deletionTimestamp")
        since = api_common.parse_time(deleted) if deleted else self.ctx.now()
        stamp = encode.time(since + grace)
        try:
            self.ctx.kube.patch(
                "NodeClaim", claim.name, {"metadata": {"annotations": {TERMINATION_TIMESTAMP: stamp}}}
            )
        except errors.NotFound:
            return
        if claim.node_name:
            self.ctx.event(
                "Node",
                claim.node_name,
                "TerminationGracePeriodExpiring",
                f"All pods will be deleted by {stamp}",
                warning=True,
            )

    def _node_of(self, claim: NodeClaim) -> Node | None:
        nodes = self.ctx.cluster.nodes
        if claim.provider_id:
            found = self.ctx.cluster.node_for_provider(claim.provider_id)
            if found is not None:
                return found
        if claim.node_name and claim.node_name in nodes:
            node = nodes[claim.node_name]
            if not node.provider_id or node.provider_id == claim.provider_id:
                return node
        return None

    def _delete_instance(self, claim: NodeClaim) -> bool:
        """Call ``CloudProvider.delete`` until the instance is gone; True once it is."""
        if claim.name in self._instance_gone:
            return True
        try:
            self.ctx.cloud.delete(claim)
        except errors.NodeClaimNotFound:
            self._instance_gone.add(claim.name)
            return True
        except errors.CloudError as exc:
            self.ctx.event("NodeClaim", claim.name, "FailedTermination", str(exc), warning=True)
            return False
        self._mark_terminating(claim)
        return False

    def _mark_terminating(self, claim: NodeClaim) -> None:
        """``InstanceTerminating=True`` on the claim once its instance's deletion is under way
        (upstream ``EnsureTerminated``): from then on it no longer counts in its NodePool's
        disruption budgets (:func:`karpy.core.disruption.budgets.counts`)."""
        current = self.ctx.cluster.claims.get(claim.name, claim)
        if current.is_true(INSTANCE_TERMINATING):
            return
        condition = Condition(INSTANCE_TERMINATING, "True")
        body = {"status": {"conditions": set_conditions(current.conditions, [condition], now=self.ctx.now())}}
        with contextlib.suppress(errors.NotFound):
            self.ctx.kube.patch("NodeClaim", claim.name, body)

    # -- Nodes ---------------------------------------------------------------------------
    def _node(self, node: Node, now: float) -> float | None:
        try:
            raw = self.ctx.kube.get("Node", node.name)
        except errors.NotFound:
            return None
        finalizers = list(raw["metadata"].get("finalizers") or [])
        if labels.TERMINATION_FINALIZER not in finalizers:
            return None  # not karpy's to terminate
        claim = self.ctx.cluster.claim_for_node(node)
        if claim is not None and not claim.deleting:
            with contextlib.suppress(errors.NotFound):
                self.ctx.kube.delete("NodeClaim", claim.name)
            claim = self.ctx.cluster.claims.get(claim.name, claim)
            if claim.deleting:
                self._claim(claim)  # stamps the termination timestamp
                claim = self.ctx.cluster.claims.get(claim.name, claim)
        if claim is not None and not self._instance_lost(node, claim):
            until = self._termination_time(claim)
            self._taint(node)
            node = self.ctx.cluster.nodes.get(node.name, node)
            wait = self._drain(node, until, now)
            if wait is not None:
                return wait
            if not self._delete_instance(claim):
                return INSTANCE_POLL
        rest = without_finalizer(finalizers)
        try:
            self.ctx.kube.patch("Node", node.name, {"metadata": {"finalizers": rest}})
        except errors.NotFound:
            return None
        self.ctx.metrics.nodes_terminated.labels(nodepool=node.labels.get(labels.NODEPOOL, "")).inc()
        self.ctx.log.info("Node %s terminated", node.name)
        return 0.0 if claim is not None else None

    def _instance_lost(self, node: Node, claim: NodeClaim) -> bool:
        """A NotReady Node whose instance the cloud no longer knows: nothing left to drain."""
        if node.ready or not claim.provider_id:
            return False
        try:
            self.ctx.cloud.get(claim.provider_id)
        except errors.NodeClaimNotFound:
            self._instance_gone.add(claim.name)
            return True
        except errors.CloudError:
            return False
        return False

    def _termination_time(self, claim: NodeClaim) -> float | None:
        stamp = claim.annotations.get(TERMINATION_TIMESTAMP)
        if stamp is None:
            return None
        try:
            return api_common.parse_time(stamp)
        except ValueError:
            return None

    def _taint(self, node: Node) -> None:
        if DISRUPTED in node.taints and node.labels.get(EXCLUDE_LB) == "karpenter":
            return
        taints = [*node.taints, DISRUPTED] if DISRUPTED not in node.taints else list(node.taints)
        patch = {
            "metadata": {"labels": {EXCLUDE_LB: "karpenter"}},
            "spec": {"taints": [encode.taint(t) for t in taints]},
        }
        with contextlib.suppress(errors.NotFound):
            self.ctx.kube.patch("Node", node.name, patch)

    def _drain(self, node: Node, until: float | None, now: float) -> float | None:
        """Evict or delete the next tier; the delay until another look, or None once drained."""
        pods = sorted(
            (p for p in self.ctx.cluster.pods_on(node.name) if candidates.evictable(p)), key=lambda p: p.key
        )
        if not pods:
            self._blocked.pop(node.name, None)
            return None
        forced = [p for p in pods if until is not None and now >= until - p.termination_grace_seconds]
        for pod in forced:
            self._force_delete(pod, node, until)
        remaining = [p for p in pods if p not in forced]
        if not remaining:
            return DRAIN_POLL if forced else None
        soonest = min(until - p.termination_grace_seconds for p in remaining) if until is not None else None
        failures, next_try = self._blocked.get(node.name, (0, now))
        if now < next_try:  # backing off after refused evictions
            return next_try - now if soonest is None else max(0.0, min(next_try, soonest) - now)
        first = min(tier(p) for p in remaining)
        evicted = 0
        for pod in (p for p in remaining if tier(p) == first):
            if not candidates.do_not_disrupt_active(pod, now):
                evicted += self._evict(pod)
        wait = DRAIN_POLL
        if evicted < len(remaining):
            waiting = len(remaining) - evicted
            self._tell(node, f"Failed to drain node, {waiting} pods are waiting to be evicted")
        if evicted:
            self._blocked.pop(node.name, None)
        else:  # refused by PDBs or held by do-not-disrupt: back off
            wait = min(BACKOFF_MAX, BACKOFF_MIN * 2.0**failures)
            self._blocked[node.name] = (failures + 1, now + wait)
        if soonest is not None:
            wait = min(wait, max(0.0, soonest - now))
        return wait

    def _evict(self, pod: Pod) -> bool:
        try:
            self.ctx.kube.evict(pod.name, pod.namespace, pod.uid)
        except errors.NotFound:
            self.ctx.metrics.pods_evicted.labels(code="404").inc()
            return True
        except errors.Conflict:  # the pod of that name is a new one (re-created): ours is gone
            self.ctx.metrics.pods_evicted.labels(code="409").inc()
            return True
        except errors.TooManyRequests as exc:
            self.ctx.metrics.pods_evicted.labels(code="429").inc()
            self.ctx.log.info("eviction of %s refused: %s", pod.key, exc)
            return False
        self.ctx.metrics.pods_evicted.labels(code="200").inc()
        self.ctx.event("Pod", pod.name, "Evicted", "Evicted pod", namespace=pod.namespace)
        return True

    def _force_delete(self, pod: Pod, node: Node, until: float | None) -> None:
        try:
            self.ctx.kube.delete("Pod", pod.name, pod.namespace)
        except errors.NotFound:
            return
        when = encode.time(until) if until is not None else "now"
        self.ctx.event(
            "Pod",
            pod.name,
            "Disrupted",
            f"Deleting the pod to accommodate the terminationTime {when} of the node {node.name}",
            namespace=pod.namespace,
        )

    def _tell(self, node: Node, message: str) -> None:
        key = (node.name, message)
        if key not in self._told:
            self._told.add(key)
            self.ctx.event("Node", node.name, "FailedDraining", message, warning=True)
