"""``ObjectEvent``: one ADDED / MODIFIED / DELETED of a watched object.

Produced by the watch adapters, the simulator and the one-shot loaders; consumed by
:meth:`karpy.state.cluster.Cluster.apply`.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass
from karpy.model.objects import (
    DaemonSet,
    Namespace,
    Node,
    NodeClaim,
    NodePool,
    Pod,
    PodDisruptionBudget,
    Rollout,
)
from karpy.model.volumes import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass

__all__ = ["ADDED", "DELETED", "MODIFIED", "Namespace", "ObjectEvent", "Watched"]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


Watched = (
    Pod
    | Node
    | NodeClaim
    | NodePool
    | DaemonSet
    | PodDisruptionBudget
    | EC2NodeClass
    | KWOKNodeClass
    | Namespace
    | Rollout
    | PersistentVolumeClaim
    | PersistentVolume
    | StorageClass
    | CSINode
)


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    type: str  # ADDED | MODIFIED | DELETED
    obj: Watched

    @classmethod
    def added(cls, obj: Watched) -> ObjectEvent:
        return cls(ADDED, obj)
