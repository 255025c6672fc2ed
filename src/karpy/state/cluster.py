"""``Cluster``: the in-memory cluster that every decision is computed from.

It changes only through :meth:`Cluster.apply` (watch events, simulator events, or the
objects a one-shot tool read from files), :meth:`Cluster.remove` (a deletion by key, whatever
the object's content) and the controller-owned marks (:meth:`Cluster.nominate`,
:meth:`Cluster.mark_for_deletion`), and hands out immutable
:class:`~karpy.core.snapshot.Snapshot` views. Nodes are joined to their NodeClaims by
providerID; a NodeClaim whose Node has not registered yet is an in-flight node. Instance
types per NodePool come from an injected ``InstanceTypeSource`` (the catalog or a cloud
provider), so this layer never loads catalogs itself. Used by ``plan``, the conformance
runner and the controllers.

The public dicts (``pods``, ``nodes``, ``claims``, ...) are the state; read them freely but
never write them directly: ``apply`` also keeps indexes beside them (bound pods by node
name, pods without a node, claims by providerID and by node name, Nodes by providerID, the
names of Nodes and NodeClaims being deleted, sorted keys) and a ``version`` bumped on every
change. With these, :meth:`Cluster.state_nodes` costs
O(nodes + claims) after a change; only the StateNodes concerned (and a tuple copy) when
only bound pods, Nodes keeping their providerID, NodeClaims keeping their providerID and
nodeName, or deletion marks changed; and O(1)
when nothing that it reads changed. It hands back the *same* ``StateNode`` object for a
node whose Node, NodeClaim, pods, deletion mark and nomination are unchanged (callers
cache by identity). :meth:`Cluster.snapshot` reuses its sorted tuples of pods, pods
without a node, NodePools, DaemonSets, PDBs and rollouts while those dicts are unchanged.
How the StateNodes are built and kept is in :mod:`karpy.state.statenodes` (a base class
of ``Cluster``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from karpy import settings as settings_mod
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model import volumes as volumes_mod
from karpy.model.catalog import InstanceType
from karpy.model.nodeclass import EC2NodeClass, KWOKNodeClass, NodeClass
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
from karpy.state import rollouts as rollouts_mod
from karpy.state import statenodes
from karpy.state.events import DELETED, ObjectEvent, Watched
from karpy.state.statenodes import deletion_marked, replaced

__all__ = ["Cluster", "InstanceTypeSource", "deletion_marked", "replaced"]

_JOURNAL_MAX = 65536  # changes a journal holds before it forgets the older half

_STORAGE_TYPES: dict[type, str] = {
    volumes_mod.PersistentVolumeClaim: "PersistentVolumeClaim",
    volumes_mod.PersistentVolume: "PersistentVolume",
    volumes_mod.StorageClass: "StorageClass",
    volumes_mod.CSINode: "CSINode",
}

_STORAGE = tuple(_STORAGE_TYPES)

InstanceTypeSource = Callable[[NodePool, "NodeClass | None"], tuple[InstanceType, ...]]


@dataclass
class Cluster(statenodes.StateNodeCache):
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
    rollouts: dict[str, Rollout] = field(default_factory=dict)  # Kind/namespace/name -> its rollout status
    # PersistentVolumeClaims (by namespace/name), PersistentVolumes, StorageClasses and CSINodes
    # (by name), per kind: karpy.model.volumes.STORAGE_KINDS
    storage: dict[str, dict[str, Any]] = field(default_factory=dict)
    storage_complete: bool = False  # the storage objects are known to be all there are (Storage.complete)
    marked_for_deletion: set[str] = field(default_factory=set)
    nominations: dict[str, float] = field(default_factory=dict)  # node or claim name -> nominated until

    def __post_init__(self) -> None:
        self._version = 0  # changes of any kind
        self._state_version = 0  # changes to what state_nodes() reads
        self._store_versions: dict[str, int] = {}  # store name -> changes to it
        # indexes, kept by apply() and the mark methods
        self._tick = 0
        self._pod_order: dict[str, int] = {}  # pod key -> position in ``pods`` (insertion order)
        self._pod_keys: list[str] = []  # sorted keys of ``pods``
        self._pod_values: list[Pod] = []  # ``pods`` values in the order of ``_pod_keys``
        self._unbound: dict[str, Pod] = {}  # pod key -> pod without a node
        self._bound: dict[str, dict[str, Pod]] = {}  # node name -> pod key -> bound pod
        self._bound_sorted: dict[str, tuple[Pod, ...]] = {}  # node name -> its bound pods by key
        self._claim_order: dict[str, int] = {}  # claim name -> position in ``claims``
        self._by_provider: dict[str, set[str]] = {}  # providerID -> claim names
        self._unlaunched: dict[str, set[str]] = {}  # node name -> claims without a providerID naming it
        self._node_names: tuple[str, ...] | None = None  # sorted ``nodes`` keys
        self._claim_names: tuple[str, ...] | None = None  # sorted ``claims`` keys
        self._deleting: dict[str, set[str]] = {"nodes": set(), "claims": set()}  # names being deleted
        self._deleting_names: dict[str, tuple[str, ...]] = {}  # store -> the sorted ``_deleting`` set
        self._nodes_by_provider: dict[str, set[str]] = {}  # providerID -> Node names
        # state_nodes() and snapshot() caches
        self._nodes_out: tuple[StateNode, ...] = ()
        # (state version, lo, hi): ``_nodes_out`` holds for that version and lo <= now < hi
        self._nodes_key: tuple[int, float, float] = (-1, 0.0, 0.0)
        self._node_states: dict[str, StateNode] = {}  # node name -> its last StateNode
        self._claim_states: dict[str, StateNode] = {}  # unjoined claim name -> its last StateNode
        # node names whose bound pods changed since ``_nodes_out`` was built, while only pods,
        # Nodes that keep their providerID (``_nodes_changed``: those), NodeClaims that keep
        # their providerID and nodeName (``_claims_changed``), deletion marks (``_marks_changed``)
        # and nominations (``_noms_changed``) did; None after any other change to what
        # state_nodes() reads
        self._pods_moved: set[str] | None = None
        self._claims_changed: set[str] = set()
        self._nodes_changed: set[str] = set()  # Nodes replaced keeping their providerID (and so their join)
        self._marks_changed: set[str] = set()  # names marked or unmarked for deletion (no join changes)
        self._noms_changed: set[str] = set()  # names whose nomination changed (or flipped with time)
        self._nodes_now = 0.0  # the time ``_nodes_out`` was last brought up to
        self._nominations_limit = statenodes.NOMINATIONS_KEPT  # see ``_prune_nominations``
        self._positions: dict[str, list[int]] = {}  # StateNode name -> its places in ``_nodes_out``
        self._claim_positions: dict[str, list[int]] = {}  # claim name -> places of StateNodes with it
        self._sorted: dict[str, tuple[int, tuple[Any, ...]]] = {}  # store -> (its version, values by key)
        self._storage_cache: tuple[tuple[int, bool], volumes_mod.Storage] | None = None
        # per journaled store: the key of each change, and the store version before the first
        self._journals: dict[str, list[str]] = {"pods": [], "claims": []}
        self._journal_bases: dict[str, int] = {"pods": 0, "claims": 0}
        # a Cluster built with pre-filled dicts: index them as if applied in their order
        pods, nodes, claims = dict(self.pods), dict(self.nodes), dict(self.claims)
        self.pods.clear()
        self.nodes.clear()
        self.claims.clear()
        for key, pod in pods.items():
            self._put_pod(key, pod, False)
        for name, node in nodes.items():
            self._put_node(name, node, False)
        for name, claim in claims.items():
            self._put_claim(name, claim, False)

    @property
    def version(self) -> int:
        """Bumped on every change (apply, nominate, mark/unmark); equal versions, equal state."""
        return self._version

    @property
    def pods_version(self) -> int:
        """Bumped on every change to ``pods``."""
        return self.store_version("pods")

    def store_version(self, store: str) -> int:
        """Bumped on every change to one store: ``pods``, ``nodes``, ``claims``, ``node_pools``,
        ``node_classes``, ``daemonsets``, ``pdbs``, ``namespaces``, ``rollouts``, ``storage``,
        ``nominations`` or ``marked_for_deletion``."""
        return self._store_versions.get(store, 0)

    def changed_since(self, store: str, version: int) -> list[str] | None:
        """The keys of ``pods`` or ``claims`` changed (stored, replaced or deleted) since the
        store's :meth:`store_version` was ``version``, oldest first, a key once per change; None
        when the journal no longer reaches back that far (the caller then looks at every key)."""
        journal = self._journals[store]
        base = self._journal_bases[store]
        if version < base or version > self.store_version(store):
            return None
        return journal[version - base :]

    # -- apply ---------------------------------------------------------------------------
    def apply(self, event: ObjectEvent) -> None:
        obj = event.obj
        deleted = event.type == DELETED
        if isinstance(obj, Pod):
            self._put_pod(obj.key, obj, deleted)
        elif isinstance(obj, Node):
            self._put_node(obj.name, obj, deleted)
        elif isinstance(obj, NodeClaim):
            self._put_claim(obj.name, obj, deleted)
        elif isinstance(obj, NodePool):
            self._put("node_pools", self.node_pools, obj.name, obj, deleted)
        elif isinstance(obj, EC2NodeClass | KWOKNodeClass):
            self._put("node_classes", self.node_classes, (obj.kind, obj.name), obj, deleted)
        elif isinstance(obj, DaemonSet):
            self._put("daemonsets", self.daemonsets, f"{obj.namespace}/{obj.name}", obj, deleted)
        elif isinstance(obj, PodDisruptionBudget):
            self._put("pdbs", self.pdbs, f"{obj.namespace}/{obj.name}", obj, deleted)
        elif isinstance(obj, Namespace):
            self._put("namespaces", self.namespaces, obj.name, obj.labels, deleted)
        elif isinstance(obj, Rollout):
            key = rollouts_mod.key(obj.kind, obj.namespace, obj.name)
            self._put("rollouts", self.rollouts, key, obj, deleted)
        elif isinstance(obj, _STORAGE):
            key = obj.key if isinstance(obj, volumes_mod.PersistentVolumeClaim) else obj.name
            self._put("storage", self.storage.setdefault(_STORAGE_TYPES[type(obj)], {}), key, obj, deleted)
        else:  # pragma: no cover - the Watched union is closed
            raise TypeError(f"cannot apply {type(obj).__name__}")

    def apply_all(self, events: Iterable[ObjectEvent]) -> None:
        for event in events:
            self.apply(event)

    def stored(self, kind: str, namespace: str, name: str) -> Watched | None:
        """The object the state holds for ``kind`` (a kind of the Watched union; Deployment or
        StatefulSet for a Rollout) named ``name`` (in ``namespace`` for a Pod, DaemonSet, PDB,
        Deployment or StatefulSet), or None."""
        if kind == "Namespace":
            found = self.namespaces.get(name)
            return None if found is None else Namespace(name, found)
        if kind in ("EC2NodeClass", "KWOKNodeClass"):
            return self.node_classes.get((kind, name))
        if kind in rollouts_mod.KINDS:
            return self.rollouts.get(rollouts_mod.key(kind, namespace, name))
        if kind in volumes_mod.STORAGE_KINDS:
            key = f"{namespace}/{name}" if kind == "PersistentVolumeClaim" else name
            held: Watched | None = self.storage.get(kind, {}).get(key)
            return held
        namespaced: dict[str, dict[str, Any]] = {
            "Pod": self.pods,
            "DaemonSet": self.daemonsets,
            "PodDisruptionBudget": self.pdbs,
        }
        if kind in namespaced:
            return namespaced[kind].get(f"{namespace}/{name}")
        stores: dict[str, dict[str, Any]] = {
            "Node": self.nodes,
            "NodeClaim": self.claims,
            "NodePool": self.node_pools,
        }
        return stores[kind].get(name) if kind in stores else None

    def remove(self, kind: str, namespace: str, name: str) -> Watched | None:
        """Delete the object of ``kind`` named ``name`` (see :meth:`stored`) by key, whatever its
        last raw version looked like: the same change as a DELETED event of the copy the state
        holds (every index, journal and version kept as for any deletion). Returns that copy
        (None, and nothing changes, when the state holds none). Used by the feed for a deletion,
        or an update, whose object no longer parses."""
        obj = self.stored(kind, namespace, name)
        if obj is not None:
            self.apply(ObjectEvent(DELETED, obj))
        return obj

    def _changed(self, store: str, *, state: bool = False, key: str = "") -> None:
        self._version += 1
        self._store_versions[store] = self._store_versions.get(store, 0) + 1
        if state:
            self._state_version += 1
        journal = self._journals.get(store)
        if journal is not None:
            journal.append(key)
            if len(journal) > _JOURNAL_MAX:  # the older half is forgotten
                drop = len(journal) // 2
                del journal[:drop]
                self._journal_bases[store] += drop

    def _put(self, store: str, values: dict[Any, Any], key: object, value: object, deleted: bool) -> None:
        if deleted:
            if key not in values:
                return
            del values[key]
        else:
            values[key] = value
        self._changed(store)

    def _put_pod(self, key: str, pod: Pod, deleted: bool) -> None:
        old = self.pods.get(key)
        if deleted:
            if old is None:
                return
            del self.pods[key]
            del self._pod_order[key]
            at = bisect.bisect_left(self._pod_keys, key)
            del self._pod_keys[at]
            del self._pod_values[at]
            self._unbound.pop(key, None)
        else:
            at = bisect.bisect_left(self._pod_keys, key)
            if old is None:
                self._tick += 1
                self._pod_order[key] = self._tick
                self._pod_keys.insert(at, key)
                self._pod_values.insert(at, pod)
            else:
                self._pod_values[at] = pod
            self.pods[key] = pod
            if pod.node_name:
                self._unbound.pop(key, None)
            else:
                self._unbound[key] = pod
        bound = False
        moved = self._pods_moved
        if old is not None and old.node_name:
            bound = True
            on_node = self._bound[old.node_name]
            del on_node[key]
            if not on_node:
                del self._bound[old.node_name]
            self._bound_sorted.pop(old.node_name, None)
            if moved is not None:
                moved.add(old.node_name)
        if not deleted and pod.node_name:
            bound = True
            self._bound.setdefault(pod.node_name, {})[key] = pod
            self._bound_sorted.pop(pod.node_name, None)
            if moved is not None:
                moved.add(pod.node_name)
        self._changed("pods", state=bound, key=key)  # a pending pod is in no StateNode

    def _put_node(self, name: str, node: Node, deleted: bool) -> None:
        old = self.nodes.get(name)
        if old is not None and old.provider_id:
            names = self._nodes_by_provider[old.provider_id]
            names.discard(name)
            if not names:
                del self._nodes_by_provider[old.provider_id]
        if deleted:
            if old is None:
                return
            del self.nodes[name]
            self._node_names = None
        else:
            if old is None:
                self._node_names = None
            self.nodes[name] = node
            if node.provider_id:
                self._nodes_by_provider.setdefault(node.provider_id, set()).add(name)
        self._mark_deleting("nodes", name, not deleted and node.deleting)
        same_join = not deleted and old is not None and old.provider_id == node.provider_id
        if same_join and self._pods_moved is not None:
            self._nodes_changed.add(name)  # only its StateNode changes
        else:
            self._pods_moved = None
        self._changed("nodes", state=True)

    def _put_claim(self, name: str, claim: NodeClaim, deleted: bool) -> None:
        old = self.claims.get(name)
        if old is not None:
            index, at = (
                (self._by_provider, old.provider_id) if old.provider_id else (self._unlaunched, old.node_name)
            )
            names = index[at]
            names.discard(name)
            if not names:
                del index[at]
        if deleted:
            if old is None:
                return
            del self.claims[name]
            del self._claim_order[name]
            self._claim_names = None
        else:
            if old is None:
                self._tick += 1
                self._claim_order[name] = self._tick
                self._claim_names = None
            self.claims[name] = claim
            index, at = (
                (self._by_provider, claim.provider_id)
                if claim.provider_id
                else (self._unlaunched, claim.node_name)
            )
            index.setdefault(at, set()).add(name)
        self._mark_deleting("claims", name, not deleted and claim.deleting)
        if (
            not deleted
            and old is not None
            and old.provider_id == claim.provider_id
            and old.node_name == claim.node_name
            and self._pods_moved is not None
        ):
            self._claims_changed.add(name)  # the same joins: only the StateNodes holding it change
        else:
            self._pods_moved = None
        self._changed("claims", state=True, key=name)

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
        value = max(until, self.nominations.get(name, 0.0))
        if self.nominations.get(name) != value:
            self.nominations[name] = value
            self._noms_changed.add(name)  # only the StateNodes holding the name change
            self._changed("nominations", state=True)

    def mark_for_deletion(self, *names: str) -> None:
        if not self.marked_for_deletion.issuperset(names):
            self.marked_for_deletion.update(names)
            self._marks_changed.update(names)  # only the StateNodes holding these names change
            self._changed("marked_for_deletion", state=True)

    def unmark_for_deletion(self, *names: str) -> None:
        if not self.marked_for_deletion.isdisjoint(names):
            self.marked_for_deletion.difference_update(names)
            self._marks_changed.update(names)
            self._changed("marked_for_deletion", state=True)

    # -- queries -------------------------------------------------------------------------
    def pods_on(self, node_name: str) -> list[Pod]:
        """The pods bound to ``node_name``, in the order of ``pods``."""
        if not node_name:
            return [p for p in self.pods.values() if p.node_name == node_name]
        bound = self._bound.get(node_name)
        if not bound:
            return []
        order = self._pod_order
        return sorted(bound.values(), key=lambda p: order[p.key])

    def unbound_pods(self) -> Iterable[Pod]:
        """The pods without a node, in no particular order."""
        return self._unbound.values()

    def node_names(self) -> tuple[str, ...]:
        """The names of ``nodes``, sorted: one tuple, the same until a Node comes or goes."""
        if self._node_names is None:
            self._node_names = tuple(sorted(self.nodes))
        return self._node_names

    def claim_names(self) -> tuple[str, ...]:
        """The names of ``claims``, sorted: one tuple, the same until a NodeClaim comes or goes."""
        if self._claim_names is None:
            self._claim_names = tuple(sorted(self.claims))
        return self._claim_names

    def claims_in_order(self) -> tuple[NodeClaim, ...]:
        """The NodeClaims in the order of :meth:`claim_names`: one tuple while ``claims`` is unchanged
        (compare it with an earlier one by identity, entry by entry, to find the claims replaced)."""
        return self._sorted_values("claims", self.claims, "claims-in-order", self.claim_names)

    def deleting_node_names(self) -> tuple[str, ...]:
        """The names of the Nodes being deleted, sorted: one tuple, the same until that set changes."""
        return self._deleting_sorted("nodes")

    def deleting_claim_names(self) -> tuple[str, ...]:
        """The names of the NodeClaims being deleted, sorted: one tuple, the same until that set
        changes."""
        return self._deleting_sorted("claims")

    def _deleting_sorted(self, store: str) -> tuple[str, ...]:
        found = self._deleting_names.get(store)
        if found is None:
            found = self._deleting_names[store] = tuple(sorted(self._deleting[store]))
        return found

    def _mark_deleting(self, store: str, name: str, deleting: bool) -> None:
        names = self._deleting[store]
        if deleting != (name in names):
            if deleting:
                names.add(name)
            else:
                names.discard(name)
            self._deleting_names.pop(store, None)

    def nodes_with_provider(self, provider_id: str) -> list[Node]:
        """The Nodes with this providerID (none for ""), in the order of ``nodes``."""
        names = self._nodes_by_provider.get(provider_id) if provider_id else None
        if not names:
            return []
        if len(names) == 1:
            (name,) = names
            return [self.nodes[name]]
        return [node for name, node in self.nodes.items() if name in names]

    def node_for_provider(self, provider_id: str) -> Node | None:
        """The first Node (by name) with this providerID, or None."""
        return min(self.nodes_with_provider(provider_id), key=lambda n: n.name, default=None)

    def claim_for_provider(self, provider_id: str, *, last: bool = False) -> NodeClaim | None:
        """The first NodeClaim (in the order of ``claims``) with this providerID (none for "");
        ``last``: the last one, the claim :meth:`state_nodes` joins a Node with."""
        return self._pick(self._by_provider.get(provider_id), last=last) if provider_id else None

    def claim_for_node(self, node: Node, *, last: bool = False) -> NodeClaim | None:
        """The first NodeClaim (in the order of ``claims``) with the Node's providerID; ``last``:
        the last one, the claim :meth:`state_nodes` joins the Node with."""
        return self.claim_for_provider(node.provider_id, last=last)

    def _pick(self, names: set[str] | None, *, last: bool) -> NodeClaim | None:
        """The first (or last) of ``names`` in the order of ``claims``."""
        if not names:
            return None
        if len(names) == 1:
            (name,) = names
        elif last:
            name = max(names, key=self._claim_order.__getitem__)
        else:
            name = min(names, key=self._claim_order.__getitem__)
        return self.claims[name]

    def _bound_pods(self, node_name: str) -> tuple[Pod, ...]:
        """The pods bound to ``node_name``, sorted by key (one cached tuple until they change)."""
        pods = self._bound_sorted.get(node_name)
        if pods is None:
            bound = self._bound.get(node_name)
            if not bound:
                return ()
            pods = tuple(bound[k] for k in sorted(bound))
            self._bound_sorted[node_name] = pods
        return pods

    def _sorted_values(
        self,
        store: str,
        values: dict[str, Any],
        name: str = "",
        keys: Callable[[], Iterable[str]] | None = None,
    ) -> tuple[Any, ...]:
        """``values`` by key (``keys()``: the sorted keys, when at hand), one cached tuple (under
        ``name``, default the store's) while the store is unchanged."""
        name = name or store
        version = self._store_versions.get(store, 0)
        cached = self._sorted.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        if name == "pods":
            out = tuple(self._pod_values)  # (kept in key order by ``_put_pod``)
        else:
            out = tuple(map(values.__getitem__, sorted(values) if keys is None else keys()))
        self._sorted[name] = (version, out)
        return out

    def snapshot(self, now: float) -> Snapshot:
        pools: tuple[NodePool, ...] = self._sorted_values("node_pools", self.node_pools)
        return Snapshot(
            now=now,
            nodes=self.state_nodes(now),
            pods=self._sorted_values("pods", self.pods),
            node_pools=pools,
            instance_types={p.name: self._pool_types(p) for p in pools},
            daemonsets=self._sorted_values("daemonsets", self.daemonsets),
            pdbs=self._sorted_values("pdbs", self.pdbs),
            rollouts=self._sorted_values("rollouts", self.rollouts),
            unbound=self._sorted_values("pods", self._unbound, "unbound"),  # (a part of pods)
            namespaces=dict(self.namespaces),
            well_known=self.well_known,
            settings=self.settings,
            storage=self.storage_view(),
        )

    def storage_view(self) -> volumes_mod.Storage:
        """The storage objects as one :class:`~karpy.model.volumes.Storage`, the same object while
        none of them changed."""
        version = (self._store_versions.get("storage", 0), self.storage_complete)
        cached = self._storage_cache
        if cached is not None and cached[0] == version:
            return cached[1]
        kinds = self.storage
        view = volumes_mod.Storage(
            claims=dict(kinds.get("PersistentVolumeClaim", {})),
            volumes=dict(kinds.get("PersistentVolume", {})),
            classes=dict(kinds.get("StorageClass", {})),
            csi_nodes=dict(kinds.get("CSINode", {})),
            complete=self.storage_complete,
        )
        self._storage_cache = (version, view)
        return view
