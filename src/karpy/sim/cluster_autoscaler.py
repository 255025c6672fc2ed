"""The Cluster Autoscaler baseline: node groups (ASGs), scale-up by template simulation, scale-down.

:class:`ClusterAutoscaler` runs CA's ``RunOnce`` as the loop task ``cluster-autoscaler`` every
``scanInterval`` (first run one interval after start), with the documented defaults of
``docs/peers.md`` §1: refresh node groups (registration of upcoming nodes; a node not
registered ``maxNodeProvisionTime`` after its request is deleted and its group backed off
5 m, doubling to 30 m, reset after 3 h; ASGs replace vanished instances and keep ``min``) ->
unschedulable pods (unbound, not nominated for preemption, not DaemonSet pods, priority not
below the expendable cutoff -10, older than ``newPodScaleUpDelay`` or the per-pod annotation)
-> filter out those that fit existing or upcoming nodes -> for every node group the
binpacking estimator (equivalence groups by decreasing cpu+memory share; first-fit onto the
nodes opened so far, then the last opened node, and for spread pods again all opened nodes
as autoscaler PR #8181 does; a new node goes to the least-populated zone in which the pod
fits, which models one ASG per zone with ``--balance-similar-node-groups``) -> the expander
(``least-waste`` default, ``random``, ``most-pods``, ``price``, ``priority``, ``least-nodes``;
comma-chained; ties broken with the injected rng) -> one group scaled up per scan, nodes
requested through ``cloud.launch_node`` after ``asgLaunchOverhead`` (not billed), the first
instance type of the group's mixed-instances list offered in the zone (the next on
insufficient capacity, then other zones). No scale-up in a scan -> scale-down
(:mod:`karpy.sim.ca_scaledown`) outside the cooldowns (delay after add 10 m / delete 0 /
failure 3 m). Optional overprovisioning: ``pods`` pause pods (a ReplicaSet-owned set kept at
its count) that the binder preempts, so CA scales up for them as headroom.

A template node is the group's first instance type: allocatable minus the requests of the
DaemonSets that tolerate it and select it, with the labels its nodes get (arch, os, region,
instance type, zone, hostname, ``eks.amazonaws.com/capacityType`` and ``nodegroup``, the
configured labels) and the configured taints. Wired by the simulator; deterministic.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from karpy.api.common import parse_duration
from karpy.core.scheduling import podinfo
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import Catalog, InstanceType
from karpy.model.objects import Node, Pod
from karpy.model.resources import CPU, EMPTY, MEMORY, Resources
from karpy.model.taints import EFFECTS, Taint
from karpy.ports import Clock, KubeAPI, WatchEvent
from karpy.runtime.loop import Loop
from karpy.sim.binder import node_affinity_ok, taints_ok
from karpy.sim.ca_scaledown import TO_BE_DELETED, MatchCache, ScaleDown, SimNode, World, requested
from karpy.sim.cloud import CAPACITY_LABEL
from karpy.state.cluster import Cluster

__all__ = [
    "EXPANDERS",
    "NODE_GROUP_LABEL",
    "CAConfig",
    "CAEvent",
    "ClusterAutoscaler",
    "NodeGroupConfig",
    "OverprovisioningConfig",
    "ScaleUp",
    "parse_config",
]

NODE_GROUP_LABEL = "eks.amazonaws.com/nodegroup"
SCALE_UP_DELAY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
EXPANDERS = ("least-waste", "random", "most-pods", "price", "priority", "least-nodes")
_CPU_PRICE, _MEM_PRICE = 0.033174, 0.004446  # CA's price expander: USD per core-hour, per GB-hour
_GB = 1024**3


@dataclass(frozen=True)
class NodeGroupConfig:
    name: str
    instance_types: tuple[str, ...]
    capacity_type: str = wk.CAPACITY_TYPE_ON_DEMAND
    min: int = 0
    max: int = 1000
    priority: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    zones: tuple[str, ...] = ()  # empty: every zone of the region offering the first type


@dataclass(frozen=True)
class OverprovisioningConfig:
    pods: int = 0
    requests: Mapping[str, str] = field(default_factory=lambda: {"cpu": "1", "memory": "2Gi"})
    priority: int = -10
    namespace: str = "overprovisioning"
    name: str = "overprovisioning"


@dataclass(frozen=True)
class CAConfig:
    """The scenario's ``baseline.clusterAutoscaler`` block; durations in seconds, CA's defaults."""

    node_groups: tuple[NodeGroupConfig, ...] = ()
    overprovisioning: OverprovisioningConfig | None = None
    scan_interval: float = 10.0
    asg_launch_overhead: float = 30.0  # the scenario format's default
    expander: str = "least-waste"
    new_pod_scale_up_delay: float = 0.0
    max_node_provision_time: float = 900.0
    max_nodes_per_scaleup: int = 1000
    max_nodes_total: int = 0  # 0 = unlimited
    expendable_pods_priority_cutoff: int = -10
    initial_node_group_backoff: float = 300.0
    max_node_group_backoff: float = 1800.0
    node_group_backoff_reset: float = 10800.0
    scale_down_enabled: bool = True
    scale_down_unneeded_time: float = 600.0
    scale_down_unready_time: float = 1200.0
    scale_down_utilization_threshold: float = 0.5
    scale_down_delay_after_add: float = 600.0
    scale_down_delay_after_delete: float = 0.0
    scale_down_delay_after_failure: float = 180.0
    max_scale_down_parallelism: int = 10
    max_drain_parallelism: int = 1
    node_delete_delay_after_taint: float = 5.0
    max_pod_eviction_time: float = 120.0
    skip_nodes_with_system_pods: bool = True
    skip_nodes_with_local_storage: bool = True


@dataclass(frozen=True, slots=True)
class CAEvent:
    at: float
    reason: str  # TriggeredScaleUp, NotTriggerScaleUp, FailedScaleUp, ScaleDown, ScaleDownFailed, ...
    object: str
    message: str


@dataclass(frozen=True, slots=True)
class ScaleUp:
    at: float
    group: str
    nodes: int
    pods: tuple[str, ...]


class ASGCloud(Protocol):
    """What CA needs of :class:`karpy.sim.cloud.SimCloud`."""

    def launch_node(
        self,
        *,
        instance_type: str,
        zone: str,
        capacity_type: str,
        labels: Mapping[str, str],
        taints: Sequence[Taint],
        name_prefix: str,
    ) -> str: ...

    def terminate_node(self, name: str) -> None: ...


@dataclass(slots=True)
class _Request:
    id: int
    zone: str
    at: float
    name: str = ""


@dataclass(slots=True)
class _Group:
    config: NodeGroupConfig
    template: InstanceType
    zones: tuple[str, ...]
    requests: dict[int, _Request] = field(default_factory=dict)  # upcoming: requested, not registered
    nodes: dict[str, str] = field(default_factory=dict)  # registered node -> zone
    backoff_until: float = float("-inf")
    backoff: float = 0.0
    last_failure: float = float("-inf")

    def size(self) -> int:
        return len(self.nodes) + len(self.requests)

    def zone_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(self.zones, 0)
        for zone in itertools.chain(self.nodes.values(), (r.zone for r in self.requests.values())):
            counts[zone] = counts.get(zone, 0) + 1
        return counts


@dataclass(slots=True)
class _Option:
    group: _Group
    zones: list[str]
    pods: list[Pod]


class ClusterAutoscaler:
    """The CA model (see the module docstring)."""

    name = "cluster-autoscaler"

    def __init__(
        self,
        kube: KubeAPI,
        cluster: Cluster,
        clock: Clock,
        loop: Loop,
        cloud: ASGCloud,
        config: CAConfig,
        catalog: Catalog,
        *,
        rng: random.Random | None = None,
    ) -> None:
        if any(e not in EXPANDERS for e in config.expander.split(",")):
            raise errors.InputError(f"expander {config.expander!r}: expected one of {', '.join(EXPANDERS)}")
        self.config = config
        self.events: list[CAEvent] = []
        self.scale_ups: list[ScaleUp] = []
        self.last_scale_up = float("-inf")
        self._kube, self._cluster, self._clock, self._loop, self._cloud = kube, cluster, clock, loop, cloud
        self._rng = rng or random.Random(0)
        self._types = {it.name: it for it in catalog.instance_types}
        self.groups = {g.name: self._group(g) for g in sorted(config.node_groups, key=lambda g: g.name)}
        self._owner: dict[str, str] = {}  # launched node -> group
        self._ids = itertools.count(1)
        self._local: dict[str, frozenset[str]] = {}  # pod -> local volume names
        self._dirty = True
        self._seen: dict[str, tuple[object, ...]] = {}  # pod -> what scale-down depends on
        self._matches: MatchCache = {}
        self._paused: set[str] = set()  # live overprovisioning pods
        self._used: dict[str, tuple[tuple[Pod, ...], Resources]] = {}  # node -> (pods, their requests)
        self._pause_ids = itertools.count(1)
        self._replenishing = False
        self.scale_down = ScaleDown(
            kube=kube,
            cluster=cluster,
            loop=loop,
            cloud=cloud,
            config=config,
            local_volumes=self._local,
            on_deleted=self._deleted,
            record=self._record,
        )
        kube.watch(self._on_event)
        if getattr(cloud, "on_interrupt", False) is None:
            cloud.on_interrupt = self.node_interrupted  # type: ignore[attr-defined]
        now = clock.now()
        self._adopt()
        for group in self.groups.values():  # the ASG starts at its minimum size
            for zone in self._next_zones(group, group.config.min - group.size()):
                self._request(group, zone, now, overhead=0.0)
        self._replenish()
        loop.add(self.name, self.run_once, at=now + config.scan_interval)

    def _group(self, g: NodeGroupConfig) -> _Group:
        where = f"nodeGroups[{g.name}]"
        if not g.instance_types:
            raise errors.InputError(f"{where}.instanceTypes: at least one instance type is required")
        types = []
        for name in g.instance_types:
            if name not in self._types:
                raise errors.InputError(f"{where}.instanceTypes: {name} is not in the catalog")
            types.append(self._types[name])
        shape = (types[0].capacity.get(CPU), types[0].capacity.get(MEMORY))
        for it in types[1:]:
            if (it.capacity.get(CPU), it.capacity.get(MEMORY)) != shape:
                raise errors.InputError(
                    f"{where}.instanceTypes: {it.name} differs in cpu or memory from {types[0].name}"
                    " (a mixed-instances policy needs one shape)"
                )
        if g.capacity_type not in (wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_SPOT):
            raise errors.InputError(
                f"{where}.capacityType: expected on-demand or spot, not {g.capacity_type!r}"
            )
        if not 0 <= g.min <= g.max:
            raise errors.InputError(f"{where}: need 0 <= min <= max, got min={g.min}, max={g.max}")
        zones = g.zones or tuple(
            sorted({o.zone for o in types[0].offerings if o.capacity_type == g.capacity_type})
        )
        return _Group(g, types[0], zones)

    # -- the loop task ------------------------------------------------------------------
    def run_once(self) -> float:
        now = self._clock.now()
        self._refresh(now)
        self._replenish()
        pending = self._unschedulable(now)
        world = self._world() if pending else None
        if world is not None and self._scale_up(world, pending, now):
            self.last_scale_up = now
        elif self.config.scale_down_enabled:
            self._scale_down(now, world)
        return self.config.scan_interval

    def _record(self, reason: str, obj: str, message: str) -> None:
        self.events.append(CAEvent(self._clock.now(), reason, obj, message))

    def node_group_sizes(self) -> dict[str, int]:
        return {name: g.size() for name, g in self.groups.items()}

    # -- node groups --------------------------------------------------------------------
    def _adopt(self) -> None:
        """Take in the group's nodes that CA did not launch (the ASG had them already)."""
        nodes = self._cluster.nodes
        for name in sorted(nodes):
            owner = nodes[name].labels.get(NODE_GROUP_LABEL, "")
            if owner in self.groups and name not in self._owner:
                self._owner[name] = owner
                self.groups[owner].nodes[name] = nodes[name].labels.get(wk.ZONE, "")

    def _refresh(self, now: float) -> None:
        self._adopt()
        nodes = self._cluster.nodes
        for group in self.groups.values():
            for req in sorted(group.requests.values(), key=lambda r: r.id):
                if req.name and req.name in nodes:
                    del group.requests[req.id]
                    group.nodes[req.name] = req.zone
                elif now - req.at >= self.config.max_node_provision_time:
                    del group.requests[req.id]
                    if req.name:
                        self._cloud.terminate_node(req.name)
                    self._failed(group, now, f"node {req.name or req.id} not registered in time")
            for name in sorted(group.nodes):
                if name not in nodes and name not in self.scale_down.deleting:
                    self._replace(group, name, now)

    def node_interrupted(self, name: str) -> None:
        """The cloud reclaimed an instance (spot): the ASG launches a replacement."""
        group = self.groups.get(self._owner.get(name, ""))
        if group is None:
            return
        for req in list(group.requests.values()):
            if req.name == name:
                del group.requests[req.id]
                self._request(group, req.zone, self._clock.now())
        if name in group.nodes:
            self._replace(group, name, self._clock.now())

    def _replace(self, group: _Group, name: str, now: float) -> None:
        zone = group.nodes.pop(name)
        self.scale_down.forget(name)
        self._record("NodeReplaced", name, f"{group.config.name}: instance {name} is gone, ASG replaces it")
        self._request(group, zone, now)

    def _next_zones(self, group: _Group, count: int) -> list[str]:
        counts = group.zone_counts()
        out = []
        for _ in range(count):
            zone = min(group.zones, key=lambda z: (counts[z], group.zones.index(z)))
            counts[zone] += 1
            out.append(zone)
        return out

    def _request(self, group: _Group, zone: str, now: float, *, overhead: float | None = None) -> None:
        req = _Request(next(self._ids), zone, now)
        group.requests[req.id] = req
        delay = self.config.asg_launch_overhead if overhead is None else overhead
        self._loop.call_later(delay, lambda: self._launch(group, req), name=f"{self.name}:launch")

    def _launch(self, group: _Group, req: _Request) -> None:
        if req.id not in group.requests:
            return
        g = group.config
        labels = {NODE_GROUP_LABEL: g.name, **g.labels}
        counts = group.zone_counts()
        zones = [req.zone, *sorted((z for z in group.zones if z != req.zone), key=lambda z: (counts[z], z))]
        for zone in zones:
            for it in g.instance_types:
                try:
                    req.name = self._cloud.launch_node(
                        instance_type=it,
                        zone=zone,
                        capacity_type=g.capacity_type,
                        labels=labels,
                        taints=g.taints,
                        name_prefix=g.name,
                    )
                except errors.InsufficientCapacity:
                    continue
                req.zone = zone
                self._owner[req.name] = g.name
                return
        del group.requests[req.id]
        self._failed(group, self._clock.now(), "insufficient capacity for every instance type and zone")

    def _failed(self, group: _Group, now: float, why: str) -> None:
        c = self.config
        if now - group.last_failure > c.node_group_backoff_reset or group.backoff == 0:
            group.backoff = c.initial_node_group_backoff
        else:
            group.backoff = min(group.backoff * 2, c.max_node_group_backoff)
        group.last_failure = now
        group.backoff_until = now + group.backoff
        self._record("FailedScaleUp", group.config.name, f"{why}; backing off {group.backoff:.0f}s")

    def _deleted(self, name: str) -> None:
        group = self.groups.get(self._owner.get(name, ""))
        if group is not None:
            group.nodes.pop(name, None)

    # -- templates and the snapshot -----------------------------------------------------
    def _template(self, group: _Group, zone: str, name: str) -> tuple[Node, Resources]:
        it, g = group.template, group.config
        labels = {}  # what SimCloud.launch_node writes: what a kubelet on the instance reports
        for key in (wk.ARCH, wk.OS, wk.REGION):
            req = it.requirements.get(key)
            if req is not None and not req.complement and req.values:
                labels[key] = sorted(req.values)[0]
        labels.update({wk.INSTANCE_TYPE: it.name, wk.ZONE: zone, wk.HOSTNAME: name, NODE_GROUP_LABEL: g.name})
        labels[CAPACITY_LABEL] = "SPOT" if g.capacity_type == wk.CAPACITY_TYPE_SPOT else "ON_DEMAND"
        labels.update(g.labels)
        node = Node(name, labels=labels, taints=g.taints, capacity=it.capacity, allocatable=it.allocatable)
        overhead = EMPTY
        for key in sorted(self._cluster.daemonsets):
            ds = self._cluster.daemonsets[key].template
            if taints_ok(ds, node) and node_affinity_ok(ds, node):
                overhead = overhead + podinfo.pod_requests(ds)
        return node, overhead

    def _world(self) -> World:
        """Existing nodes (minus those being deleted) with their pods, then upcoming templates."""
        if len(self._matches) > 64:  # forget selectors of rolled-out templates
            self._matches.clear()
        world = World(self._cluster.namespaces, self._matches)
        on: dict[str, list[Pod]] = {}
        for pod in self._cluster.pods.values():
            where = pod.node_name or pod.nominated_node
            if where and not pod.is_terminal():
                on.setdefault(where, []).append(pod)
        for name in sorted(self._cluster.nodes):
            node = self._cluster.nodes[name]
            if (
                node.deleting
                or name in self.scale_down.deleting
                or any(t.key == TO_BE_DELETED for t in node.taints)
            ):
                continue
            pods = tuple(sorted(on.get(name, ()), key=lambda p: p.key))
            cached = self._used.get(name)
            if cached is None or cached[0] != pods:  # identical pod objects: same requests
                cached = (pods, requested(pods))
                self._used[name] = cached
            world.add_node(node, pods, used=cached[1])
        for name in [n for n in self._used if n not in self._cluster.nodes]:
            del self._used[name]
        for group in self.groups.values():
            for req in sorted(group.requests.values(), key=lambda r: r.id):
                self._add_template(world, group, req.zone, f"upcoming-{group.config.name}-{req.id}")
        return world

    def _add_template(self, world: World, group: _Group, zone: str, name: str) -> SimNode:
        node, overhead = self._template(group, zone, name)
        return world.add_node(node, upcoming=True, reserved=overhead)

    # -- scale-up -----------------------------------------------------------------------
    def _unschedulable(self, now: float) -> list[Pod]:
        out = []
        cutoff = self.config.expendable_pods_priority_cutoff
        for pod in self._cluster.pods.values():
            if (
                pod.node_name
                or pod.nominated_node
                or pod.deleting
                or pod.is_terminal()
                or pod.scheduling_gated
            ):
                continue
            owner = pod.controller
            if pod.priority < cutoff or (owner is not None and owner.kind == "DaemonSet"):
                continue
            delay = self.config.new_pod_scale_up_delay
            if SCALE_UP_DELAY in pod.annotations:
                with contextlib.suppress(ValueError):
                    delay = parse_duration(pod.annotations[SCALE_UP_DELAY]) or 0.0
            if now - pod.created >= delay:
                out.append(pod)
        return sorted(out, key=lambda p: (-p.priority, p.created, p.key))

    def _scale_up(self, world: World, pending: list[Pod], now: float) -> bool:
        """Filter out what fits existing or upcoming nodes (kept in ``world``), then scale up."""
        names = list(world.nodes)
        failed: set[tuple[object, ...]] = set()
        remaining: list[Pod] = []
        for pod in pending:  # filter out schedulable: existing and upcoming nodes
            sig = (podinfo.signature(pod), pod.requests)
            target = None if sig in failed else world.first_fit(pod, names)
            if target is None:
                failed.add(sig)
                remaining.append(pod)
            else:
                world.place(pod, target)
        if not remaining:
            return False
        total = sum(g.size() for g in self.groups.values())
        options = []
        for group in self.groups.values():
            room = group.config.max - group.size()
            if self.config.max_nodes_total > 0:
                room = min(room, self.config.max_nodes_total - total)
            if group.backoff_until > now or room <= 0:
                continue
            mark = world.mark()
            option = self._estimate(world, group, remaining, min(room, self.config.max_nodes_per_scaleup))
            world.revert(mark)
            if option.zones:
                options.append(option)
        if not options:
            self._record("NotTriggerScaleUp", "", f"{len(remaining)} pending pods fit no node group")
            return False
        best = self._expand(options)
        for zone in best.zones:
            self._request(best.group, zone, now)
        pods = tuple(p.key for p in best.pods)
        self.scale_ups.append(ScaleUp(now, best.group.config.name, len(best.zones), pods))
        self._record(
            "TriggeredScaleUp",
            best.group.config.name,
            f"pod triggered scale-up: {best.group.config.name} {best.group.size() - len(best.zones)}"
            f"->{best.group.size()} (max: {best.group.config.max}) for {len(pods)} pods",
        )
        return True

    def _estimate(self, world: World, group: _Group, pods: Sequence[Pod], limit: int) -> _Option:
        """CA's binpacking estimator on copies of the group's template node."""
        alloc = group.template.allocatable
        classes: dict[tuple[object, ...], list[Pod]] = {}
        for pod in pods:
            owner = pod.controller
            key = (owner.uid or owner.name if owner else pod.key, podinfo.signature(pod), pod.requests)
            classes.setdefault(key, []).append(pod)

        def score(pod: Pod) -> float:
            return sum(pod.requests.get(r) / alloc.get(r) for r in (CPU, MEMORY) if alloc.get(r) > 0)

        ordered = sorted(classes.values(), key=lambda c: -score(c[0]))
        counts = group.zone_counts()
        opened: list[SimNode] = []
        helped: list[Pod] = []

        def place(pod: Pod, target: SimNode | None) -> bool:
            if target is not None:
                world.place(pod, target)
                helped.append(pod)
            return target is not None

        for members in ordered:
            i = 0
            while i < len(members) and place(
                members[i], world.first_fit(members[i], [s.name for s in opened])
            ):
                i += 1
            for pod in members[i:]:
                last = [opened[-1].name] if opened else []
                if place(pod, world.first_fit(pod, last)):
                    continue
                spread = any(c.when_unsatisfiable == "DoNotSchedule" for c in pod.spread)
                if spread and place(pod, world.first_fit(pod, [s.name for s in opened])):
                    continue  # autoscaler PR #8181: spread pods may fit an earlier node again
                sim = None if len(opened) >= limit else self._open(world, group, pod, counts, len(opened))
                if sim is None:
                    break
                opened.append(sim)
                place(pod, sim)
        return _Option(group, [s.node.labels[wk.ZONE] for s in opened], helped)

    def _open(
        self, world: World, group: _Group, pod: Pod, counts: dict[str, int], index: int
    ) -> SimNode | None:
        """A new template node in the least-populated zone where ``pod`` fits.

        CA itself gives a multi-zone ASG's template one zone; choosing per node models the
        usual one-ASG-per-zone set-up with ``--balance-similar-node-groups``.
        """
        for zone in sorted(group.zones, key=lambda z: (counts[z], group.zones.index(z))):
            mark = world.mark()
            sim = self._add_template(world, group, zone, f"template-{group.config.name}-{index}")
            if world.first_fit(pod, [sim.name]) is not None:
                counts[zone] += 1
                return sim
            world.revert(mark)
        return None

    def _expand(self, options: list[_Option]) -> _Option:
        for strategy in self.config.expander.split(","):
            if len(options) == 1:
                break
            scores = [self._score(strategy, o) for o in options]
            if strategy != "random":
                best = min(scores)
                options = [o for o, s in zip(options, scores, strict=True) if s == best]
        return options[0] if len(options) == 1 else self._rng.choice(options)

    def _score(self, strategy: str, option: _Option) -> float:
        """Lower is better."""
        group, nodes = option.group, len(option.zones)
        cpu = sum(p.requests.get(CPU) for p in option.pods)
        memory = sum(p.requests.get(MEMORY) for p in option.pods)
        if strategy == "least-waste":
            avail_cpu = group.template.capacity.get(CPU) * nodes
            avail_mem = group.template.capacity.get(MEMORY) * nodes
            return (avail_cpu - cpu) / max(avail_cpu, 1) + (avail_mem - memory) / max(avail_mem, 1)
        if strategy == "most-pods":
            return -len(option.pods)
        if strategy == "least-nodes":
            return nodes
        if strategy == "priority":
            return -group.config.priority
        if strategy == "price":
            prices = [
                o.price for o in group.template.offerings if o.capacity_type == group.config.capacity_type
            ]
            node_price = nodes * (min(prices) if prices else 0.0)
            pod_price = cpu / 1000 * _CPU_PRICE + memory / _GB * _MEM_PRICE
            return (node_price + 0.1) / (pod_price + 0.1)  # CA's stabilisation term, no unfitness penalty
        return 0.0

    # -- scale-down ---------------------------------------------------------------------
    def _scale_down(self, now: float, world: World | None) -> None:
        sd = self.scale_down
        recheck = any(at <= now for at, _ in sd.unremovable.values())
        if self._dirty or recheck:
            self._dirty = False
            candidates = [
                n
                for g in self.groups.values()
                for n in g.nodes
                if n in self._cluster.nodes
                and self._cluster.nodes[n].annotations.get(
                    "cluster-autoscaler.kubernetes.io/scale-down-disabled"
                )
                != "true"
            ]
            sd.update(world or self._world(), candidates, now)
        if sd.in_cooldown(now, self.last_scale_up):
            return
        leaving: dict[str, int] = {}
        for name in sd.deleting:
            owner = self._owner.get(name, "")
            leaving[owner] = leaving.get(owner, 0) + 1

        def allowed(name: str) -> bool:
            owner = self._owner.get(name, "")
            group = self.groups.get(owner)
            if group is None or len(group.nodes) - leaving.get(owner, 0) <= group.config.min:
                return False
            leaving[owner] = leaving.get(owner, 0) + 1
            return True

        unready = {n for n, node in self._cluster.nodes.items() if not node.ready}
        if sd.start(now, allowed=allowed, unready=unready):
            self._dirty = True

    # -- watch and overprovisioning -----------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        if event.kind not in ("Pod", "Node", "PodDisruptionBudget"):
            return
        if event.kind != "Pod":
            self._dirty = True
            return
        meta = event.obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        spec, status = event.obj.get("spec") or {}, event.obj.get("status") or {}
        seen = (  # a status-only change matters to scale-down only through PDBs
            spec.get("nodeName"),
            status.get("nominatedNodeName"),
            meta.get("deletionTimestamp"),
            status.get("phase") in ("Succeeded", "Failed"),
            bool(self._cluster.pdbs) and str(status.get("conditions")),
        )
        if event.type == "DELETED" or self._seen.get(key) != seen:
            self._dirty = True
            self._seen[key] = seen
        op = self.config.overprovisioning
        paused = (
            op is not None
            and meta.get("namespace") == op.namespace
            and (meta.get("labels") or {}).get("app") == op.name
        )
        if event.type == "DELETED":
            del self._seen[key]
            self._local.pop(key, None)
            self._paused.discard(key)
            for known in self._matches.values():
                known.pop(key, None)
            if paused and not self._replenishing:
                self._replenishing = True
                self._loop.call_later(0.0, self._replenish, name=f"{self.name}:overprovisioning")
            return
        if event.type == "ADDED":
            local = frozenset(
                str(v.get("name", ""))
                for v in spec.get("volumes") or []
                if "hostPath" in v
                or ("emptyDir" in v and (v.get("emptyDir") or {}).get("medium") != "Memory")
            )
            if local:
                self._local[key] = local
            if paused:
                self._paused.add(key)
        if paused and spec.get("nodeName") and status.get("phase", "Pending") == "Pending":
            name, namespace = meta.get("name", ""), meta.get("namespace", "")
            self._loop.call_later(0.0, lambda: self._started(name, namespace), name=f"{self.name}:pause")

    def _started(self, name: str, namespace: str) -> None:
        ready = {"type": "Ready", "status": "True"}
        with contextlib.suppress(errors.NotFound):
            self._kube.patch("Pod", name, {"status": {"phase": "Running", "conditions": [ready]}}, namespace)

    def _replenish(self) -> None:
        """Keep ``overprovisioning.pods`` pause pods (what their ReplicaSet would do)."""
        self._replenishing = False
        op = self.config.overprovisioning
        if op is None or op.pods <= 0:
            return
        pods = self._cluster.pods
        live = [k for k in self._paused if k in pods and not pods[k].deleting]
        for _ in range(op.pods - len(live)):
            owner = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": op.name,
                "uid": f"uid-{op.name}",
                "controller": True,
            }
            self._kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{op.name}-{next(self._pause_ids):05d}",
                        "namespace": op.namespace,
                        "labels": {"app": op.name},
                        "ownerReferences": [owner],
                    },
                    "spec": {
                        "priority": op.priority,
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            {
                                "name": "pause",
                                "image": "registry.k8s.io/pause:3.9",
                                "resources": {"requests": dict(op.requests)},
                            }
                        ],
                    },
                    "status": {"phase": "Pending"},
                }
            )


# -- the scenario block --------------------------------------------------------------------

_DURATIONS = {
    "scanInterval": "scan_interval",
    "asgLaunchOverhead": "asg_launch_overhead",
    "newPodScaleUpDelay": "new_pod_scale_up_delay",
    "maxNodeProvisionTime": "max_node_provision_time",
    "scaleDownUnneededTime": "scale_down_unneeded_time",
    "scaleDownUnreadyTime": "scale_down_unready_time",
    "scaleDownDelayAfterAdd": "scale_down_delay_after_add",
    "scaleDownDelayAfterDelete": "scale_down_delay_after_delete",
    "scaleDownDelayAfterFailure": "scale_down_delay_after_failure",
    "maxPodEvictionTime": "max_pod_eviction_time",
    "nodeDeleteDelayAfterTaint": "node_delete_delay_after_taint",
}
_SCALARS = {
    "expander": ("expander", str),
    "scaleDownUtilizationThreshold": ("scale_down_utilization_threshold", float),
    "scaleDownEnabled": ("scale_down_enabled", bool),
    "maxNodesTotal": ("max_nodes_total", int),
    "maxNodesPerScaleUp": ("max_nodes_per_scaleup", int),
    "expendablePodsPriorityCutoff": ("expendable_pods_priority_cutoff", int),
    "maxScaleDownParallelism": ("max_scale_down_parallelism", int),
    "maxDrainParallelism": ("max_drain_parallelism", int),
    "skipNodesWithSystemPods": ("skip_nodes_with_system_pods", bool),
    "skipNodesWithLocalStorage": ("skip_nodes_with_local_storage", bool),
}
_GROUP_KEYS = ("name", "instanceTypes", "capacityType", "min", "max", "priority", "labels", "taints", "zones")


def _duration(value: Any, where: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    try:
        seconds = parse_duration(str(value))
    except ValueError as exc:
        raise errors.InputError(f"{where}: {exc}") from None
    if seconds is None:
        raise errors.InputError(f"{where}: Never is not allowed here")
    return seconds


def _typed(value: Any, kind: type, where: str) -> Any:
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not ok:
        raise errors.InputError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def _strict(raw: Any, allowed: Sequence[str], where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise errors.InputError(f"{where}: expected a mapping, got {raw!r}")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise errors.InputError(f"{where}.{unknown[0]}: unknown field (expected one of {', '.join(allowed)})")
    return raw


def parse_config(raw: Any, *, where: str = "baseline.clusterAutoscaler") -> CAConfig:
    """Build a :class:`CAConfig` from the scenario block; errors name the field."""
    top = _strict(raw, ["nodeGroups", "overprovisioning", *_DURATIONS, *_SCALARS], where)
    kwargs: dict[str, Any] = {}
    for key, attr in _DURATIONS.items():
        if key in top:
            kwargs[attr] = _duration(top[key], f"{where}.{key}")
    for key, (attr, kind) in _SCALARS.items():
        if key in top:
            kwargs[attr] = _typed(top[key], kind, f"{where}.{key}")
    groups = []
    for i, g in enumerate(top.get("nodeGroups") or []):
        at = f"{where}.nodeGroups[{i}]"
        g = _strict(g, _GROUP_KEYS, at)
        if "name" not in g or "instanceTypes" not in g:
            raise errors.InputError(f"{at}: name and instanceTypes are required")
        taints = []
        for j, t in enumerate(g.get("taints") or []):
            t = _strict(t, ["key", "value", "effect"], f"{at}.taints[{j}]")
            if t.get("effect") not in EFFECTS or not t.get("key"):
                raise errors.InputError(f"{at}.taints[{j}]: need a key and an effect in {sorted(EFFECTS)}")
            taints.append(Taint(str(t["key"]), str(t["effect"]), str(t.get("value", ""))))
        groups.append(
            NodeGroupConfig(
                name=_typed(g["name"], str, f"{at}.name"),
                instance_types=tuple(_typed(x, str, f"{at}.instanceTypes") for x in g["instanceTypes"]),
                capacity_type=_typed(
                    g.get("capacityType", wk.CAPACITY_TYPE_ON_DEMAND), str, f"{at}.capacityType"
                ),
                min=_typed(g.get("min", 0), int, f"{at}.min"),
                max=_typed(g.get("max", 1000), int, f"{at}.max"),
                priority=_typed(g.get("priority", 0), int, f"{at}.priority"),
                labels={str(k): str(v) for k, v in (g.get("labels") or {}).items()},
                taints=tuple(taints),
                zones=tuple(str(z) for z in g.get("zones") or ()),
            )
        )
    if "overprovisioning" in top:
        at = f"{where}.overprovisioning"
        op = _strict(top["overprovisioning"], ["pods", "requests", "priority", "namespace", "name"], at)
        kwargs["overprovisioning"] = OverprovisioningConfig(
            pods=_typed(op.get("pods", 0), int, f"{at}.pods"),
            requests={
                str(k): str(v) for k, v in (op.get("requests") or {"cpu": "1", "memory": "2Gi"}).items()
            },
            priority=_typed(op.get("priority", -10), int, f"{at}.priority"),
            namespace=_typed(op.get("namespace", "overprovisioning"), str, f"{at}.namespace"),
            name=_typed(op.get("name", "overprovisioning"), str, f"{at}.name"),
        )
    return CAConfig(node_groups=tuple(groups), **kwargs)
