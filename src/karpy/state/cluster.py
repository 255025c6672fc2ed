"""``Cluster``: the in-memory cluster that every decision is computed from.

It changes only through :meth:`Cluster.apply` (watch events, simulator events, or the
objects a one-shot tool read from files) and hands out immutable
:class:`~karpy.core.snapshot.Snapshot` views. Nodes are joined to their NodeClaims by
providerID; a NodeClaim whose Node has not registered yet is an in-flight node. Instance
types per NodePool come from an injected ``InstanceTypeSource`` (the catalog or a cloud
provider), so this layer never loads catalogs itself. Used by ``plan``, the conformance
runner and (later) the controllers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from karpy import settings as settings_mod
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass, NodeClass
from karpy.model.objects import DaemonSet, Namespace, Node, NodeClaim, NodePool, Pod, PodDisruptionBudget
from karpy.state.events import DELETED, ObjectEvent

__all__ = ["Cluster", "InstanceTypeSource"]

InstanceTypeSource = Callable[[NodePool, "NodeClass | None"], tuple[InstanceType, ...]]


@dataclass
class Cluster:
    instance_types: InstanceTypeSource
    settings: settings_mod.Settings = field(default_factory=settings_mod.Settings)
    well_known: frozenset[str] = labels.CORE_WELL_KNOWN
    pods: dict[str, Pod] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    claims: dict[str, NodeClaim] = field(default_factory=dict)
    node_pools: dict[str, NodePool] = field(default_factory=dict)
    node_classes: dict[tuple[str, str], NodeClass] = field(default_factory=dict)
    daemonsets: dict[str, DaemonSet] = field(default_factory=dict)
    pdbs: dict[str, PodDisruptionBudget] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    marked_for_deletion: set[str] = field(default_factory=set)
    nominations: dict[str, float] = field(default_factory=dict)  # node or claim name -> nominated until

    def apply(self, event: ObjectEvent) -> None:
        obj = event.obj
        deleted = event.type == DELETED
        if isinstance(obj, Pod):
            _put(self.pods, obj.key, obj, deleted)
        elif isinstance(obj, Node):
            _put(self.nodes, obj.name, obj, deleted)
        elif isinstance(obj, NodeClaim):
            _put(self.claims, obj.name, obj, deleted)
        elif isinstance(obj, NodePool):
            _put(self.node_pools, obj.name, obj, deleted)
        elif isinstance(obj, EC2NodeClass | KWOKNodeClass):
            _put(self.node_classes, (obj.kind, obj.name), obj, deleted)
        elif isinstance(obj, DaemonSet):
            _put(self.daemonsets, f"{obj.namespace}/{obj.name}", obj, deleted)
        elif isinstance(obj, PodDisruptionBudget):
            _put(self.pdbs, f"{obj.namespace}/{obj.name}", obj, deleted)
        elif isinstance(obj, Namespace):
            _put(self.namespaces, obj.name, obj.labels, deleted)
        else:  # pragma: no cover - the Watched union is closed
            raise TypeError(f"cannot apply {type(obj).__name__}")

    def apply_all(self, events: Iterable[ObjectEvent]) -> None:
        for event in events:
            self.apply(event)

    def node_class_for(self, pool: NodePool) -> NodeClass | None:
        ref = pool.node_class_ref
        if ref is None:
            return None
        return self.node_classes.get((ref.kind, ref.name))

    def _pool_types(self, pool: NodePool) -> tuple[InstanceType, ...]:
        return self.instance_types(pool, self.node_class_for(pool))

    def synced(self) -> bool:
        return True

    # -- controller-owned state (written at once, before the watch echo arrives) ---------
    def nominate(self, name: str, until: float) -> None:
        """Mark a node or in-flight NodeClaim as the expected home of pods until ``until``."""
        self.nominations[name] = max(until, self.nominations.get(name, 0.0))

    def mark_for_deletion(self, *names: str) -> None:
        self.marked_for_deletion.update(names)

    def unmark_for_deletion(self, *names: str) -> None:
        self.marked_for_deletion.difference_update(names)

    def pods_on(self, node_name: str) -> list[Pod]:
        return [p for p in self.pods.values() if p.node_name == node_name]

    def claim_for_node(self, node: Node) -> NodeClaim | None:
        if node.provider_id:
            for claim in self.claims.values():
                if claim.provider_id == node.provider_id:
                    return claim
        return None

    def state_nodes(self, now: float = 0.0) -> tuple[StateNode, ...]:
        by_provider: dict[str, NodeClaim] = {c.provider_id: c for c in self.claims.values() if c.provider_id}
        by_node_name: dict[str, list[Pod]] = {}
        for pod in self.pods.values():
            if pod.node_name:
                by_node_name.setdefault(pod.node_name, []).append(pod)
        joined: set[str] = set()
        out: list[StateNode] = []
        for name in sorted(self.nodes):
            node = self.nodes[name]
            claim = by_provider.get(node.provider_id) if node.provider_id else None
            if claim is None:
                claim = next(
                    (c for c in self.claims.values() if c.node_name == name and not c.provider_id), None
                )
            if claim is not None:
                joined.add(claim.name)
            pods = tuple(sorted(by_node_name.get(name, ()), key=lambda p: p.key))
            marked = name in self.marked_for_deletion or (
                claim is not None and claim.name in self.marked_for_deletion
            )
            nominated = self.nominations.get(name, 0.0) > now or (
                claim is not None and self.nominations.get(claim.name, 0.0) > now
            )
            out.append(StateNode(name, node, claim, pods, marked, nominated))
        for claim_name in sorted(self.claims):
            if claim_name in joined:
                continue
            claim = self.claims[claim_name]
            node_name = claim.node_name or claim.name
            pods = tuple(sorted(by_node_name.get(node_name, ()), key=lambda p: p.key))
            nominated = self.nominations.get(claim_name, 0.0) > now
            out.append(
                StateNode(node_name, None, claim, pods, claim_name in self.marked_for_deletion, nominated)
            )
        return tuple(out)

    def snapshot(self, now: float) -> Snapshot:
        pools = tuple(self.node_pools[name] for name in sorted(self.node_pools))
        return Snapshot(
            now=now,
            nodes=self.state_nodes(now),
            pods=tuple(self.pods[k] for k in sorted(self.pods)),
            node_pools=pools,
            instance_types={p.name: self._pool_types(p) for p in pools},
            daemonsets=tuple(self.daemonsets[k] for k in sorted(self.daemonsets)),
            pdbs=tuple(self.pdbs[k] for k in sorted(self.pdbs)),
            namespaces=dict(self.namespaces),
            well_known=self.well_known,
            settings=self.settings,
        )


def _put(store: dict, key: object, value: object, deleted: bool) -> None:  # type: ignore[type-arg]
    if deleted:
        store.pop(key, None)
    else:
        store[key] = value
