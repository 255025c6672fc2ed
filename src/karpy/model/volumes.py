"""Storage objects karpy reads for scheduling: PVCs, PVs, StorageClasses, CSINodes, pod volumes.

Frozen values reduced to the fields the volume rules read (:mod:`karpy.core.scheduling.volumes`):
where a pod's volumes may be (a bound PersistentVolume's node affinity, an unbound claim's
StorageClass ``allowedTopologies``), whether they can be used at all (a claim or class that is
missing, an ``Immediate`` claim not bound yet), and which CSI driver attaches them (attach
limits). Built by :mod:`karpy.api.storage_v1`; carried by the snapshot as one :class:`Storage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from karpy.model.requirements import Requirement

__all__ = [
    "BIND_COMPLETED",
    "DEFAULT_CLASS",
    "EBS_CSI_DRIVER",
    "EMPTY_STORAGE",
    "IMMEDIATE",
    "IN_TREE_DRIVERS",
    "STORAGE_KINDS",
    "WAIT_FOR_FIRST_CONSUMER",
    "CSINode",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PodVolume",
    "Storage",
    "StorageClass",
    "csi_driver",
]

EBS_CSI_DRIVER = "ebs.csi.aws.com"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # set by the PV controller once a claim is bound
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
STORAGE_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")

# in-tree volume plugins and the CSI drivers they migrated to (Kubernetes' csi-translation-lib)
IN_TREE_DRIVERS: Mapping[str, str] = {
    "kubernetes.io/aws-ebs": EBS_CSI_DRIVER,
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}


def csi_driver(provisioner: str) -> str:
    """The CSI driver of a StorageClass provisioner (an in-tree plugin name is translated)."""
    return IN_TREE_DRIVERS.get(provisioner, provisioner)


@dataclass(frozen=True, slots=True)
class PodVolume:
    """A pod volume backed by a claim: ``persistentVolumeClaim.claimName``, or a generic ephemeral
    volume (its claim is ``<pod>-<volume>``; ``storage_class`` from its template, None: unset)."""

    name: str
    claim: str = ""
    ephemeral: bool = False
    storage_class: str | None = None


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    storage_class: str | None = None  # None: unset (the default class applies); "": none
    volume_name: str = ""
    bind_completed: bool = False  # the pv.kubernetes.io/bind-completed annotation
    phase: str = ""  # status.phase (Pending | Bound | Lost)
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    driver: str = ""  # spec.csi.driver, or the CSI driver an in-tree source migrated to
    node_affinity: tuple[tuple[Requirement, ...], ...] = ()  # required nodeSelectorTerms (ORed)
    local: bool = False  # a local or hostPath volume: its hostname affinity does not move with a pod
    storage_class: str = ""
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = IMMEDIATE
    allowed_topologies: tuple[tuple[Requirement, ...], ...] = ()  # terms (ORed), each In requirements
    default: bool = False  # annotated storageclass.kubernetes.io/is-default-class: "true"
    created: float = 0.0


@dataclass(frozen=True, slots=True)
class CSINode:
    """A node's CSI drivers with their attach limit (``allocatable.count``; drivers without one
    have no limit and are not listed)."""

    name: str
    limits: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Storage:
    """The storage objects of a snapshot. ``complete``: the set is known to be whole (a scenario,
    a test); otherwise a kind of which nothing was read is taken as not watched, and the rules
    needing it are skipped (see :meth:`knows`)."""

    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)  # by namespace/name
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)
    csi_nodes: Mapping[str, CSINode] = field(default_factory=dict)
    complete: bool = False

    def knows(self, kind: str) -> bool:
        """Whether objects of ``kind`` (one of :data:`STORAGE_KINDS`) were read: a missing one is
        then really missing."""
        if self.complete:
            return True
        found = {
            "PersistentVolumeClaim": self.claims,
            "PersistentVolume": self.volumes,
            "StorageClass": self.classes,
            "CSINode": self.csi_nodes,
        }[kind]
        return bool(found)

    def class_name(self, claim: PersistentVolumeClaim) -> str:
        """The claim's StorageClass name: its own, else (unset) the default class ("" with none)."""
        return claim.storage_class if claim.storage_class is not None else self.default_class()

    def default_class(self) -> str:
        """The default StorageClass's name ("" with none): the newest annotated one, as the API
        server's DefaultStorageClass admission picks (ties: the name)."""
        defaults = [c for c in self.classes.values() if c.default]
        if not defaults:
            return ""
        return max(defaults, key=lambda c: (c.created, c.name)).name


EMPTY_STORAGE = Storage()
