"""The Deployment/StatefulSet/Job/bare pod stand-in's bookkeeping: one workload's pods and counts.

:class:`WorkloadState` is what :class:`~karpy.sim.workloads.Workloads` keeps per workload (its
desired state, its pods as :class:`PodState`, the counts of active, current-template and ready
pods kept as pods come and go, the API object it publishes); :func:`scaled` resolves a
``maxSurge``/``maxUnavailable`` of a number or a percentage. Plain mutable records, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from karpy.model.objects import TERMINAL_PHASES
from karpy.ports import RawObject
from karpy.sim import deployment_status, statefulsets

__all__ = ["Counts", "PodState", "WorkloadState", "scaled"]


def scaled(value: int | str, replicas: int, *, round_up: bool) -> int:
    text = str(value)
    if text.endswith("%"):
        fraction = int(text[:-1]) * replicas / 100
        return math.ceil(fraction) if round_up else math.floor(fraction)
    return int(text)


@dataclass(frozen=True, slots=True)
class Counts:
    """A Deployment's active pods: all, of the current template, of older ones, and ready ones."""

    active: int
    new: int
    old: int
    ready: int


@dataclass(slots=True)
class PodState:
    name: str
    hash: str
    created: float
    uid: str = ""
    node: str = ""
    phase: str = "Pending"
    ready: bool = False
    deleting: bool = False
    bound: float | None = None
    ready_since: float | None = None  # when it last turned Ready
    deletion_cost: int = 0  # controller.kubernetes.io/pod-deletion-cost
    shuffle: bytes = b""  # replicaset_order.shuffle(uid), the deletion order's last rule

    @property
    def active(self) -> bool:
        return not self.deleting and self.phase not in TERMINAL_PHASES


@dataclass(slots=True)
class WorkloadState:
    kind: str
    namespace: str
    name: str
    template: RawObject
    hash: str
    replicas: int = 0  # Deployment replicas; Job completions
    max_surge: int | str = "25%"
    max_unavailable: int | str = "25%"
    recreate: bool = False
    parallel: bool = False  # a StatefulSet's podManagementPolicy: Parallel
    parallelism: int = 1
    run_for: float = 0.0
    succeeded: int = 0
    completed: float | None = None
    next_index: int = 0
    pods: dict[str, PodState] = field(default_factory=dict)
    # the active pods, those of the ``counted`` template hash and the ready ones, kept as pods
    # come, change and go (see ``tally``); counted again when the template hash moves on
    counted: str = ""
    active: int = 0
    new: int = 0
    ready: int = 0
    status: deployment_status.Publisher | None = None  # the Deployment's API object
    set_status: statefulsets.Publisher | None = None  # the StatefulSet's
    claims: statefulsets.ClaimTemplates | None = None  # a StatefulSet's volumeClaimTemplates
    condemned: set[int] = field(default_factory=set)  # ordinals a scale-down deleted (claims to drop)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    def tally(self, pod: PodState, sign: int) -> None:
        """Add (+1) or take out (-1) a pod's part of the counts."""
        if pod.active:
            self.active += sign
            self.new += sign if pod.hash == self.counted else 0
            self.ready += sign if pod.ready else 0

    def counts(self) -> Counts:
        """The active pods: all, of the current template, of older ones, ready ones."""
        if self.counted != self.hash:
            self.counted, self.active, self.new, self.ready = self.hash, 0, 0, 0
            for pod in self.pods.values():
                self.tally(pod, +1)
        return Counts(self.active, self.new, self.active - self.new, self.ready)

    def fenceposts(self) -> tuple[int, int]:
        """maxSurge (rounded up) and maxUnavailable (rounded down); both zero means one unavailable."""
        surge = scaled(self.max_surge, self.replicas, round_up=True)
        unavailable = scaled(self.max_unavailable, self.replicas, round_up=False)
        if surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, unavailable
