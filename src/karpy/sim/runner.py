"""One simulation run: a fresh world on a virtual loop, driven by a scenario's trace, measured.

:func:`run` builds everything anew (so runs never share state): the :class:`Loop` at the
scenario's start, the in-memory API server, the cluster state and its feed, the instance types
of the scenario's catalog per NodeClass (an EC2NodeClass changes allocatable) behind a
:class:`~karpy.sim.cloud.SimCloud`, then either karpy's controllers (``runtime.wiring.build``,
mode ``"karpy"``) or the Cluster Autoscaler model (mode ``"cluster-autoscaler"``), the
kube-scheduler stand-in, the Deployment/Job/kubelet stand-ins (pod startup = image pull, cold
the first time an image lands on a node, warm afterwards, plus readiness), a DaemonSet
stand-in (one pod per registered Node that the template tolerates and selects) and Job pod
clean-up, and, for a scenario with claims, the storage stand-ins (:mod:`karpy.sim.storage`: the
PV controller and CSI provisioner the binder calls at PreBind, a CSINode per Node with its
instance type's EBS limit). It applies the scenario's objects, schedules the trace
(:func:`karpy.sim.trace.schedule`), runs the loop to the end and returns a :class:`RunResult`
with the figures of :func:`karpy.sim.metrics.summary` (plus, for karpy, the scheduler consistency
check's counts: :mod:`karpy.sim.consistency`). Same scenario and seed -> same result.
``observe`` callbacks see every event of the run's API server with the virtual time (how a
simulated cluster is recorded: ``karpy record``'s tests and ``scripts/record_example.py``);
:func:`base_catalog` is the catalog a run prices with. Called by ``karpy simulate`` and
``karpy backtest``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import logging
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import catalog as catalog_mod
from karpy import settings as settings_mod
from karpy.adapters.memory import MemoryKube
from karpy.controllers.context import Context, RecordingEvents
from karpy.metrics import Metrics
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import Catalog, InstanceType
from karpy.model.nodeclass import EC2NodeClass, NodeClass
from karpy.model.objects import Node, NodePool
from karpy.model.requirements import Requirements
from karpy.model.taints import UNREGISTERED
from karpy.ports import Clock, RawObject, WatchEvent
from karpy.runtime import wiring
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim import adopt, ca, consistency, predicates, storage, trace
from karpy.sim import binder as binder_mod
from karpy.sim import metrics as sim_metrics
from karpy.sim import misfits as misfits_mod
from karpy.sim.cloud import BillingRecord, Interruption, SimCloud
from karpy.sim.scenario import PodStartup, Scenario
from karpy.sim.snapshot_pods import SnapshotPods
from karpy.sim.workloads import Workloads
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

__all__ = [
    "CLUSTER_AUTOSCALER",
    "KARPY",
    "MODES",
    "Observer",
    "Overrides",
    "RunResult",
    "base_catalog",
    "run",
]

KARPY = "karpy"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
MODES = (KARPY, CLUSTER_AUTOSCALER)
JOB_POD_TTL = 60.0  # finished Job pods are removed after this (the TTL-after-finished controller)
_CHUNK = 600.0  # progress is reported every 10 virtual minutes
_GC_THRESHOLDS = (1_000_000, 20, 100)  # young collections every 1,000,000 allocations (default 700)

_CATALOGS: dict[tuple[Any, ...], Catalog] = {}
Progress = Callable[[float, float], object]  # (virtual seconds done, total)
Observer = Callable[[float, WatchEvent], object]  # (virtual time, an event of the run's API server)


@dataclass(frozen=True, slots=True)
class Overrides:
    """karpy ablations: NodePools restricted to on-demand; consolidation off."""

    no_spot: bool = False
    no_consolidation: bool = False


@dataclass
class RunResult:
    mode: str
    name: str
    seed: int
    start: float
    end: float
    figures: dict[str, Any]  # the R of --json (series included)
    events: list[tuple[float, str, str, str]] = field(default_factory=list)  # (time, kind, name, reason)
    problems: list[str] = field(default_factory=list)  # objects the feed rejected
    billing: list[BillingRecord] = field(default_factory=list)  # the cloud's log, for reports and checks
    interruptions: list[Interruption] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what of the snapshot the run left out

    def to_dict(self) -> dict[str, Any]:
        return self.figures


class _Kube(MemoryKube):
    """The in-memory API server, counting successful evictions (of workload pods), keeping no call log."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.evictions = 0

    def _call(self, verb: str, kind: str, name: str) -> None:
        if self._next_errors:
            super()._call(verb, kind, name)

    def evict(self, name: str, namespace: str, uid: str = "") -> None:
        pod = self._objects.get(self._key("Pod", name, namespace)) or {}
        owners = (pod.get("metadata") or {}).get("ownerReferences") or []
        super().evict(name, namespace, uid)
        if not any(o.get("kind") == "DaemonSet" for o in owners):  # DaemonSet pods go with their node
            self.evictions += 1


class _Cloud(SimCloud):
    """The simulated cloud, which can also take instances running at the start (a snapshot's)."""

    def bill_running(
        self, node: str, instance_type: str, zone: str, capacity_type: str, price: float
    ) -> None:
        """An instance that runs from now on, billed as one launched now."""
        self._bill(node, instance_type, zone, capacity_type, price)


class _Types(catalog_mod.PerNodeClass):
    """Instance types per NodeClass, shared by the runs of one process, cut to each pool's requirements."""

    def __init__(
        self, spec: str, settings: settings_mod.Settings, prices: Mapping[Any, float] | None
    ) -> None:
        super().__init__(spec, pricing=settings.pricing, prices_override=prices)
        self._allowed: dict[tuple[str, str | None, Requirements], tuple[InstanceType, ...]] = {}

    def load(self, nodeclass: EC2NodeClass | None) -> Catalog:
        prices = tuple(sorted(self.prices_override.items())) if self.prices_override else None
        shared = (self.spec, repr(nodeclass), self.pricing, prices)
        if shared not in _CATALOGS:  # catalogs are immutable: runs in one process share them
            _CATALOGS[shared] = super().load(nodeclass)
        return _CATALOGS[shared]

    def __call__(self, pool: NodePool, node_class: NodeClass | None) -> tuple[InstanceType, ...]:
        """The types the NodePool's requirements allow (the scheduler would drop the others anyway)."""
        catalog = self.catalog(node_class)
        if not pool.name:
            return catalog.instance_types
        reqs = pool.requirement_set()
        key = (catalog.name, None if node_class is None else node_class.name, reqs)
        found = self._allowed.get(key)
        if found is None:
            found = tuple(it for it in catalog.instance_types if it.requirements.overlaps(reqs))
            self._allowed[key] = found
        return found


class _Startup:
    """Seconds from binding to Ready: the slowest image pull (cold once per node) + readiness."""

    def __init__(self, spec: PodStartup, clock: Clock) -> None:
        self.spec = spec
        self._clock = clock
        self._pulled: dict[tuple[str, str], float] = {}  # (node, image) -> when the pull completes

    def __call__(self, pod: RawObject, node: RawObject) -> float:
        now = self._clock.now()
        spec = pod.get("spec") or {}
        node_name = spec.get("nodeName") or (node.get("metadata") or {}).get("name", "")
        images = sorted(
            {
                c.get("image", "")
                for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
            }
        )
        ready_at = now + self.spec.image_pull_warm
        for image in images:
            done = self._pulled.get((node_name, image))
            if done is None:
                done = now + self.spec.image_pull_cold
                self._pulled[(node_name, image)] = done
            ready_at = max(ready_at, done)
        return ready_at - now + self.spec.ready


class _Housekeeping:
    """DaemonSet pods on registered Nodes (removed with the Node) and removal of finished Job pods."""

    def __init__(self, kube: MemoryKube, cluster: Cluster, loop: Loop, daemonsets: list[RawObject]) -> None:
        self._kube, self._cluster, self._loop = kube, cluster, loop
        self._daemonsets = daemonsets
        self._placed: dict[str, list[tuple[str, str]]] = {}  # node -> DaemonSet pods (namespace, name)
        kube.watch(self._on_event)

    def _on_event(self, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        name = meta.get("name", "")
        if event.kind == "Node":
            if event.type == "DELETED":
                self._loop.call_later(0.0, lambda: self._clear(name), name="sim:ds-gc")
            elif name not in self._placed and self._daemonsets and _registered(event.obj):
                self._placed[name] = []
                self._loop.call_later(0.0, lambda: self._place(name), name="sim:ds")
        elif event.kind == "Pod" and event.type == "MODIFIED":
            owners = meta.get("ownerReferences") or []
            phase = (event.obj.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed") and any(o.get("kind") == "Job" for o in owners):
                namespace = meta.get("namespace", "default")
                self._loop.call_later(JOB_POD_TTL, lambda: self._delete(namespace, name), name="sim:job-ttl")

    def _place(self, node_name: str) -> None:
        node = self._cluster.nodes.get(node_name)
        if node is None or node.deleting:
            return
        for ds in self._daemonsets:
            typed = self._cluster.daemonsets.get(
                f"{ds['metadata'].get('namespace', 'default')}/{ds['metadata']['name']}"
            )
            if typed is None:
                continue
            if not (
                predicates.taints_ok(typed.template, node)
                and predicates.node_affinity_ok(typed.template, node)
            ):
                continue
            namespace = typed.namespace
            template = (ds.get("spec") or {}).get("template") or {}
            pod_name = f"{typed.name}-{node_name}"
            raw: RawObject = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": pod_name,
                    "namespace": namespace,
                    "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "DaemonSet",
                            "name": typed.name,
                            "uid": f"ds-{namespace}-{typed.name}",
                            "controller": True,
                        }
                    ],
                },
                "spec": {**copy.deepcopy(template.get("spec") or {}), "nodeName": node_name},
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "PodScheduled", "status": "True"},
                    ],
                },
            }
            with contextlib.suppress(errors.AlreadyExists):
                self._kube.create(raw)
                self._placed.setdefault(node_name, []).append((namespace, pod_name))

    def _clear(self, node_name: str) -> None:
        for namespace, pod_name in self._placed.pop(node_name, []):
            self._delete(namespace, pod_name)

    def _delete(self, namespace: str, name: str) -> None:
        with contextlib.suppress(errors.NotFound):
            self._kube.delete("Pod", name, namespace)


def _registered(node: RawObject) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return not (node.get("metadata") or {}).get("deletionTimestamp") and not any(
        t.get("key") == UNREGISTERED.key for t in taints
    )


def _ca_disruptions(autoscaler: ca.ClusterAutoscaler) -> dict[str, int]:
    """Scale-downs the CA model started, by karpy's reason names (empty / underutilized)."""
    out: dict[str, int] = {}
    for event in autoscaler.events:
        if event.reason == "ScaleDown" and event.message.startswith("marking "):
            reason = "empty" if event.message.startswith("marking empty") else "underutilized"
            out[reason] = out.get(reason, 0) + 1
    return out


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Python's cyclic garbage collector tuned for a long run over a large, long-lived heap.

    The run keeps hundreds of thousands of live objects (pods, nodes, caches); with the default
    thresholds (700, 10, 10) the collector walks them over and over, about a sixth of a large
    run's CPU; at 50,000 still 7-8% of the evening of ``scale-7d`` (a young collection walks
    the large tuples and dicts of the pass alive at that moment: about 0.1 s each), and those
    collections freed nothing. Collections only free cycles (reference counting frees the rest
    at once), so rarer young collections change no result, only when cycles are freed.
    Restored afterwards.
    """
    before = gc.get_threshold()
    gc.set_threshold(*_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _observed(observer: Observer, clock: Clock, event: WatchEvent) -> None:
    observer(clock.now(), event)


def _settings(scenario: Scenario) -> settings_mod.Settings:
    return settings_mod.Settings(
        pricing=settings_mod.PricingSettings(
            spot_price_ratio=scenario.pricing.spot_ratio,
            on_demand_discount=scenario.pricing.on_demand_discount,
        ),
        features=settings_mod.FeatureGates(measured_capacity=scenario.measured_capacity),
    )


def base_catalog(scenario: Scenario) -> Catalog:
    """The scenario's catalog without a NodeClass, priced as its runs are (``pricing``)."""
    return _Types(scenario.catalog, _settings(scenario), scenario.pricing.prices).catalog(None)


def run(
    scenario: Scenario,
    *,
    seed: int,
    until: float | None = None,
    mode: str = KARPY,
    karpy_overrides: Overrides = Overrides(),
    scoring: str | None = None,
    progress: Progress | None = None,
    sample_every: float = 60.0,
    observe: Sequence[Observer] = (),
) -> RunResult:
    """Simulate ``scenario`` for ``until`` seconds (default its duration) and measure it."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == CLUSTER_AUTOSCALER and scenario.baseline is None:
        raise errors.InputError(f"{scenario.file}: baseline.clusterAutoscaler: required for that comparison")
    if mode == KARPY:
        scenario = scenario.ablated(
            no_spot=karpy_overrides.no_spot, no_consolidation=karpy_overrides.no_consolidation
        )
    start = scenario.start
    end = start + (scenario.duration if until is None else until)
    loop = Loop(start=start)
    clock = LoopClock(loop)
    kube = _Kube(clock)
    for observer in observe:  # (first: they see every object the run creates)
        kube.watch(functools.partial(_observed, observer, clock))
    settings = _settings(scenario)
    types = _Types(scenario.catalog, settings, scenario.pricing.prices)
    base = types.catalog(None)
    holder: list[SimCloud] = []
    cluster = Cluster(
        lambda pool, _nc: holder[0].instance_types(pool), settings=settings, well_known=base.well_known
    )
    problems: list[str] = []
    feed = Feed(cluster, on_problem=lambda text, _event: problems.append(text))
    kube.watch(feed)
    cloud = _Cloud(
        kube,
        clock,
        loop,
        types_for=types,
        node_class_for=cluster.node_class_for,
        rng=random.Random(f"{seed}:cloud"),
        launch_latency=scenario.cloud.launch_latency,
        insufficient=scenario.ice_windows(),
        spot_interruption_rate_per_node_hour=scenario.cloud.spot_interruptions_per_node_hour,
        true_allocatable=scenario.cloud.true_allocatable,
    )
    holder.append(cloud)
    events = RecordingEvents()
    metrics = Metrics()
    ctx = Context(cluster, kube, cloud, clock, events, settings, metrics, logging.getLogger("karpy.sim"))
    volumes: storage.Provisioner | None = None
    if scenario.has_storage:  # (before the objects: it binds the scenario's claims and volumes)
        cluster.storage_complete = True  # the run's API server holds every storage object there is
        volumes = storage.Provisioner(
            kube,
            cluster,
            loop,
            rng=random.Random(f"{seed}:volumes"),
            zones=sorted({o.zone for it in base.instance_types for o in it.offerings}),
            types={"": base.instance_types},
            limits_of=functools.partial(_volume_limits, cluster, cloud, base),
        )
    for obj in [*scenario.objects, *scenario.node_classes, *scenario.daemon_sets]:
        kube.create(copy.deepcopy(obj))
    initial = _initial(scenario, base, mode)
    disruptions: Callable[[], Mapping[str, int]]
    if mode == KARPY:
        for obj in scenario.node_pools:
            kube.create(copy.deepcopy(obj))
        built = wiring.build(ctx, loop, feed)
        check: consistency.Counts | None = built.scheduler_consistency
        misfits = misfits_mod.watch(scenario, built, feed)
        disruptions = lambda: sim_metrics.karpy_disruptions(metrics)  # noqa: E731
    else:
        assert scenario.baseline is not None
        config = scenario.baseline if initial is None else initial.ca_config(scenario.baseline)
        autoscaler = ca.ClusterAutoscaler(
            kube, cluster, clock, loop, cloud, config, base, rng=random.Random(f"{seed}:ca"), volumes=volumes
        )
        disruptions = lambda: _ca_disruptions(autoscaler)  # noqa: E731
        check = None  # CA nominates nothing
        misfits = None
    binder = binder_mod.Binder(kube, cluster, clock, scoring=scoring or scenario.scoring, volumes=volumes)
    loop.add(binder.name, lambda: binder.reconcile().requeue_after, priority=20)
    startup = _Startup(scenario.cloud.pod_startup, clock)
    workloads = Workloads(kube, clock, loop=loop, ready_after=startup)
    _Housekeeping(kube, cluster, loop, list(scenario.daemon_sets))
    collector = sim_metrics.Collector(
        feed=feed, loop=loop, cloud=cloud, disruptions=disruptions, interval=sample_every
    )
    others: list[SnapshotPods] = []
    if initial is not None:  # (after every watcher is in place: they all see the snapshot's objects)
        others.append(SnapshotPods(kube, clock, loop, ready_after=startup))
        initial.apply(kube, cloud.bill_running, others[0])
    trace.schedule(
        loop,
        workloads,
        deployments=scenario.deployments,
        jobs=scenario.jobs,
        start=start,
        end=end,
        statefulsets=scenario.statefulsets,
        pods=scenario.pods,
    )
    now = start
    with _fewer_collections():  # (the summary too: its allocations would trigger collections)
        while now < end:
            now = min(end, now + _CHUNK)
            loop.run(now)
            if progress is not None:
                progress(now - start, end - start)
        collector.record()
        figures = sim_metrics.summary(
            collector=collector,
            binder=binder,
            workloads=workloads,
            cloud=cloud,
            disruptions=disruptions(),
            evictions=kube.evictions,
            start=start,
            end=end,
            others=others,
            running_at_start=frozenset(n.name for n in initial.nodes) if initial is not None else (),
        )
        if initial is not None:
            figures["initial_state"] = initial.figures()
        figures[consistency.KEY] = None if check is None else consistency.figures(check)
        if volumes is not None:
            figures["volumes"] = volumes.figures(binder.volumes)
        if misfits is not None:
            figures[misfits_mod.KEY] = misfits()
        log = [(e.time, e.kind, e.name, e.reason) for e in events.events]
    return RunResult(
        mode,
        scenario.name,
        seed,
        start,
        end,
        figures,
        log,
        problems,
        list(cloud.billing),
        list(cloud.interruptions),
        [] if initial is None else list(initial.warnings),
    )


def _volume_limits(cluster: Cluster, cloud: SimCloud, base: Catalog, node: Node) -> Mapping[str, int]:
    """A Node's attach limits per CSI driver: its instance type's, as its NodePool's NodeClass makes
    it (a karpy node), else as the catalog has it (a node group's); what its CSI driver reports."""
    name = node.labels.get(wk.INSTANCE_TYPE, "")
    pool = cluster.node_pools.get(node.labels.get(wk.NODEPOOL, ""))
    types = cloud.instance_types(pool) if pool is not None else base.instance_types
    return next((it.volume_limits for it in types if it.name == name), {})


def _initial(scenario: Scenario, catalog: Catalog, mode: str) -> adopt.Start | None:
    """What the run takes of the scenario's snapshot (None without one)."""
    if scenario.initial is None:
        return None
    return adopt.prepare(
        scenario.initial,
        catalog,
        mode=mode,
        node_pools=scenario.node_pools if mode == KARPY else (),
        daemon_sets=scenario.daemon_sets,
        traced=[(d.namespace, d.name) for d in scenario.deployments],
        baseline=scenario.baseline,
        now=scenario.start,
    )
