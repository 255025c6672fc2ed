"""An immutable view of the cluster that every core decision is computed from.

Built by :meth:`karpy.state.cluster.Cluster.snapshot`; read by
:mod:`karpy.core.scheduling` (and later the disruption core). A :class:`StateNode`
joins a Node and its NodeClaim (by providerID), or stands for a NodeClaim that has
launched but not registered yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy import settings as settings_mod
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import DaemonSet, Node, NodeClaim, NodePool, Pod, PodDisruptionBudget, Rollout
from karpy.model.resources import EMPTY, Resources
from karpy.model.taints import Taint
from karpy.model.volumes import EMPTY_STORAGE, Storage

__all__ = ["Snapshot", "StateNode"]


@dataclass(frozen=True, slots=True)
class StateNode:
    """A node as the scheduler sees it: Node and/or NodeClaim, with its bound pods."""

    name: str
    node: Node | None = None
    claim: NodeClaim | None = None
    pods: tuple[Pod, ...] = ()
    marked_for_deletion: bool = False
    nominated: bool = False
    # values derived from the (immutable) fields above, computed once per StateNode; not an input
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def labels(self) -> dict[str, str]:
        """Node labels over NodeClaim labels (a claim alone also gets its hostname). Callers must
        not modify the returned dict: it is computed once and shared."""
        found = self._derived.get("labels")
        if found is None:
            if self.node is not None:
                found = self.node.labels if self.claim is None else {**self.claim.labels, **self.node.labels}
            elif self.claim is not None:
                found = {**self.claim.labels, labels.HOSTNAME: self.name}
            else:
                found = {}
            self._derived["labels"] = found
        return found

    @property
    def taints(self) -> tuple[Taint, ...]:
        if self.node is not None:
            return self.node.taints
        if self.claim is not None:
            return self.claim.taints + self.claim.startup_taints
        return ()

    @property
    def allocatable(self) -> Resources:
        if self.node is not None and (self.node.allocatable or self.claim is None):
            return self.node.allocatable
        if self.claim is not None:
            # before launch a claim's allocatable is unknown: it holds exactly what it was created for
            return self.claim.allocatable or self.claim.requests
        return EMPTY

    @property
    def limit_capacity(self) -> Resources:
        """The capacity NodePool limits count: the NodeClaim's, else the Node's, else allocatable."""
        found = self._derived.get("limit_capacity")
        if found is None:
            found = self.node.capacity if self.node is not None and self.node.capacity else self.allocatable
            if self.claim is not None and self.claim.capacity:
                found = self.claim.capacity
            self._derived["limit_capacity"] = found
        return found

    @property
    def managed(self) -> bool:
        return self.claim is not None

    @property
    def node_pool(self) -> str:
        if self.claim is not None and self.claim.node_pool:
            return self.claim.node_pool
        return self.labels.get(labels.NODEPOOL, "")

    @property
    def initialized(self) -> bool:
        """Unmanaged nodes are always initialized; managed ones once their claim says so."""
        found = self._derived.get("initialized")
        if found is None:
            if self.claim is None:
                found = self.node is not None
            elif self.node is None:
                found = False
            else:
                claim, node = self.claim, self.node
                found = claim.is_true("Initialized") or node.labels.get(labels.INITIALIZED) == "true"
            self._derived["initialized"] = found
        return found

    @property
    def provider_id(self) -> str:
        if self.claim is not None and self.claim.provider_id:
            return self.claim.provider_id
        return self.node.provider_id if self.node is not None else ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a core decision needs; nothing outside it is read."""

    now: float = 0.0
    nodes: tuple[StateNode, ...] = ()
    pods: tuple[Pod, ...] = ()
    node_pools: tuple[NodePool, ...] = ()
    instance_types: Mapping[str, tuple[InstanceType, ...]] = field(default_factory=dict)
    daemonsets: tuple[DaemonSet, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    rollouts: tuple[Rollout, ...] = ()  # Deployments' and StatefulSets' rollout status (the rollout guard)
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    well_known: frozenset[str] = labels.CORE_WELL_KNOWN
    settings: settings_mod.Settings = field(default_factory=settings_mod.Settings)
    storage: Storage = EMPTY_STORAGE  # PVCs, PVs, StorageClasses, CSINodes (the volume rules)
    # the pods of ``pods`` without a node, in the same order, when its maker keeps them apart
    # (the cluster state does); None: found by walking ``pods``
    unbound: tuple[Pod, ...] | None = None

    def unbound_pods(self) -> tuple[Pod, ...]:
        """The pods without a node, in the order of ``pods``."""
        if self.unbound is not None:
            return self.unbound
        return tuple(p for p in self.pods if not p.node_name)

    def pending_pods(self) -> tuple[Pod, ...]:
        """Pods the provisioner should find capacity for (unbound, not terminal, not DaemonSet)."""
        return tuple(
            p
            for p in self.unbound_pods()
            if not p.is_terminal() and not p.deleting and not p.is_daemonset_pod() and not p.scheduling_gated
        )
