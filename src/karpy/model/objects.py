"""The Kubernetes and Karpenter objects karpy reads, reduced to the fields it uses.

Frozen, slotted dataclasses built by :mod:`karpy.api` (from YAML) and by
:mod:`karpy.model.codec` (from raw watch JSON). Times are POSIX seconds (UTC floats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import EMPTY, Resources
from karpy.model.selectors import LabelSelector
from karpy.model.taints import Taint, Toleration
from karpy.model.volumes import PodVolume

__all__ = [
    "ROLLOUT_GUARD_ANNOTATION",
    "ROLLOUT_GUARD_SETTLE",
    "SIZING_ANNOTATION",
    "SIZING_USABLE_PRICE",
    "SIZING_VALUES",
    "TERMINAL_PHASES",
    "Budget",
    "Condition",
    "DaemonSet",
    "Disruption",
    "HostPort",
    "Namespace",
    "Node",
    "NodeClaim",
    "NodeClassRef",
    "NodePool",
    "NodeSelectorTerm",
    "OwnerRef",
    "Pod",
    "PodAffinityTerm",
    "PodDisruptionBudget",
    "Rollout",
    "TopologySpreadConstraint",
    "WeightedPodAffinityTerm",
    "WeightedTerm",
    "Workload",
    "rollout_guard_settle",
]

TERMINAL_PHASES = ("Succeeded", "Failed")  # a pod in one of these has finished (Pod.is_terminal)

# NodePool annotation (the NodePool's own metadata) choosing how a new NodeClaim's instance type
# is picked: absent = upstream's cheapest type; "usable-price" = the best price per usable
# resource (karpy.core.scheduling.sizing). Any other value is warned about and means the default.
SIZING_ANNOTATION = "karpy.sh/sizing"
SIZING_USABLE_PRICE = "usable-price"
SIZING_VALUES = frozenset({SIZING_USABLE_PRICE})

# NodePool annotation (the NodePool's own metadata) turning the rollout guard on: consolidation
# leaves alone the nodes holding pods of a Deployment or StatefulSet while its rollout is in
# progress and for a settle time after it completes (karpy.core.disruption.rollout). The value is
# the settle time, a duration such as "5m", "90s", "1h30m" or "0s", or "true" for 5m. Absent:
# off; any other value is warned about and means off.
ROLLOUT_GUARD_ANNOTATION = "karpy.sh/rollout-guard"
ROLLOUT_GUARD_SETTLE = 300.0  # seconds: the settle time of "true"
_GUARD_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def rollout_guard_settle(value: str | None) -> float | None:
    """The settle time (seconds) a ``karpy.sh/rollout-guard`` value asks for; None: off or invalid."""
    if value is None:
        return None
    if value == "true":
        return ROLLOUT_GUARD_SETTLE
    found = _GUARD_DURATION.match(value)
    if not value or found is None:
        return None
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    return float(hours * 3600 + minutes * 60 + seconds)


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    api_version: str = ""
    controller: bool = False
    uid: str = ""


@dataclass(frozen=True, slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = ""

    def conflicts(self, other: HostPort) -> bool:
        """Same port and protocol, and IPs that overlap (empty / 0.0.0.0 = all)."""
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wild = ("", "0.0.0.0")
        return self.host_ip in wild or other.host_ip in wild or self.host_ip == other.host_ip


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One ORed term of a required node affinity: its expressions ANDed."""

    requirements: tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    topology_key: str
    selector: LabelSelector | None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector | None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    node_name: str = ""
    phase: str = "Pending"
    started: float | None = None  # status.startTime
    ready: bool = False  # the Ready condition
    priority: int = 0
    created: float = 0.0
    deleting: bool = False
    requests: Resources = EMPTY
    host_ports: tuple[HostPort, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    preferred_terms: tuple[WeightedTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    spread: tuple[TopologySpreadConstraint, ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity_preferred: tuple[WeightedPodAffinityTerm, ...] = ()
    nominated_node: str = ""
    scheduling_gated: bool = False
    termination_grace_seconds: int = 30
    priority_class: str = ""
    volumes: tuple[PodVolume, ...] = ()  # the volumes backed by a claim (karpy.model.volumes)
    key: str = field(init=False, repr=False, compare=False)  # namespace/name, set once

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")

    @property
    def controller(self) -> OwnerRef | None:
        for owner in self.owners:
            if owner.controller:
                return owner
        return self.owners[0] if self.owners else None

    def is_daemonset_pod(self) -> bool:
        owner = self.controller
        return owner is not None and owner.kind == "DaemonSet"

    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def has_pod_affinity(self) -> bool:
        return bool(
            self.affinity or self.affinity_preferred or self.anti_affinity or self.anti_affinity_preferred
        )


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: float | None = None
    observed_generation: int | None = None


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Resources = EMPTY
    allocatable: Resources = EMPTY
    provider_id: str = ""
    unschedulable: bool = False
    ready: bool = True
    created: float = 0.0
    deleting: bool = False
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeClassRef:
    group: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Budget:
    nodes: str = "10%"
    schedule: str | None = None
    duration: float | None = None  # seconds
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Disruption:
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: float | None = 0.0  # seconds; None = Never
    budgets: tuple[Budget, ...] = (Budget(),)


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    weight: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class_ref: NodeClassRef | None = None
    expire_after: float | None = 720 * 3600.0  # seconds; None = Never
    termination_grace_period: float | None = None
    limits: dict[str, int] | None = None  # explicit zeros kept: a limit of 0 forbids launching
    disruption: Disruption = field(default_factory=Disruption)
    replicas: int | None = None
    created: float = 0.0
    uid: str = ""
    deleting: bool = False
    meta_annotations: dict[str, str] = field(default_factory=dict)  # the NodePool's own metadata

    def sizing(self) -> str:
        """The pool's ``karpy.sh/sizing`` mode: ``"usable-price"``, or ``""`` (upstream's cheapest
        type) when the annotation is absent or holds an unknown value."""
        value = self.meta_annotations.get(SIZING_ANNOTATION, "")
        return value if value in SIZING_VALUES else ""

    def rollout_guard(self) -> float | None:
        """The pool's ``karpy.sh/rollout-guard`` settle time (seconds); None: the guard is off."""
        return rollout_guard_settle(self.meta_annotations.get(ROLLOUT_GUARD_ANNOTATION))

    def requirement_set(self) -> Requirements:
        """NodePool requirements with the template labels intersected in."""
        return Requirements(self.requirements).union_with(Requirements.from_labels(self.labels))


@dataclass(frozen=True, slots=True)
class NodeClaim:
    name: str
    node_pool: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    requirements: tuple[Requirement, ...] = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class_ref: NodeClassRef | None = None
    requests: Resources = EMPTY
    provider_id: str = ""
    node_name: str = ""
    image_id: str = ""
    capacity: Resources = EMPTY
    allocatable: Resources = EMPTY
    conditions: tuple[Condition, ...] = ()
    created: float = 0.0
    deleting: bool = False
    expire_after: float | None = None  # None: the NodePool's applies; math.inf: Never
    termination_grace_period: float | None = None
    last_pod_event: float | None = None

    def condition(self, kind: str) -> Condition | None:
        for cond in self.conditions:
            if cond.type == kind:
                return cond
        return None

    def is_true(self, kind: str) -> bool:
        cond = self.condition(kind)
        return cond is not None and cond.status == "True"


@dataclass(frozen=True, slots=True)
class DaemonSet:
    namespace: str
    name: str
    template: Pod


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: LabelSelector | None
    min_available: str | None = None  # int or percent string
    max_unavailable: str | None = None
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"
    disruptions_allowed: int | None = None  # status, when known


@dataclass(frozen=True, slots=True)
class Namespace:
    """A namespace's name and labels (for pod affinity ``namespaceSelector``)."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Workload:
    """A Deployment or ReplicaSet: ``replicas`` copies of ``template``."""

    kind: str
    namespace: str
    name: str
    replicas: int
    template: Pod
    uid: str = ""


@dataclass(frozen=True, slots=True)
class Rollout:
    """A Deployment's or StatefulSet's rollout status: only what the rollout guard reads
    (:mod:`karpy.core.disruption.rollout`). Built from watch objects by :mod:`karpy.state.rollouts`."""

    kind: str  # Deployment | StatefulSet
    namespace: str
    name: str
    replicas: int = 1  # spec.replicas
    generation: int = 0  # metadata.generation (0: unknown)
    observed_generation: int = 0  # status.observedGeneration
    status_replicas: int = 0  # status.replicas: pods of every revision
    updated: int = 0  # status.updatedReplicas
    available: int = 0  # status.availableReplicas (a StatefulSet without it: readyReplicas)
    paused: bool = False  # spec.paused (Deployment)
    progress_deadline: float = 600.0  # spec.progressDeadlineSeconds (Deployment)
    progress_status: str = ""  # the Progressing condition's status ("": no such condition)
    progress_reason: str = ""
    progress_updated: float | None = None  # its lastUpdateTime
    current_revision: str = ""  # status.currentRevision (StatefulSet)
    update_revision: str = ""  # status.updateRevision (StatefulSet)
