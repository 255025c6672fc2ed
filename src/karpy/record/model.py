"""What a recording holds: pods by owner with their lifetimes, owners' replicas over time, nodes.

A :class:`Recording` is the source-neutral middle of ``karpy record``: a live cluster's watch
events (:mod:`karpy.record.recorder`) or another source (kube-state-metrics series) make one, and
:mod:`karpy.record.writer` turns any of them into the same trace. Times are POSIX seconds on the
recording's clock; ``start``/``end`` bound the window, and a time equal to ``start`` means "there
when the recording began". Owners are top owners: a ReplicaSet's pods belong to its Deployment, a
Job's to its CronJob when it has one (the Job is then the pod's ``job``). Pod templates are raw
``{metadata: {labels, annotations}, spec}`` dicts. Frozen values, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BARE",
    "CRONJOB",
    "DEPLOYMENT",
    "JOB",
    "STATEFULSET",
    "JobLife",
    "NodeLife",
    "Owner",
    "OwnerKey",
    "PodLife",
    "Recording",
]

DEPLOYMENT, STATEFULSET, JOB, CRONJOB = "Deployment", "StatefulSet", "Job", "CronJob"
BARE = ""  # the owner kind of a pod no controller owns


@dataclass(frozen=True, slots=True, order=True)
class OwnerKey:
    """A top owner: ``kind`` (:data:`BARE` for a bare pod, whose ``name`` is its name or
    ``generateName``), namespace and name."""

    namespace: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class Owner:
    """A Deployment, StatefulSet, Job or CronJob (or another controller, followed through its pods)."""

    key: OwnerKey
    template: Mapping[str, Any]  # the pod template
    replicas: tuple[tuple[float, int], ...] = ()  # spec.replicas over time; () = follow the pods' count
    strategy: Mapping[str, Any] | None = None  # a Deployment's
    parallel: bool = False  # a StatefulSet's podManagementPolicy: Parallel
    rollouts: tuple[float, ...] = ()  # a Deployment's new ReplicaSets during the window
    created: float | None = None  # None: before the window
    deleted: float | None = None


@dataclass(frozen=True, slots=True)
class JobLife:
    """One Job (a run of its owner: itself, or its CronJob)."""

    namespace: str
    name: str
    owner: OwnerKey
    template: Mapping[str, Any]
    completions: int | None = None  # None: not seen (counted from its pods)
    parallelism: int | None = None
    created: float | None = None


@dataclass(frozen=True, slots=True)
class PodLife:
    """One pod: when it arrived, was bound, ran, finished and went (None: did not, in the window)."""

    namespace: str
    name: str
    owner: OwnerKey
    template: Mapping[str, Any]  # its own labels, annotations and spec (nodeName dropped)
    created: float
    generate_name: str = ""
    job: str = ""  # the Job of a Job's pod
    bound: float | None = None
    running: float | None = None
    finished: float | None = None  # Succeeded or Failed
    deleted: float | None = None  # deletion asked (deletionTimestamp) or gone
    node: str = ""
    priority: int = 0
    daemonset: bool = False  # a DaemonSet's (or a static pod's): not part of the workload


@dataclass(frozen=True, slots=True)
class NodeLife:
    """One node (or a NodeClaim that never got a Node)."""

    name: str
    launched: float  # its NodeClaim's creation, else its Node's
    instance_type: str
    zone: str = ""
    capacity_type: str = "on-demand"
    registered: float | None = None  # the Node object appeared
    ready: float | None = None
    deleted: float | None = None
    node_pool: str = ""
    node_group: str = ""
    region: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Recording:
    start: float
    end: float
    pods: tuple[PodLife, ...] = ()
    owners: tuple[Owner, ...] = ()
    jobs: tuple[JobLife, ...] = ()
    nodes: tuple[NodeLife, ...] = ()
    node_pools: tuple[Mapping[str, Any], ...] = ()  # as they were at the start
    node_classes: tuple[Mapping[str, Any], ...] = ()
    node_claims: int = 0  # NodeClaims seen: the cluster runs Karpenter (else Cluster Autoscaler)
    source: str = "live"
    server: str = ""
    interrupted: bool = False
