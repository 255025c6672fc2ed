"""``v1`` Pod, Node, Namespace, PersistentVolumeClaim and PersistentVolume schemas.

Pods carry what scheduling needs (requests and limits of containers, sidecar and
init containers, overhead, host ports, node selector, node and pod (anti-)affinity,
tolerations, topology spread, scheduling gates); Nodes their labels, taints,
capacity, allocatable and conditions. Validated by :mod:`karpy.api.load`, turned into
model objects by :mod:`karpy.api.convert`; :mod:`karpy.api.apps_v1` reuses
:class:`PodTemplateSpec`. A pod's ``volumes`` are read for the ones backed by a claim
(``persistentVolumeClaim``, ``ephemeral``); claims and volumes declare every upstream field (so
none is reported unknown) and read those the volume rules use; :mod:`karpy.api.storage_v1`
converts them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic
from pydantic import Field, field_validator, model_validator

from karpy.api import common

__all__ = [
    "Affinity",
    "Container",
    "ContainerPort",
    "Namespace",
    "Node",
    "NodeAffinity",
    "NodeSelector",
    "NodeSelectorTerm",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PersistentVolumeClaimSpec",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodSpec",
    "PodTemplateSpec",
    "PreferredSchedulingTerm",
    "ResourceRequirements",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
]

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


class ContainerPort(common.K8sModel):
    container_port: int = 0
    host_port: Annotated[int, common.between(0, 65535)] = 0
    host_ip: str = Field("", alias="hostIP")
    protocol: Annotated[str, common.one_of("TCP", "UDP", "SCTP")] = "TCP"


class ResourceRequirements(common.K8sModel):
    requests: common.ResourceList = Field(default_factory=dict)
    limits: common.ResourceList = Field(default_factory=dict)


class Container(common.K8sModel):
    name: str = ""
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = Field(default_factory=list)
    restart_policy: str = ""  # "Always" on an init container makes it a sidecar


class NodeSelectorTerm(common.K8sModel):
    match_expressions: list[common.NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[common.NodeSelectorRequirement] = Field(default_factory=list)

    @model_validator(mode="after")
    def _fields_are_names(self) -> NodeSelectorTerm:
        for i, field in enumerate(self.match_fields):
            if field.key != "metadata.name":
                raise common.FieldError(
                    ("matchFields", i, "key"), f'"{field.key}" is not supported (only metadata.name)'
                )
        return self


class NodeSelector(common.K8sModel):
    node_selector_terms: Annotated[list[NodeSelectorTerm], Field(min_length=1)]


class PreferredSchedulingTerm(common.K8sModel):
    weight: Annotated[int, common.between(1, 100)]
    preference: NodeSelectorTerm


class NodeAffinity(common.K8sModel):
    required: NodeSelector | None = Field(None, alias=_REQUIRED)
    preferred: list[PreferredSchedulingTerm] = Field([], alias=_PREFERRED)


class PodAffinityTerm(common.K8sModel):
    label_selector: common.LabelSelector | None = None
    namespaces: list[str] = Field(default_factory=list)
    namespace_selector: common.LabelSelector | None = None
    topology_key: Annotated[str, Field(min_length=1)]
    match_label_keys: list[str] = Field(default_factory=list)
    mismatch_label_keys: list[str] = Field(default_factory=list)


class WeightedPodAffinityTerm(common.K8sModel):
    weight: Annotated[int, common.between(1, 100)]
    pod_affinity_term: PodAffinityTerm


class PodAffinity(common.K8sModel):
    """Used for both ``podAffinity`` and ``podAntiAffinity``."""

    required: list[PodAffinityTerm] = Field([], alias=_REQUIRED)
    preferred: list[WeightedPodAffinityTerm] = Field([], alias=_PREFERRED)


class Affinity(common.K8sModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(common.K8sModel):
    max_skew: Annotated[int, common.at_least(1)]
    topology_key: Annotated[str, Field(min_length=1)]
    when_unsatisfiable: Annotated[str, common.one_of("DoNotSchedule", "ScheduleAnyway")]
    label_selector: common.LabelSelector | None = None
    min_domains: Annotated[int | None, common.at_least(1)] = None
    node_affinity_policy: Annotated[str, common.one_of("Honor", "Ignore")] = "Honor"
    node_taints_policy: Annotated[str, common.one_of("Honor", "Ignore")] = "Ignore"
    match_label_keys: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _min_domains_needs_do_not_schedule(self) -> TopologySpreadConstraint:
        if self.min_domains is not None and self.when_unsatisfiable != "DoNotSchedule":
            raise common.FieldError(
                ("minDomains",), "can only be set when whenUnsatisfiable is DoNotSchedule"
            )
        return self


class SchedulingGate(common.K8sModel):
    name: str = ""


class PersistentVolumeClaimSpec(common.K8sModel):
    """A claim's spec (also an ephemeral volume's template): the class and the bound volume are
    read; the other upstream fields are declared, not read."""

    storage_class_name: str | None = None  # absent: the default class; "": no class
    volume_name: str = ""
    access_modes: list[str] = Field(default_factory=list)
    resources: dict[str, Any] = Field(default_factory=dict)
    selector: dict[str, Any] | None = None
    data_source: dict[str, Any] | None = None
    data_source_ref: dict[str, Any] | None = None
    volume_mode: str = ""
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimTemplate(common.K8sModel):
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: PersistentVolumeClaimSpec


class PersistentVolumeClaimVolumeSource(common.K8sModel):
    claim_name: Annotated[str, Field(min_length=1)]
    read_only: bool = False


class EphemeralVolumeSource(common.K8sModel):
    volume_claim_template: PersistentVolumeClaimTemplate


class Volume(common.K8sModel):
    """A pod volume; only the claim-backed sources are read (the others are not checked)."""

    name: Annotated[str, Field(min_length=1)]
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: EphemeralVolumeSource | None = None


def _volume(index: int, raw: Any) -> Volume:
    try:
        return Volume.model_validate(raw)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        message = "required" if err["type"] == "missing" else str(err["msg"])
        raise common.FieldError((index, *err["loc"]), message) from None


class PodSpec(common.K8sModel):
    node_name: str = ""
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[common.Toleration] = Field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] = Field(default_factory=list)
    overhead: common.ResourceList = Field(default_factory=dict)
    priority: int | None = None
    priority_class_name: str = ""
    scheduling_gates: list[SchedulingGate] = Field(default_factory=list)
    termination_grace_period_seconds: Annotated[int | None, common.at_least(0)] = None
    host_network: bool = False
    # each a Volume; typed loosely so that the unknown-field check does not walk the ~30 volume
    # sources karpy does not read (karpy.api.fields)
    volumes: list[Any] = Field(default_factory=list)

    @field_validator("volumes", mode="after")
    @classmethod
    def _volumes(cls, raw: list[Any]) -> list[Any]:
        return [_volume(i, item) for i, item in enumerate(raw)]


class PodStatus(common.K8sModel):
    phase: str = "Pending"
    nominated_node_name: str = ""
    start_time: common.Time | None = None
    conditions: list[common.Condition] = Field(default_factory=list)


class Pod(common.K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


class PodTemplateMeta(common.K8sModel):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PodTemplateSpec(common.K8sModel):
    metadata: PodTemplateMeta = Field(default_factory=PodTemplateMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class NodeSpec(common.K8sModel):
    provider_id: str = Field("", alias="providerID")
    unschedulable: bool = False
    taints: list[common.Taint] = Field(default_factory=list)


class NodeStatus(common.K8sModel):
    capacity: common.ResourceList | None = None
    allocatable: common.ResourceList | None = None
    conditions: list[common.Condition] = Field(default_factory=list)


class Node(common.K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Node"] = "Node"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)


class Namespace(common.K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: common.ObjectMeta = common.ObjectMeta()


class PersistentVolumeClaimStatus(common.K8sModel):
    phase: str = ""
    access_modes: Any = None
    capacity: Any = None
    conditions: Any = None
    allocated_resources: Any = None
    allocated_resource_statuses: Any = None
    current_volume_attributes_class_name: Any = None
    modify_volume_status: Any = None


class PersistentVolumeClaim(common.K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["PersistentVolumeClaim"] = "PersistentVolumeClaim"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: PersistentVolumeClaimSpec = Field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = Field(default_factory=PersistentVolumeClaimStatus)


class VolumeNodeAffinity(common.K8sModel):
    required: NodeSelector | None = None


class CSIPersistentVolumeSource(common.K8sModel):
    driver: Annotated[str, Field(min_length=1)]
    volume_handle: str = ""
    read_only: Any = None
    fs_type: Any = None
    volume_attributes: Any = None
    controller_publish_secret_ref: Any = None
    node_stage_secret_ref: Any = None
    node_publish_secret_ref: Any = None
    controller_expand_secret_ref: Any = None
    node_expand_secret_ref: Any = None


class PersistentVolumeSpec(common.K8sModel):
    """A volume's spec: its class, node affinity and source (the CSI driver, an in-tree EBS
    volume, a local or hostPath one) are read; the other upstream sources are declared."""

    storage_class_name: str = ""
    node_affinity: VolumeNodeAffinity | None = None
    csi: CSIPersistentVolumeSource | None = None
    aws_elastic_block_store: Any = None
    local: Any = None
    host_path: Any = None
    capacity: Any = None
    access_modes: Any = None
    claim_ref: Any = None
    persistent_volume_reclaim_policy: Any = None
    mount_options: Any = None
    volume_mode: Any = None
    volume_attributes_class_name: Any = None
    gce_persistent_disk: Any = None
    azure_disk: Any = None
    azure_file: Any = None
    cinder: Any = None
    vsphere_volume: Any = None
    portworx_volume: Any = None
    nfs: Any = None
    iscsi: Any = None
    rbd: Any = None
    cephfs: Any = None
    fc: Any = None
    flex_volume: Any = None
    flocker: Any = None
    glusterfs: Any = None
    quobyte: Any = None
    scale_io: Any = Field(None, alias="scaleIO")
    storageos: Any = None
    photon_persistent_disk: Any = None


class PersistentVolumeStatus(common.K8sModel):
    phase: str = ""
    message: Any = None
    reason: Any = None
    last_phase_transition_time: Any = None


class PersistentVolume(common.K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["PersistentVolume"] = "PersistentVolume"
    metadata: common.ObjectMeta = common.ObjectMeta()
    spec: PersistentVolumeSpec = Field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = Field(default_factory=PersistentVolumeStatus)
