"""What a simulation run measured: latencies, pods, nodes, disruptions, utilisation, cost, time series.

:class:`Collector` listens to the feed's typed events (so it sees exactly what the cluster
state sees) and keeps, exactly rather than by sampling: the number of Nodes and its peak,
pending pods, pods that were never bound, and the time integrals of requested and allocatable
CPU and memory (utilisation is ∫requested dt / ∫allocatable dt over the Nodes that exist).
A loop task samples a time series every ``interval`` seconds for the report's plots (nodes,
pending pods, accumulated cost, utilisation, cumulative disruptions). :func:`summary` turns
a finished run into the JSON figures of ``karpy simulate --json`` (see ``docs/simulation.md``):
pending latency (creation -> bound, from :class:`~karpy.sim.binder.Binder`), time to Ready
(creation -> Ready, from :class:`~karpy.sim.workloads.Workloads`), churn and cost from the
billing log of :class:`~karpy.sim.cloud.SimCloud`. Pods with a negative priority (headroom /
overprovisioning pause pods) and DaemonSet pods are left out of pod figures. Used by the runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from karpy.core.scheduling import podinfo
from karpy.metrics import Metrics
from karpy.model.objects import Node, Pod
from karpy.model.resources import CPU, MEMORY
from karpy.runtime.loop import Loop
from karpy.sim.binder import Binder
from karpy.sim.cloud import SimCloud
from karpy.sim.workloads import PodStart, Workloads
from karpy.state.events import DELETED, ObjectEvent
from karpy.state.feed import Feed

__all__ = [
    "NOT_DISRUPTIONS",
    "Collector",
    "PodSource",
    "Series",
    "karpy_disruptions",
    "percentiles",
    "summary",
]

NOT_DISRUPTIONS = frozenset({"insufficient_capacity", "nodeclass_not_ready"})  # launch failures, no node
_DIGITS = 6


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """p50, p95, p99 (linear interpolation between order statistics) and max; None when empty."""
    if not values:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    xs = sorted(values)

    def at(q: float) -> float:
        k = (len(xs) - 1) * q
        lo, hi = math.floor(k), math.ceil(k)
        return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)

    return {
        "p50": round(at(0.50), 3),
        "p95": round(at(0.95), 3),
        "p99": round(at(0.99), 3),
        "max": round(xs[-1], 3),
    }


def karpy_disruptions(metrics: Metrics) -> dict[str, int]:
    """NodeClaims disrupted by reason, from karpy's ``karpy_nodeclaims_disrupted_total``."""
    out: dict[str, int] = {}
    for family in metrics.registry.collect():
        if family.name != "karpy_nodeclaims_disrupted":
            continue
        for sample in family.samples:
            reason = sample.labels.get("reason", "")
            if sample.name.endswith("_total") and reason not in NOT_DISRUPTIONS and sample.value:
                out[reason] = out.get(reason, 0) + int(sample.value)
    return out


class PodSource(Protocol):
    """Another maker of pods than the workload stand-in (the snapshot's pods' controllers)."""

    @property
    def pods_created(self) -> int: ...

    @property
    def started(self) -> Sequence[PodStart]: ...


@dataclass
class Series:
    """Samples every ``interval`` seconds; ``t`` is seconds since the start of the run."""

    t: list[float] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # requested / allocatable now
    memory: list[float] = field(default_factory=list)
    disruptions: list[int] = field(default_factory=list)  # cumulative

    def as_dict(self) -> dict[str, list[Any]]:
        return {
            "t": self.t,
            "nodes": self.nodes,
            "pending": self.pending,
            "cost": self.cost,
            "cpu": self.cpu,
            "memory": self.memory,
            "disruptions": self.disruptions,
        }


class Collector:
    """Exact counters from the feed plus a sampled time series (see the module docstring)."""

    name = "sim-metrics"

    def __init__(
        self,
        *,
        feed: Feed,
        loop: Loop,
        cloud: SimCloud,
        disruptions: Callable[[], Mapping[str, int]],
        interval: float = 60.0,
    ) -> None:
        self._loop = loop
        self._cloud = cloud
        self._disruptions = disruptions
        self.interval = interval
        self.start = loop.now
        self.series = Series()
        self.peak_nodes = 0
        self.never_bound = 0  # pods deleted before they were ever bound
        self.low_priority: set[str] = set()  # pod keys left out of pod figures
        self._nodes: dict[str, tuple[int, int]] = {}  # node -> allocatable cpu (m), memory (bytes)
        self._requests: dict[str, tuple[int, int]] = {}  # bound live pod -> requested cpu, memory
        self._pending: set[str] = set()
        self._bound: set[str] = set()  # pods that were bound at some point
        self._totals = [0, 0, 0, 0]  # requested cpu, memory; allocatable cpu, memory
        self._integrals = [0.0, 0.0, 0.0, 0.0]
        self._last = loop.now
        feed.listeners.append(self._on_event)
        loop.add(self.name, self._sample, priority=100)

    # -- exact accounting ---------------------------------------------------------------
    def _advance(self) -> None:
        now = self._loop.now
        dt = now - self._last
        if dt > 0:
            for i, value in enumerate(self._totals):
                self._integrals[i] += value * dt
            self._last = now

    def _on_event(self, event: ObjectEvent) -> None:
        obj = event.obj
        if isinstance(obj, Pod):
            self._advance()
            self._pod(obj, event.type == DELETED)
        elif isinstance(obj, Node):
            self._advance()
            self._node(obj, event.type == DELETED)

    def _pod(self, pod: Pod, deleted: bool) -> None:
        key = pod.key
        old = self._requests.pop(key, None)
        if old is not None:
            self._totals[0] -= old[0]
            self._totals[1] -= old[1]
        counted = pod.priority >= 0 and not pod.is_daemonset_pod()
        if not counted:
            self.low_priority.add(key)
        if pod.node_name:
            self._bound.add(key)
        live = not deleted and not pod.is_terminal()
        if live and pod.node_name:
            need = podinfo.pod_requests(pod)
            value = (need.get(CPU), need.get(MEMORY))
            self._requests[key] = value
            self._totals[0] += value[0]
            self._totals[1] += value[1]
        if live and not pod.node_name and not pod.deleting and counted:
            self._pending.add(key)
        else:
            self._pending.discard(key)
        if deleted:
            if key not in self._bound and counted:
                self.never_bound += 1
            self._bound.discard(key)

    def _node(self, node: Node, deleted: bool) -> None:
        old = self._nodes.pop(node.name, None)
        if old is not None:
            self._totals[2] -= old[0]
            self._totals[3] -= old[1]
        if not deleted:
            value = (node.allocatable.get(CPU), node.allocatable.get(MEMORY))
            self._nodes[node.name] = value
            self._totals[2] += value[0]
            self._totals[3] += value[1]
        self.peak_nodes = max(self.peak_nodes, len(self._nodes))

    # -- sampling ------------------------------------------------------------------------
    def _sample(self) -> float:
        self.record()
        return self.interval

    def record(self) -> None:
        self._advance()
        now = self._loop.now
        s = self.series
        if s.t and s.t[-1] == round(now - self.start, 3):
            return
        req_cpu, req_mem, alloc_cpu, alloc_mem = self._totals
        s.t.append(round(now - self.start, 3))
        s.nodes.append(len(self._nodes))
        s.pending.append(len(self._pending))
        s.cost.append(round(self._cloud.cost(now), 4))
        s.cpu.append(round(req_cpu / alloc_cpu, 4) if alloc_cpu else 0.0)
        s.memory.append(round(req_mem / alloc_mem, 4) if alloc_mem else 0.0)
        s.disruptions.append(sum(self._disruptions().values()))

    @property
    def pending_now(self) -> int:
        return len(self._pending)

    def utilization(self) -> dict[str, float]:
        """Time-weighted requested/allocatable: ∫requested dt / ∫allocatable dt."""
        self._advance()
        req_cpu, req_mem, alloc_cpu, alloc_mem = self._integrals
        return {
            "cpu": round(req_cpu / alloc_cpu, 4) if alloc_cpu else 0.0,
            "memory": round(req_mem / alloc_mem, 4) if alloc_mem else 0.0,
        }


def summary(
    *,
    collector: Collector,
    binder: Binder,
    workloads: Workloads,
    cloud: SimCloud,
    disruptions: Mapping[str, int],
    evictions: int,
    start: float,
    end: float,
    others: Sequence[PodSource] = (),
    running_at_start: Collection[str] = (),
) -> dict[str, Any]:
    """The figures of one run (the ``R`` of ``--json``); deterministic for a scenario and seed.
    ``others`` add their pods created and started to the workload stand-in's; the nodes named in
    ``running_at_start`` (a snapshot's) are billed and can be removed, but were not created."""
    skip = collector.low_priority
    pending = [b.latency for b in binder.bindings if b.pod not in skip]
    started = [*workloads.started, *(s for other in others for s in other.started)]
    ready = [s.ready - s.created for s in started if s.pod not in skip]
    hours = (end - start) / 3600.0
    created = [r for r in cloud.billing if r.launched_at <= end]
    removed = [r for r in created if r.terminated_at is not None and r.terminated_at <= end]
    launched = [r for r in created if r.node not in running_at_start or r.launched_at > start]
    by_type: dict[str, float] = {}
    by_capacity: dict[str, float] = {}
    for r in created:
        stop = end if r.terminated_at is None else min(r.terminated_at, end)
        node_hours = max(0.0, stop - r.launched_at) / 3600.0
        by_type[r.instance_type] = by_type.get(r.instance_type, 0.0) + node_hours
        by_capacity[r.capacity_type] = by_capacity.get(r.capacity_type, 0.0) + node_hours
    all_disruptions = dict(disruptions)
    if cloud.interruptions:
        all_disruptions["spot_interruption"] = len([i for i in cloud.interruptions if i.at <= end])
    return {
        "cost_usd": round(cloud.cost(end), _DIGITS),
        "pending_seconds": percentiles(pending),
        "ready_seconds": percentiles(ready),
        "pods_created": workloads.pods_created + sum(other.pods_created for other in others),
        "pods_never_scheduled": collector.never_bound + collector.pending_now,
        "pods_pending_at_end": collector.pending_now,
        "nodes_created": len(launched),
        "nodes_removed": len(removed),
        "churn_per_hour": {
            "created": round(len(launched) / hours, 3) if hours else 0.0,
            "removed": round(len(removed) / hours, 3) if hours else 0.0,
        },
        "disruptions": dict(sorted(all_disruptions.items())),
        "evictions": evictions,
        "spot_interruptions": len(cloud.interruptions),
        "insufficient_capacity_errors": cloud.ice_errors,
        "peak_nodes": collector.peak_nodes,
        "node_hours": round(sum(by_type.values()), 4),
        "node_hours_by_instance_type": {k: round(v, 4) for k, v in sorted(by_type.items())},
        "node_hours_by_capacity_type": {k: round(v, 4) for k, v in sorted(by_capacity.items())},
        "utilization": collector.utilization(),
        "series": collector.series.as_dict(),
    }
