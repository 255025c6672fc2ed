"""What the installed autoscaler did, read from the watch: its launches and its removals.

Shadow mode's other half (:class:`karpy.controllers.shadow.Shadow` hands it every applied feed
event). Nothing here decides; it counts:

- **Karpenter** (NodeClaims): a NodeClaim created since the shadow started is a launch once it
  carries its instance type label (``karpy_shadow_installed_launches_total{instance_type}``; a
  claim deleted before it launched is no launch). A NodeClaim being deleted (or gone) is a
  removal (``karpy_shadow_installed_disruptions_total{reason}``), with the reason it left
  visible: its ``DisruptionReason`` condition's reason (Karpenter v1 writes it before a voluntary
  disruption: ``empty``, ``underutilized``, ``drifted``), else ``drifted`` for a ``Drifted``
  condition, else ``expired`` when older than its ``expireAfter``, else ``deleted`` (an
  interruption, a user's ``kubectl delete``, ...). Its Node (labelled ``karpenter.sh/nodepool``) is
  not counted again.
- **Cluster Autoscaler** (and any Node without ``karpenter.sh/nodepool``): a Node created since
  the shadow started is a launch (its instance type label, ``unknown`` without one); a Node
  being deleted (or gone) a removal, ``scale-down`` when it carries CA's
  ``ToBeDeletedByClusterAutoscaler`` taint, else ``deleted``.

Objects that existed before the shadow started are not launches, nor is the removal of one
being deleted already: those the watch delivered before the shadow's first pass (``watching``
False; the operator runs it once the caches are listed) and created before its start. From its
first pass on, every NodeClaim or Node it had not seen and created since (a second before) its
start is new. ``on_removed(node name, reason)``
tells the shadow which node went, to count agreement with its own decisions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from karpy.controllers import orchestration
from karpy.metrics import Metrics
from karpy.model import labels
from karpy.model.objects import Node, NodeClaim
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["CA_TAINT", "Installed", "claim_reason", "node_reason"]

CA_TAINT = "ToBeDeletedByClusterAutoscaler"
UNKNOWN = "unknown"


def claim_reason(claim: NodeClaim, now: float) -> str:
    """Why Karpenter removes ``claim``, as far as the claim shows it (see the module docstring)."""
    cond = claim.condition(orchestration.DISRUPTION_REASON)
    if cond is not None and cond.status == "True" and cond.reason:
        return cond.reason.lower()
    if claim.is_true("Drifted"):
        return "drifted"
    expire = claim.expire_after
    if expire is not None and not math.isinf(expire) and expire > 0 and now - claim.created >= expire:
        return "expired"
    return "deleted"


def node_reason(node: Node) -> str:
    """Why a Node without a NodePool goes: ``scale-down`` (Cluster Autoscaler's taint) or ``deleted``."""
    return "scale-down" if any(t.key == CA_TAINT for t in node.taints) else "deleted"


class Installed:
    """Counts the installed autoscaler's launches and removals (module docstring)."""

    def __init__(self, metrics: Metrics, *, started: float, on_removed: Callable[[str, str], None]) -> None:
        self.metrics = metrics
        self.started = started
        self.watching = False  # set by the shadow's first pass
        self.on_removed = on_removed  # (node name, reason)
        self._before: set[str] = set()  # there before the shadow started
        self._launched: set[str] = set()  # "NodeClaim/x" or "Node/x" counted as launches, still there
        self._removed: set[str] = set()  # counted as removed (deleting), not gone yet

    def on_event(self, event: ObjectEvent, now: float) -> None:
        obj = event.obj
        if isinstance(obj, NodeClaim):
            gone = event.type == DELETED or obj.deleting
            self._see(
                f"NodeClaim/{obj.name}",
                gone=gone,
                deleted=event.type == DELETED,
                created=obj.created,
                instance_type=obj.labels.get(labels.INSTANCE_TYPE, ""),
                node=obj.node_name,
                reason=lambda: claim_reason(obj, now),
            )
        elif isinstance(obj, Node) and labels.NODEPOOL not in obj.labels:
            self._see(
                f"Node/{obj.name}",
                gone=event.type == DELETED or obj.deleting,
                deleted=event.type == DELETED,
                created=obj.created,
                instance_type=obj.labels.get(labels.INSTANCE_TYPE, "") or UNKNOWN,
                node=obj.name,
                reason=lambda: node_reason(obj),
            )

    def _see(
        self,
        key: str,
        *,
        gone: bool,
        deleted: bool,
        created: float,
        instance_type: str,
        node: str,
        reason: Callable[[], str],
    ) -> None:
        if gone:
            if not self.watching:
                self._before.add(key)
            elif key not in self._removed:
                why = reason()
                self.metrics.shadow_installed_disruptions.labels(reason=why).inc()
                self.on_removed(node, why)
                self._removed.add(key)
            if deleted:
                self._removed.discard(key)
                self._launched.discard(key)
                self._before.discard(key)
            return
        if key in self._launched or key in self._before:
            return
        # (after its first pass, a second of slack: creation timestamps are whole seconds)
        if created < (self.started - 1.0 if self.watching else self.started):
            self._before.add(key)
            return
        if not instance_type:
            return
        self._launched.add(key)
        self.metrics.shadow_installed_launches.labels(instance_type=instance_type).inc()
