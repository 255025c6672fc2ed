"""Upstream's cluster consolidation state: when the cluster last changed in a way that may make
consolidation possible.

The disruption controller (:mod:`karpy.controllers.disruption`) skips each consolidation
method (emptiness, multi-node, single-node) while this state is unchanged since the method last
found nothing to do, as upstream's ``IsConsolidated`` does. What changes the state is what calls
upstream's ``Cluster.MarkUnconsolidated`` (``state/cluster.go`` and its informers):

- a Pod deleted, or bound to a node it was not known bound to (not its other updates: not a
  new pending pod, readiness, termination, completion or annotations);
- a StateNode (a Node and its NodeClaim, by providerID) appearing or going (a Node, or a
  launched NodeClaim, deleted), or changing whether it is initialized or marked for deletion
  (a deletion timestamp; the in-memory deletion mark itself is no change, as upstream's is set
  in place on the object the comparison reads). A NodeClaim without a providerID has no
  StateNode yet; other Node and NodeClaim updates (labels, taints, status, conditions such as
  ``Consolidatable``) are no change;
- a NodePool created or changed in its spec (upstream watches its generation): not its status
  writes, nor its deletion;
- nothing else (NodeClasses, DaemonSets, PodDisruptionBudgets).

The state also goes stale by itself 5 minutes after it last changed (:meth:`at`), so a method
that found nothing is tried again at least that often.
"""

from __future__ import annotations

from karpy.core.snapshot import StateNode
from karpy.model.objects import Node, NodeClaim, NodePool, Pod
from karpy.state.cluster import Cluster, deletion_marked
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["STALE_SECONDS", "ConsolidationState"]

STALE_SECONDS = 300.0  # the state is forced to change 5 min after it last did


class ConsolidationState:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self.changed_at: float | None = None  # None: never (the first read starts it)
        self._bindings: dict[str, str] = {}  # pod key -> the node it is known bound to
        # providerID -> (initialized, deletion timestamp set) of its StateNode as last seen
        self._nodes: dict[str, tuple[bool, bool]] = {}
        self._pools: dict[str, NodePool] = {}  # NodePool name -> as last seen

    def mark(self, now: float) -> None:
        """The state changed at ``now`` (upstream's ``MarkUnconsolidated``)."""
        self.changed_at = now

    def at(self, now: float) -> float:
        """When the state last changed, as of ``now``: moved to ``now`` once 5 minutes old
        (upstream's ``ConsolidationState``)."""
        if self.changed_at is None or now - self.changed_at >= STALE_SECONDS:
            self.changed_at = now
        return self.changed_at

    def changes(self, event: ObjectEvent) -> bool:
        """Whether this applied watch event changes the state (the module docstring's rules)."""
        obj = event.obj
        deleted = event.type == DELETED
        if isinstance(obj, Pod):
            return self._pod(obj, deleted)
        if isinstance(obj, Node):
            return self._state_node(obj.provider_id or obj.name, deleted, node_name=obj.name)
        if isinstance(obj, NodeClaim):
            # a claim without a providerID has not launched: no StateNode yet, nothing to clean up
            return bool(obj.provider_id) and self._state_node(obj.provider_id, deleted)
        if isinstance(obj, NodePool):
            if deleted:
                self._pools.pop(obj.name, None)
                return False
            old, self._pools[obj.name] = self._pools.get(obj.name), obj
            return old != obj  # created, or its spec changed (the model object holds no status)
        return False

    def _pod(self, pod: Pod, deleted: bool) -> bool:
        if deleted:
            self._bindings.pop(pod.key, None)
            return True
        if pod.is_terminal():
            self._bindings.pop(pod.key, None)  # completion: usage drops, the state does not change
            return False
        if not pod.node_name or self._bindings.get(pod.key) == pod.node_name:
            return False
        self._bindings[pod.key] = pod.node_name
        return True

    def _state_node(self, provider_id: str, deleted: bool, *, node_name: str = "") -> bool:
        """Compare the StateNode with this providerID (after the event) with how it was last seen."""
        cluster = self._cluster
        # (a Node without a providerID is keyed by its name)
        node = cluster.node_for_provider(provider_id) or (cluster.nodes.get(node_name) if node_name else None)
        claim = cluster.claim_for_provider(provider_id, last=True)
        old = self._nodes.pop(provider_id, None)
        if node is None and claim is None:
            return deleted or old is not None  # gone (a cleanup marks the state)
        now = _seen(node, claim)
        self._nodes[provider_id] = now
        if old is None or deleted:
            return True  # a new StateNode, or half of one gone
        marked = _marked(cluster, node, claim)  # the in-memory mark: the same on both sides
        return old[0] != now[0] or (old[1] or marked) != (now[1] or marked)


def _seen(node: Node | None, claim: NodeClaim | None) -> tuple[bool, bool]:
    """(initialized, deletion timestamp set) of the StateNode these make, as the scheduler reads it."""
    initialized = StateNode(node.name if node is not None else "", node=node, claim=claim).initialized
    return initialized, (claim.deleting if claim is not None else node is not None and node.deleting)


def _marked(cluster: Cluster, node: Node | None, claim: NodeClaim | None) -> bool:
    """The StateNode's in-memory deletion mark, as the cluster state sets it."""
    return deletion_marked(cluster.marked_for_deletion, node.name if node is not None else None, claim)
