"""The simulator's storage stand-ins: the PV controller, a CSI provisioner and the CSI node plugins.

:class:`Provisioner` keeps the PersistentVolumes of a run, as the pieces of a real cluster do:

- **external-provisioner** (with the PV controller's binding): a claim of a ``WaitForFirstConsumer``
  class is provisioned when the kube-scheduler stand-in binds the first pod that uses it
  (:meth:`Provisioner.prebind`, called by :class:`~karpy.sim.binder.Binder` just before the
  binding, as kube-scheduler's VolumeBinding PreBind waits for it): a PersistentVolume whose node
  affinity is the node's value of each key of the class's first ``allowedTopologies`` term, else
  its ``topology.kubernetes.io/zone``. A claim of an ``Immediate`` class is provisioned as soon as
  it exists (a loop task woken by the claim's event), in a zone drawn with the run's seeded rng
  from the zones its ``allowedTopologies`` allow, else from the catalog's zones. The volume is a
  CSI volume of the class's provisioner (an in-tree name translated, as
  :func:`karpy.model.volumes.csi_driver` does); ``efs.csi.aws.com`` volumes are regional (no node
  affinity). The claim is then bound: ``spec.volumeName``, the ``pv.kubernetes.io/bind-completed``
  annotation, phase ``Bound``. A claim that names a volume which exists (a scenario's pre-bound
  claim) is bound to it.
- **PV controller reclaim**: a deleted claim's volume is deleted when its reclaim policy is
  ``Delete`` (the default of a class), else marked ``Released``.
- **CSI node plugins**: every Node gets a CSINode listing the drivers its instance type has an
  attach limit for (``allocatable.count``, from ``limits_of``: the catalog's EBS limit), deleted
  with the Node, so kube-scheduler's NodeVolumeLimits, the Cluster Autoscaler model and karpy's
  scheduling count the same limit.

:meth:`Provisioner.context` is the :class:`~karpy.core.scheduling.volumes.VolumeContext` of the
current storage objects, which the binder and the Cluster Autoscaler model resolve pods' volumes
with. Every binding of a pod with a bound volume is checked against the volume's node affinity
(``cross_zone_bindings``, which must stay 0); :meth:`Provisioner.figures` is the ``volumes`` block
of a run's figures. Only a run whose scenario has claims builds it (:mod:`karpy.sim.runner`):
:func:`uses_claims`; :func:`with_default_class` gives such a scenario EKS's ``gp2`` when it names
no StorageClass (:mod:`karpy.sim.scenario`).
"""

from __future__ import annotations

import contextlib
import copy
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from karpy.controllers.result import Result
from karpy.core.scheduling import volumes as volumes_mod
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType
from karpy.model.objects import Node, Pod
from karpy.model.volumes import (
    BIND_COMPLETED,
    DEFAULT_CLASS,
    IMMEDIATE,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    csi_driver,
)
from karpy.model.volumes import Storage as StorageView
from karpy.ports import KubeAPI, RawObject, WatchEvent
from karpy.runtime.loop import Loop
from karpy.sim import predicates
from karpy.sim.metrics import percentiles
from karpy.sim.trace import StatefulSetTrace
from karpy.sim.volume_filter import VolumeFilter
from karpy.state.cluster import Cluster

__all__ = ["DEFAULT_STORAGE_CLASS", "ZONE_KEYS", "Provisioner", "uses_claims", "with_default_class"]

# The class EKS has long shipped as the default (recent versions leave it unmarked for new
# clusters): the simulator adds it to a scenario that has claims and names no StorageClass.
DEFAULT_STORAGE_CLASS: Mapping[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "gp2", "annotations": {DEFAULT_CLASS: "true"}},
    "provisioner": "kubernetes.io/aws-ebs",
    "parameters": {"type": "gp2", "fsType": "ext4"},
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer",
}
ZONE_KEYS = (wk.ZONE, "topology.ebs.csi.aws.com/zone", "failure-domain.beta.kubernetes.io/zone")
_REGIONAL = frozenset({"efs.csi.aws.com"})  # file systems reachable from every zone
_CLAIM = "PersistentVolumeClaim"
_VOLUME = "PersistentVolume"
_CSINODE = "CSINode"


def uses_claims(objects: Iterable[Mapping[str, Any]], statefulsets: Iterable[StatefulSetTrace]) -> bool:
    """Whether a scenario has storage: claim templates, or claims, volumes or classes among its objects."""
    kinds = {_CLAIM, _VOLUME, "StorageClass"}
    return any(s.claims is not None for s in statefulsets) or any(o.get("kind") in kinds for o in objects)


def with_default_class(
    objects: Sequence[Mapping[str, Any]], statefulsets: Sequence[StatefulSetTrace]
) -> tuple[dict[str, Any], ...]:
    """A scenario's ``objects``, with :data:`DEFAULT_STORAGE_CLASS` when it has claims and no class."""
    out = tuple(dict(o) for o in objects)
    if uses_claims(out, statefulsets) and not any(o.get("kind") == "StorageClass" for o in out):
        out += (copy.deepcopy(dict(DEFAULT_STORAGE_CLASS)),)
    return out


def _claim_key(raw: RawObject) -> str:
    meta = raw.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def _affinity(values: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    expressions = [{"key": k, "operator": "In", "values": list(v)} for k, v in values.items()]
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}}


class Provisioner:
    """The PV controller, a CSI provisioner and the CSI node plugins (see the module docstring)."""

    name = "volumes"

    def __init__(
        self,
        kube: KubeAPI,
        cluster: Cluster,
        loop: Loop,
        *,
        rng: random.Random,
        zones: Sequence[str],
        types: Mapping[str, tuple[InstanceType, ...]],
        limits_of: Callable[[Node], Mapping[str, int]],
    ) -> None:
        self._kube, self._cluster, self._loop = kube, cluster, loop
        self._rng = rng
        self._zones = tuple(sorted(set(zones)))
        self._types = types
        self._limits_of = limits_of
        self._context: tuple[StorageView, volumes_mod.VolumeContext] | None = None
        self._unbound: set[str] = set()  # claims (namespace/name) to look at
        self._released: set[str] = set()  # volumes whose claim was deleted
        self._nodes_added: dict[str, str] = {}  # Node name -> uid
        self._nodes_gone: set[str] = set()
        self._bound: dict[str, str] = {}  # pod with claims -> the node it was bound to
        self.claims_created = 0
        self.provisioned: dict[str, int] = {}  # zone ("" regional) -> volumes provisioned
        self.deleted = 0
        self.bindings_checked = 0  # bindings of pods with a bound volume
        self.cross_zone = 0  # of those, to a node outside a volume's node affinity
        loop.add(self.name, lambda: self.reconcile().requeue_after)
        kube.watch(self._on_event)

    # -- what the binder and the CA model read ---------------------------------------------
    def context(self) -> volumes_mod.VolumeContext:
        """The volume rules of the current storage objects (the same object while none changed)."""
        storage = self._cluster.storage_view()  # (the run's cluster holds every storage object)
        cached = self._context
        if cached is None or cached[0] is not storage:
            cached = self._context = (storage, volumes_mod.VolumeContext(storage, self._types))
        return cached[1]

    def prebind(self, pod: Pod, node: Node) -> None:
        """Provision and bind the pod's unbound ``WaitForFirstConsumer`` claims for ``node``."""
        storage = self.context().storage
        for volume in pod.volumes:
            if volume.ephemeral:
                continue  # (no ephemeral-volume controller: its claim is never made)
            claim = storage.claims.get(f"{pod.namespace}/{volume.claim}")
            if claim is None or claim.volume_name or claim.deleting:
                continue
            sc = self._class_of(claim, storage)
            if sc is None or sc.binding_mode == IMMEDIATE:
                continue
            keys = [r.key for r in sc.allowed_topologies[0]] if sc.allowed_topologies else [wk.ZONE]
            topology = {k: [v] for k in keys if (v := predicates.label(node, k)) is not None}
            self._provision(claim, sc, topology, node=node.name)

    # -- the loop task ---------------------------------------------------------------------
    def reconcile(self) -> Result:
        gone, self._nodes_gone = sorted(self._nodes_gone), set()
        for name in gone:  # (first: a Node deleted and made again gets a new CSINode)
            with contextlib.suppress(errors.NotFound):
                self._kube.delete(_CSINODE, name)
        added, self._nodes_added = self._nodes_added, {}
        for name in sorted(added):
            node = self._cluster.nodes.get(name)
            if node is not None:
                self._csi_node(node, added[name])
        released, self._released = sorted(self._released), set()
        for name in released:
            self._reclaim(name)
        unbound, self._unbound = sorted(self._unbound), set()
        storage = self.context().storage
        for key in unbound:
            claim = storage.claims.get(key)
            if claim is None or claim.deleting or claim.bind_completed:
                continue
            if claim.volume_name:
                self._bind_existing(claim)
                continue
            sc = self._class_of(claim, storage)
            if sc is not None and sc.binding_mode == IMMEDIATE:
                self._provision(claim, sc, self._immediate_topology(sc), node="")
        return Result(None)

    def _class_of(self, claim: PersistentVolumeClaim, storage: StorageView) -> StorageClass | None:
        name = storage.class_name(claim)
        return storage.classes.get(name) if name else None

    def _immediate_topology(self, sc: StorageClass) -> dict[str, list[str]]:
        """Where an Immediate claim's volume goes: a zone drawn from what its class allows."""
        term = sc.allowed_topologies[0] if sc.allowed_topologies else ()
        zones = sorted({v for r in term if r.key in ZONE_KEYS for v in r.values})
        zone = self._rng.choice(zones or list(self._zones)) if (zones or self._zones) else ""
        topology = {r.key: [zone] if r.key in ZONE_KEYS else sorted(r.values) for r in term}
        if not term and zone:
            topology[wk.ZONE] = [zone]
        return topology

    # -- writes ----------------------------------------------------------------------------
    def _provision(
        self, claim: PersistentVolumeClaim, sc: StorageClass, topology: Mapping[str, list[str]], *, node: str
    ) -> None:
        try:
            raw = self._kube.get(_CLAIM, claim.name, claim.namespace)
            sc_raw = self._kube.get("StorageClass", sc.name)
        except errors.NotFound:
            return
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        driver = csi_driver(sc.provisioner)
        tag = uuid.uuid5(uuid.NAMESPACE_URL, f"karpy-sim:pv/{claim.key}/{meta.get('uid', '')}")
        name = f"pvc-{tag}"
        size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        zone = next((topology[k][0] for k in ZONE_KEYS if k in topology), "")
        pv_spec: dict[str, Any] = {
            "capacity": {"storage": size},
            "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": sc_raw.get("reclaimPolicy") or "Delete",
            "storageClassName": sc.name,
            "csi": {"driver": driver, "volumeHandle": f"vol-{tag.hex[:17]}", "fsType": "ext4"},
            "claimRef": {
                "kind": _CLAIM,
                "namespace": claim.namespace,
                "name": claim.name,
                "uid": meta.get("uid", ""),
            },
        }
        if topology and driver not in _REGIONAL:
            pv_spec["nodeAffinity"] = _affinity(topology)
        else:
            zone = ""
        volume: RawObject = {
            "apiVersion": "v1",
            "kind": _VOLUME,
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": driver}},
            "spec": pv_spec,
            "status": {"phase": "Bound"},
        }
        with contextlib.suppress(errors.AlreadyExists):
            self._kube.create(volume)
            self.provisioned[zone] = self.provisioned.get(zone, 0) + 1
        annotations = {
            BIND_COMPLETED: "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.kubernetes.io/storage-provisioner": sc.provisioner,
        }
        if node:
            annotations["volume.kubernetes.io/selected-node"] = node
        self._bind(claim, name, annotations, size)

    def _bind(
        self, claim: PersistentVolumeClaim, volume: str, annotations: Mapping[str, str], size: Any
    ) -> None:
        patch = {
            "metadata": {"annotations": dict(annotations)},
            "spec": {"volumeName": volume},
            "status": {"phase": "Bound", "capacity": {"storage": size}},
        }
        with contextlib.suppress(errors.NotFound):
            self._kube.patch(_CLAIM, claim.name, patch, claim.namespace)

    def _bind_existing(self, claim: PersistentVolumeClaim) -> None:
        """A claim naming a volume (pre-bound by the scenario): bound once the volume exists."""
        try:
            pv = self._kube.get(_VOLUME, claim.volume_name)
        except errors.NotFound:
            return
        ref = {"kind": _CLAIM, "namespace": claim.namespace, "name": claim.name}
        with contextlib.suppress(errors.NotFound):
            self._kube.patch(
                _VOLUME, claim.volume_name, {"spec": {"claimRef": ref}, "status": {"phase": "Bound"}}
            )
        size = ((pv.get("spec") or {}).get("capacity") or {}).get("storage", "1Gi")
        self._bind(claim, claim.volume_name, {BIND_COMPLETED: "yes"}, size)

    def _reclaim(self, name: str) -> None:
        try:
            pv = self._kube.get(_VOLUME, name)
        except errors.NotFound:
            return
        if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete":
            with contextlib.suppress(errors.NotFound):
                self._kube.delete(_VOLUME, name)
                self.deleted += 1
        else:
            with contextlib.suppress(errors.NotFound):
                self._kube.patch(_VOLUME, name, {"status": {"phase": "Released"}})

    def _csi_node(self, node: Node, uid: str) -> None:
        limits = self._limits_of(node)
        if not limits:
            return
        drivers = [
            {"name": d, "nodeID": node.name, "topologyKeys": [wk.ZONE], "allocatable": {"count": n}}
            for d, n in sorted(limits.items())
        ]
        owner = {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": uid}
        body: RawObject = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": _CSINODE,
            "metadata": {"name": node.name, "ownerReferences": [owner]},
            "spec": {"drivers": drivers},
        }
        with contextlib.suppress(errors.AlreadyExists):
            self._kube.create(body)

    # -- watch -----------------------------------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        kind, obj = event.kind, event.obj
        meta = obj.get("metadata") or {}
        if kind == _CLAIM:
            spec = obj.get("spec") or {}
            if event.type == "DELETED":
                if spec.get("volumeName"):
                    self._released.add(spec["volumeName"])
                    self._loop.wake(self.name)
                return
            if event.type == "ADDED":
                self.claims_created += 1
            if BIND_COMPLETED not in (meta.get("annotations") or {}):
                self._unbound.add(_claim_key(obj))
                self._loop.wake(self.name)
        elif kind == "Node":
            name = meta.get("name", "")
            if event.type == "ADDED":
                self._nodes_added[name] = meta.get("uid", "")
            elif event.type == "DELETED":
                self._nodes_added.pop(name, None)
                self._nodes_gone.add(name)
            else:
                return
            self._loop.wake(self.name)
        elif kind == "Pod":
            self._check_binding(event)

    def _check_binding(self, event: WatchEvent) -> None:
        """Count a pod bound to a node outside one of its bound volumes' node affinity."""
        meta = event.obj.get("metadata") or {}
        key = _claim_key(event.obj)
        if event.type == "DELETED":
            self._bound.pop(key, None)
            return
        spec = event.obj.get("spec") or {}
        node_name = spec.get("nodeName") or ""
        if not node_name or self._bound.get(key) == node_name:
            return
        claims = [
            (v.get("persistentVolumeClaim") or {}).get("claimName", "")
            for v in spec.get("volumes") or []
            if v.get("persistentVolumeClaim")
        ]
        node = self._cluster.nodes.get(node_name)
        if not claims or node is None:
            return
        self._bound[key] = node_name
        storage = self.context().storage
        namespace = meta.get("namespace") or "default"
        pvs = [storage.claims.get(f"{namespace}/{c}") for c in claims]
        found = [storage.volumes.get(c.volume_name) for c in pvs if c is not None and c.volume_name]
        pinned = [pv for pv in found if pv is not None and pv.node_affinity]
        if pinned:
            self.bindings_checked += 1
            if not all(_admits(pv, node) for pv in pinned):
                self.cross_zone += 1

    # -- figures ---------------------------------------------------------------------------
    def figures(self, seen: VolumeFilter) -> dict[str, Any]:
        """The ``volumes`` block of a run's figures (docs/simulation.md), with what the binder's
        volume filter saw."""
        waits = seen.waits
        return {
            "claims_created": self.claims_created,
            "volumes_provisioned": sum(self.provisioned.values()),
            "volumes_by_zone": {z or "regional": n for z, n in sorted(self.provisioned.items())},
            "volumes_deleted": self.deleted,
            "pinned_pods_bound": len(seen.pinned),
            "pinned_pending_seconds": percentiles([b.latency for b in seen.pinned]),
            "pods_waited_for_volume_zone": len(waits.get(predicates.VOLUME_TOPOLOGY, ())),
            "pods_waited_for_attach_limit": len(waits.get(predicates.VOLUME_LIMIT, ())),
            "pods_waited_for_claims": len(waits.get(predicates.VOLUME, ())),
            "cross_zone_bindings": self.cross_zone,
        }


def _admits(pv: PersistentVolume, node: Node) -> bool:
    """Whether ``node`` is in one of the volume's node-affinity terms."""
    return any(all(predicates.requirement_ok(r, node) for r in term) for term in pv.node_affinity)
