"""What a pod's volumes mean for where it can go: topology, usability and attach limits.

:func:`resolve` reads a pod's claim-backed volumes (``persistentVolumeClaim``, and generic
ephemeral volumes, whose claim is ``<pod>-<volume>``) against the snapshot's
:class:`~karpy.model.volumes.Storage`, as upstream's ``VolumeTopology`` and ``VolumeUsage`` do:

- **problem** (a pending pod only): the claim, its bound PersistentVolume or the StorageClass
  of an unbound claim is missing or being deleted, the claim is ``Lost``, it names a volume
  without the ``pv.kubernetes.io/bind-completed`` annotation, or it is unbound with no class or
  with an ``Immediate`` class (it waits for its volume). The solver refuses such a pod (a
  validation error), as upstream's provisioner ignores it.
- **requirements**: a bound volume's first required ``nodeAffinity`` term (a local or hostPath
  volume's hostname requirement left out), or an unbound claim's StorageClass's first
  ``allowedTopologies`` term; all volumes' ANDed. They narrow the node requirements (the claim's
  or the node's), never the pod's own (topology spread counts are not affected). A bound pod's
  ephemeral volumes add none (a moved pod gets a new claim).
- **attach**: per CSI driver, the claims (``namespace/name``) it attaches: the bound volume's
  driver (``spec.csi.driver``, an in-tree EBS volume's migrated one), else the class's
  provisioner (in-tree names translated). Counted once per claim, so pods sharing a claim count
  it once (:func:`attached`, :func:`over_limit`).

A kind of storage object of which the snapshot holds none is taken as not watched: its checks
are skipped (``Storage.knows``), so a cluster without PVC watches schedules as before. A claim
without ``storageClassName`` takes the default class (:meth:`Storage.default_class`), as the API
server's admission sets it. Pure; called by the solver (:mod:`karpy.core.scheduling.scheduler`)
and by existing nodes and claims being packed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from karpy.model import labels
from karpy.model.catalog import InstanceType
from karpy.model.objects import Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.volumes import (
    IMMEDIATE,
    PersistentVolume,
    PersistentVolumeClaim,
    PodVolume,
    Storage,
    StorageClass,
    csi_driver,
)

__all__ = [
    "Attached",
    "PodVolumes",
    "VolumeContext",
    "attached",
    "conflict",
    "limit_message",
    "merged",
    "over_limit",
    "problem_of",
    "resolve",
]

Attached = Mapping[str, frozenset[str]]  # CSI driver -> the claims (namespace/name) it attaches


@dataclass(frozen=True, slots=True)
class PodVolumes:
    """What a pod's volumes ask of a place (see the module doc)."""

    requirements: Requirements | None = None
    sources: tuple[str, ...] = ()  # where the requirements come from ("PersistentVolume pv-1")
    attach: Attached = field(default_factory=dict)
    problem: str = ""
    # the storage and limits they were read against (an existing node counts its usage with it)
    context: VolumeContext | None = field(default=None, compare=False, repr=False)


@dataclass(slots=True)
class _Volume:
    """One volume resolved: its requirements, their source, its driver and claim, or a problem."""

    requirements: tuple[Requirement, ...] = ()
    source: str = ""
    driver: str = ""
    claim: str = ""
    problem: str = ""


def resolve(pod: Pod, storage: Storage, context: VolumeContext | None = None) -> PodVolumes | None:
    """The pod's volumes against ``storage`` (``context``: the one they are read in); None when it
    has no claim-backed volume (most pods) or the snapshot holds no claims (not watched)."""
    if not pod.volumes or not storage.knows("PersistentVolumeClaim"):
        return None
    reqs: list[Requirement] = []
    sources: list[str] = []
    attach: dict[str, set[str]] = {}
    for volume in pod.volumes:
        one = _resolve_one(pod, volume, storage)
        if one.problem:
            if not pod.node_name:
                return PodVolumes(problem=f'volume "{volume.name}": {one.problem}', context=context)
            continue  # a bound pod being moved: what is known of its other volumes still counts
        if one.requirements:
            reqs.extend(one.requirements)
            sources.append(one.source)
        if one.driver:
            attach.setdefault(one.driver, set()).add(one.claim)
    return PodVolumes(
        Requirements(reqs) if reqs else None,
        tuple(sources),
        {driver: frozenset(claims) for driver, claims in sorted(attach.items())},
        context=context,
    )


def problem_of(found: PodVolumes | None) -> str | None:
    """Why the pod cannot be provisioned for because of its volumes, or None."""
    return found.problem if found is not None and found.problem else None


def _claim_of(pod: Pod, volume: PodVolume, storage: Storage) -> tuple[PersistentVolumeClaim | None, str]:
    """The volume's claim (an ephemeral volume's as its controller creates it) and its key."""
    name = f"{pod.name}-{volume.name}" if volume.ephemeral else volume.claim
    key = f"{pod.namespace}/{name}"
    found = storage.claims.get(key)
    if found is None and volume.ephemeral:
        found = PersistentVolumeClaim(pod.namespace, name, storage_class=volume.storage_class)
    return found, key


def _resolve_one(pod: Pod, volume: PodVolume, storage: Storage) -> _Volume:
    claim, key = _claim_of(pod, volume, storage)
    if claim is None:
        return _Volume(problem=f"PersistentVolumeClaim {key} not found")
    if claim.deleting:
        return _Volume(problem=f"PersistentVolumeClaim {key} is being deleted")
    if claim.phase == "Lost":
        return _Volume(problem=f"PersistentVolumeClaim {key} is Lost (its PersistentVolume is gone)")
    if claim.volume_name:
        return _bound(pod, volume, claim, storage)
    class_name = storage.class_name(claim)
    if not class_name:
        return _Volume(problem=f"PersistentVolumeClaim {key} is unbound and names no StorageClass")
    sc = storage.classes.get(class_name)
    if sc is None:
        if storage.knows("StorageClass"):
            return _Volume(problem=f"StorageClass {class_name} of PersistentVolumeClaim {key} not found")
        return _Volume()
    if sc.binding_mode == IMMEDIATE:
        return _Volume(
            problem=f"PersistentVolumeClaim {key} is unbound and its StorageClass {sc.name} binds "
            "Immediately: the pod waits for its PersistentVolume"
        )
    return _unbound(sc, key)


def _unbound(sc: StorageClass, key: str) -> _Volume:
    """A WaitForFirstConsumer claim: its class's first allowed topology and its provisioner."""
    reqs = sc.allowed_topologies[0] if sc.allowed_topologies else ()
    return _Volume(reqs, f"StorageClass {sc.name}", csi_driver(sc.provisioner), key)


def _bound(pod: Pod, volume: PodVolume, claim: PersistentVolumeClaim, storage: Storage) -> _Volume:
    key, name = claim.key, claim.volume_name
    if not claim.bind_completed:
        return _Volume(
            problem=f"PersistentVolumeClaim {key} names PersistentVolume {name} but is not bound yet "
            "(no pv.kubernetes.io/bind-completed annotation)"
        )
    pv = storage.volumes.get(name)
    if pv is None:
        if storage.knows("PersistentVolume"):
            return _Volume(problem=f"PersistentVolume {name} of PersistentVolumeClaim {key} not found")
        return _Volume()
    if pv.deleting:
        return _Volume(problem=f"PersistentVolume {name} of PersistentVolumeClaim {key} is being deleted")
    moved_ephemeral = volume.ephemeral and bool(pod.node_name)  # a moved pod gets a new claim
    reqs = () if moved_ephemeral else _volume_requirements(pv)
    return _Volume(reqs, f"PersistentVolume {name}", pv.driver, key)


def _volume_requirements(pv: PersistentVolume) -> tuple[Requirement, ...]:
    """The volume's first node-affinity term; a local or hostPath volume's hostname is left out
    (a pod moving to a new node cannot take that node along)."""
    if not pv.node_affinity:
        return ()
    term = pv.node_affinity[0]
    if pv.local:
        term = tuple(r for r in term if r.key != labels.HOSTNAME)
    return term


def conflict(found: PodVolumes, reqs: Requirements, allow_undefined: frozenset[str] = frozenset()) -> str:
    """The message of a place whose requirements ``reqs`` rule out the volumes' topology."""
    assert found.requirements is not None
    why = "; ".join(reqs.compatible(found.requirements, allow_undefined))
    return f"volume topology ({', '.join(found.sources)}) conflicts: {why}"


def limit_message(over: tuple[str, int, int], where: str) -> str:
    """The message of a place the volumes would take past its attach limit (``where``: who limits)."""
    driver, count, limit = over
    return f"volume attach limit: {count} volumes of {driver} would be attached; {where} allows {limit}"


def merged(base: Attached, extra: Attached) -> dict[str, frozenset[str]]:
    """The claims of both, per driver."""
    out = dict(base)
    for driver, claims in extra.items():
        have = out.get(driver)
        out[driver] = claims if have is None else have | claims
    return out


def attached(pods: Iterable[Pod], storage: Storage) -> dict[str, frozenset[str]]:
    """The claims the running (non-terminal) ``pods`` attach, per driver: a node's usage."""
    out: dict[str, frozenset[str]] = {}
    for pod in pods:
        if not pod.volumes or pod.is_terminal():
            continue
        found = resolve(pod, storage)
        if found is not None and found.attach:
            out = merged(out, found.attach)
    return out


def over_limit(used: Attached, adding: Attached, limits: Mapping[str, int]) -> tuple[str, int, int] | None:
    """(driver, volumes it would attach, its limit) for the first driver over its limit once
    ``adding`` joins ``used``; None when every driver stays within (a driver without a limit has
    none)."""
    for driver, claims in adding.items():
        limit = limits.get(driver)
        if limit is None:
            continue
        have = used.get(driver)
        count = len(claims) if have is None else len(have | claims)
        if count > limit:
            return driver, count, limit
    return None


class VolumeContext:
    """The storage and the per-type attach limits of one solve: an existing node's limits are its
    CSINode's, else (no CSINode yet: an in-flight node) its instance type's from the catalog."""

    __slots__ = ("_types", "storage", "types")

    def __init__(self, storage: Storage, types: Mapping[str, tuple[InstanceType, ...]]) -> None:
        self.storage = storage
        self.types = types
        self._types: dict[str, Mapping[str, int]] | None = None

    def resolve(self, pod: Pod) -> PodVolumes | None:
        """:func:`resolve` against this solve's storage, remembering the context."""
        return resolve(pod, self.storage, self)

    def limits(self, node_name: str, node_labels: Mapping[str, str]) -> Mapping[str, int]:
        csi = self.storage.csi_nodes.get(node_name)
        if csi is not None:
            return csi.limits
        if self._types is None:
            self._types = {it.name: it.volume_limits for its in self.types.values() for it in its}
        return self._types.get(node_labels.get(labels.INSTANCE_TYPE, ""), {})
