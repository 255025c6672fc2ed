"""The Cluster Autoscaler model's node groups (ASGs) and their template nodes.

A :class:`NodeGroup` is one configured group with its upcoming nodes (requested, not yet
registered), its registered nodes by zone and its backoff state. :func:`node_group` checks a
:class:`~karpy.sim.ca.config.NodeGroupConfig` against the catalog (known instance types of one
cpu and memory shape, a valid capacity type, ``0 <= min <= max``) and picks its zones (every
zone offering the first type, unless configured). A template node (:func:`template_node`) is
the group's first instance type: allocatable minus the requests of the DaemonSets that tolerate
it and select it, with the labels its nodes get (arch, os, region, instance type, zone,
hostname, ``eks.amazonaws.com/capacityType`` and ``nodegroup``, the configured labels) and the
configured taints. Used by :mod:`karpy.sim.ca.scaleup` and :mod:`karpy.sim.ca.autoscaler`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from karpy.core.scheduling import podinfo
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.catalog import InstanceType
from karpy.model.objects import DaemonSet, Node
from karpy.model.resources import CPU, EMPTY, MEMORY, Resources
from karpy.sim.ca.config import NodeGroupConfig
from karpy.sim.ca.world import SimNode, World
from karpy.sim.cloud import CAPACITY_LABEL
from karpy.sim.predicates import node_affinity_ok, taints_ok

__all__ = [
    "NODE_GROUP_LABEL",
    "NodeGroup",
    "Request",
    "add_template",
    "next_zones",
    "node_group",
    "template_node",
]

NODE_GROUP_LABEL = wk.EKS_NODE_GROUP


@dataclass(slots=True)
class Request:
    """A node requested of the ASG and not registered yet (``name`` once the cloud launched it)."""

    id: int
    zone: str
    at: float
    name: str = ""


@dataclass(slots=True)
class NodeGroup:
    config: NodeGroupConfig
    template: InstanceType
    zones: tuple[str, ...]
    requests: dict[int, Request] = field(default_factory=dict)  # upcoming: requested, not registered
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


def node_group(g: NodeGroupConfig, types: Mapping[str, InstanceType]) -> NodeGroup:
    """The group of a configuration, checked against the catalog's ``types`` (by name)."""
    where = f"nodeGroups[{g.name}]"
    if not g.instance_types:
        raise errors.InputError(f"{where}.instanceTypes: at least one instance type is required")
    chosen = []
    for name in g.instance_types:
        if name not in types:
            raise errors.InputError(f"{where}.instanceTypes: {name} is not in the catalog")
        chosen.append(types[name])
    shape = (chosen[0].capacity.get(CPU), chosen[0].capacity.get(MEMORY))
    for it in chosen[1:]:
        if (it.capacity.get(CPU), it.capacity.get(MEMORY)) != shape:
            raise errors.InputError(
                f"{where}.instanceTypes: {it.name} differs in cpu or memory from {chosen[0].name}"
                " (a mixed-instances policy needs one shape)"
            )
    if g.capacity_type not in (wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_SPOT):
        raise errors.InputError(f"{where}.capacityType: expected on-demand or spot, not {g.capacity_type!r}")
    if not 0 <= g.min <= g.max:
        raise errors.InputError(f"{where}: need 0 <= min <= max, got min={g.min}, max={g.max}")
    zones = g.zones or tuple(
        sorted({o.zone for o in chosen[0].offerings if o.capacity_type == g.capacity_type})
    )
    return NodeGroup(g, chosen[0], zones)


def next_zones(group: NodeGroup, count: int) -> list[str]:
    """The zones of the group's next ``count`` nodes: each to the least-populated zone."""
    counts = group.zone_counts()
    out = []
    for _ in range(count):
        zone = min(group.zones, key=lambda z: (counts[z], group.zones.index(z)))
        counts[zone] += 1
        out.append(zone)
    return out


def template_node(
    group: NodeGroup, zone: str, name: str, daemonsets: Mapping[str, DaemonSet]
) -> tuple[Node, Resources]:
    """A node of the group in ``zone`` as its kubelet would report it, and its DaemonSet overhead."""
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
    for key in sorted(daemonsets):
        ds = daemonsets[key].template
        if taints_ok(ds, node) and node_affinity_ok(ds, node):
            overhead = overhead + podinfo.pod_requests(ds)
    return node, overhead


def add_template(
    world: World, group: NodeGroup, zone: str, name: str, daemonsets: Mapping[str, DaemonSet]
) -> SimNode:
    """Add a template node of the group to ``world`` (upcoming, its DaemonSet overhead reserved)."""
    node, overhead = template_node(group, zone, name, daemonsets)
    return world.add_node(node, upcoming=True, reserved=overhead)
