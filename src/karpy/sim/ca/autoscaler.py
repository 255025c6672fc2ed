"""The Cluster Autoscaler baseline: CA's ``RunOnce`` over node groups (ASGs) on the loop.

:class:`ClusterAutoscaler` runs as the loop task ``cluster-autoscaler`` every ``scanInterval``
(first run one interval after start), with the documented defaults of ``docs/peers.md`` §1:
refresh node groups (registration of upcoming nodes; a node not registered
``maxNodeProvisionTime`` after its request is deleted and its group backed off 5 m, doubling to
30 m, reset after 3 h; ASGs replace vanished instances and keep ``min``) -> the unschedulable
pods, filtered against existing and upcoming nodes, then the binpacking estimator for every
node group and the expander (:mod:`karpy.sim.ca.scaleup`) -> one group scaled up per scan,
nodes requested through ``cloud.launch_node`` after ``asgLaunchOverhead`` (not billed), the
first instance type of the group's mixed-instances list offered in the zone (the next on
insufficient capacity, then other zones). No scale-up in a scan -> scale-down
(:mod:`karpy.sim.ca.scaledown`) outside the cooldowns (delay after add 10 m / delete 0 /
failure 3 m). Both work on a :class:`~karpy.sim.ca.world.World` of the existing nodes (minus
those being deleted) and the upcoming template nodes (:mod:`karpy.sim.ca.groups`). Optional
overprovisioning: ``pods`` pause pods (a ReplicaSet-owned set kept at its count) that the
binder preempts, so CA scales up for them as headroom. With ``volumes`` (the simulator's
storage: :class:`~karpy.sim.storage.Provisioner`) the World checks pods' volumes too, so a pod
whose volume is in one zone scales up only a group's node in that zone and moves, in the
scale-down simulation, only to nodes of that zone. Wired by the simulator; deterministic.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from karpy.core.scheduling import volumes as volumes_mod
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import Catalog
from karpy.model.objects import Pod
from karpy.model.resources import Resources
from karpy.model.taints import Taint
from karpy.ports import Clock, KubeAPI, WatchEvent
from karpy.runtime.loop import Loop
from karpy.sim.ca import scaleup
from karpy.sim.ca.config import EXPANDERS, CAConfig
from karpy.sim.ca.groups import NODE_GROUP_LABEL, NodeGroup, Request, add_template, next_zones, node_group
from karpy.sim.ca.scaledown import SCALE_DOWN_DISABLED, TO_BE_DELETED, ScaleDown
from karpy.sim.ca.scaleup import ScaleUp
from karpy.sim.ca.world import MatchCache, SimNode, World, requested
from karpy.state.cluster import Cluster

__all__ = ["ASGCloud", "CAEvent", "ClusterAutoscaler", "VolumeRules"]


@dataclass(frozen=True, slots=True)
class CAEvent:
    at: float
    reason: str  # TriggeredScaleUp, NotTriggerScaleUp, FailedScaleUp, ScaleDown, ScaleDownFailed, ...
    object: str
    message: str


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


class VolumeRules(Protocol):
    """The storage objects' volume rules now (:meth:`karpy.sim.storage.Provisioner.context`)."""

    def context(self) -> volumes_mod.VolumeContext: ...


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
        volumes: VolumeRules | None = None,
    ) -> None:
        if any(e not in EXPANDERS for e in config.expander.split(",")):
            raise errors.InputError(f"expander {config.expander!r}: expected one of {', '.join(EXPANDERS)}")
        self.config = config
        self.events: list[CAEvent] = []
        self.scale_ups: list[ScaleUp] = []
        self.last_scale_up = float("-inf")
        self._kube, self._cluster, self._clock, self._loop, self._cloud = kube, cluster, clock, loop, cloud
        self._rng = rng or random.Random(0)
        self._volumes = volumes
        self._types = {it.name: it for it in catalog.instance_types}
        self.groups = {
            g.name: node_group(g, self._types) for g in sorted(config.node_groups, key=lambda g: g.name)
        }
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
            for zone in next_zones(group, group.config.min - group.size()):
                self._request(group, zone, now, overhead=0.0)
        self._replenish()
        loop.add(self.name, self.run_once, at=now + config.scan_interval)

    # -- the loop task ------------------------------------------------------------------
    def run_once(self) -> float:
        now = self._clock.now()
        self._refresh(now)
        self._replenish()
        pending = scaleup.unschedulable(self._cluster.pods.values(), self.config, now)
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

    def _replace(self, group: NodeGroup, name: str, now: float) -> None:
        zone = group.nodes.pop(name)
        self.scale_down.forget(name)
        self._record("NodeReplaced", name, f"{group.config.name}: instance {name} is gone, ASG replaces it")
        self._request(group, zone, now)

    def _request(self, group: NodeGroup, zone: str, now: float, *, overhead: float | None = None) -> None:
        req = Request(next(self._ids), zone, now)
        group.requests[req.id] = req
        delay = self.config.asg_launch_overhead if overhead is None else overhead
        self._loop.call_later(delay, lambda: self._launch(group, req), name=f"{self.name}:launch")

    def _launch(self, group: NodeGroup, req: Request) -> None:
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

    def _failed(self, group: NodeGroup, now: float, why: str) -> None:
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
    def _world(self) -> World:
        """Existing nodes (minus those being deleted) with their pods, then upcoming templates."""
        if len(self._matches) > 64:  # forget selectors of rolled-out templates
            self._matches.clear()
        volumes = None if self._volumes is None else self._volumes.context()
        world = World(self._cluster.namespaces, self._matches, volumes)
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

    def _add_template(self, world: World, group: NodeGroup, zone: str, name: str) -> SimNode:
        return add_template(world, group, zone, name, self._cluster.daemonsets)

    # -- scale-up -----------------------------------------------------------------------
    def _scale_up(self, world: World, pending: list[Pod], now: float) -> bool:
        """Filter out what fits existing or upcoming nodes (kept in ``world``), then scale up."""
        remaining = scaleup.filter_schedulable(world, pending)
        if not remaining:
            return False
        daemonsets = self._cluster.daemonsets
        choices = scaleup.options(world, self.groups.values(), remaining, self.config, now, daemonsets)
        if not choices:
            self._record("NotTriggerScaleUp", "", f"{len(remaining)} pending pods fit no node group")
            return False
        best = scaleup.expand(choices, self.config.expander, self._rng)
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
                and self._cluster.nodes[n].annotations.get(SCALE_DOWN_DISABLED) != "true"
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
