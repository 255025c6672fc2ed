"""``storage.k8s.io/v1`` StorageClass and CSINode schemas, and the storage converters.

The converters turn the four storage kinds (PersistentVolumeClaim and PersistentVolume from
:mod:`karpy.api.core_v1`, StorageClass and CSINode from here) and a pod's claim-backed volumes
into the values of :mod:`karpy.model.volumes`. Registered with :mod:`karpy.api.load`, so the
kinds load from files, snapshot folders and the operator's watches alike;
:func:`pod_volumes` is called by :mod:`karpy.api.convert` for every pod spec.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from karpy.api import common, core_v1
from karpy.model import volumes
from karpy.model.requirements import Requirement

__all__ = [
    "CSINode",
    "StorageClass",
    "csi_node",
    "persistent_volume",
    "persistent_volume_claim",
    "pod_volumes",
    "storage_class",
]


class TopologySelectorLabelRequirement(common.K8sModel):
    key: Annotated[str, Field(min_length=1)]
    values: Annotated[list[str], Field(min_length=1)]


class TopologySelectorTerm(common.K8sModel):
    match_label_expressions: list[TopologySelectorLabelRequirement] = Field(default_factory=list)


class StorageClass(common.K8sModel):
    api_version: Literal["storage.k8s.io/v1"] = "storage.k8s.io/v1"
    kind: Literal["StorageClass"] = "StorageClass"
    metadata: common.ObjectMeta = common.ObjectMeta()
    provisioner: Annotated[str, Field(min_length=1)]
    volume_binding_mode: Annotated[str, common.one_of(volumes.IMMEDIATE, volumes.WAIT_FOR_FIRST_CONSUMER)] = (
        volumes.IMMEDIATE
    )
    allowed_topologies: list[TopologySelectorTerm] = Field(default_factory=list)
    parameters: dict[str, str] = Field(default_factory=dict)
    reclaim_policy: str = ""
    mount_options: list[str] = Field(default_factory=list)
    allow_volume_expansion: bool | None = None


class VolumeNodeResources(common.K8sModel):
    count: Annotated[int | None, common.at_least(0)] = None


class CSINodeDriver(common.K8sModel):
    name: Annotated[str, Field(min_length=1)]
    node_id: str = Field("", alias="nodeID")
    topology_keys: list[str] = Field(default_factory=list)
    allocatable: VolumeNodeResources | None = None


class CSINodeSpec(common.K8sModel):
    drivers: list[CSINodeDriver] = Field(default_factory=list)


class CSINode(common.K8sModel):
    api_version: Literal["storage.k8s.io/v1"] = "storage.k8s.io/v1"
    kind: Literal["CSINode"] = "CSINode"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: CSINodeSpec = Field(default_factory=CSINodeSpec)


def _namespace(meta: common.ObjectMeta) -> str:
    return meta.namespace or "default"


def persistent_volume_claim(obj: core_v1.PersistentVolumeClaim) -> volumes.PersistentVolumeClaim:
    meta, spec = obj.metadata, obj.spec
    return volumes.PersistentVolumeClaim(
        namespace=_namespace(meta),
        name=meta.name,
        storage_class=spec.storage_class_name,
        volume_name=spec.volume_name,
        bind_completed=volumes.BIND_COMPLETED in meta.annotations,
        phase=obj.status.phase,
        deleting=meta.deletion_timestamp is not None,
    )


def _terms(selector: core_v1.NodeSelector | None) -> tuple[tuple[Requirement, ...], ...]:
    if selector is None:
        return ()
    return tuple(
        tuple(Requirement.of(r.key, r.operator, r.values) for r in term.match_expressions)
        for term in selector.node_selector_terms
    )


def _source_driver(spec: core_v1.PersistentVolumeSpec) -> str:
    """The CSI driver that attaches the volume: ``spec.csi.driver``, an in-tree EBS volume's
    migrated driver, or "" (not attached by a CSI driver karpy knows: no limit counts it)."""
    if spec.csi is not None:
        return spec.csi.driver
    if spec.aws_elastic_block_store is not None:
        return volumes.EBS_CSI_DRIVER
    return ""


def persistent_volume(obj: core_v1.PersistentVolume) -> volumes.PersistentVolume:
    spec = obj.spec
    affinity = spec.node_affinity.required if spec.node_affinity is not None else None
    return volumes.PersistentVolume(
        name=obj.metadata.name,
        driver=_source_driver(spec),
        node_affinity=_terms(affinity),
        local=spec.local is not None or spec.host_path is not None,
        storage_class=spec.storage_class_name,
        deleting=obj.metadata.deletion_timestamp is not None,
    )


def storage_class(obj: StorageClass) -> volumes.StorageClass:
    meta = obj.metadata
    return volumes.StorageClass(
        name=meta.name,
        provisioner=obj.provisioner,
        binding_mode=obj.volume_binding_mode,
        allowed_topologies=tuple(
            tuple(Requirement.in_(e.key, *e.values) for e in term.match_label_expressions)
            for term in obj.allowed_topologies
        ),
        default=meta.annotations.get(volumes.DEFAULT_CLASS) == "true",
        created=meta.creation_timestamp or 0.0,
    )


def csi_node(obj: CSINode) -> volumes.CSINode:
    limits = {
        d.name: d.allocatable.count
        for d in obj.spec.drivers
        if d.allocatable is not None and d.allocatable.count is not None
    }
    return volumes.CSINode(obj.metadata.name, limits)


def pod_volumes(spec: core_v1.PodSpec) -> tuple[volumes.PodVolume, ...]:
    """The pod's volumes backed by a claim, in spec order (the others do not matter here)."""
    out: list[volumes.PodVolume] = []
    for volume in spec.volumes:
        assert isinstance(volume, core_v1.Volume)  # (PodSpec's validator parsed them)
        if volume.persistent_volume_claim is not None:
            out.append(volumes.PodVolume(volume.name, claim=volume.persistent_volume_claim.claim_name))
        elif volume.ephemeral is not None:
            template = volume.ephemeral.volume_claim_template.spec
            out.append(
                volumes.PodVolume(volume.name, ephemeral=True, storage_class=template.storage_class_name)
            )
    return tuple(out)
