"""The Cluster Autoscaler model's scale-up: which pods need nodes, and which group to grow.

:func:`unschedulable` picks the pods CA would act on (unbound, not nominated for preemption,
not DaemonSet pods, priority not below the expendable cutoff, older than
``newPodScaleUpDelay`` or the per-pod annotation); :func:`filter_schedulable` places on the
existing and upcoming nodes of the :class:`~karpy.sim.ca.world.World` those that fit there and
returns the rest. :func:`options` runs, for every group not backed off and with room,
:func:`estimate`: CA's binpacking estimator (equivalence groups by decreasing cpu+memory share;
first-fit onto the nodes opened so far, then the last opened node, and for spread pods again
all opened nodes as autoscaler PR #8181 does; a new node goes to the least-populated zone in
which the pod fits, which models one ASG per zone with ``--balance-similar-node-groups``).
:func:`expand` is the expander (``least-waste``, ``random``, ``most-pods``, ``price``,
``priority``, ``least-nodes``; comma-chained; ties broken with the caller's rng). Used by
:class:`~karpy.sim.ca.autoscaler.ClusterAutoscaler`.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from karpy.api.common import parse_duration
from karpy.core.scheduling import podinfo
from karpy.model import labels as wk
from karpy.model.objects import DaemonSet, Pod
from karpy.model.resources import CPU, MEMORY
from karpy.sim.ca.config import CAConfig
from karpy.sim.ca.groups import NodeGroup, add_template
from karpy.sim.ca.world import SimNode, World

__all__ = [
    "SCALE_UP_DELAY",
    "Option",
    "ScaleUp",
    "estimate",
    "expand",
    "filter_schedulable",
    "options",
    "score",
    "unschedulable",
]

SCALE_UP_DELAY = "cluster-autoscaler.kubernetes.io/pod-scale-up-delay"
_CPU_PRICE, _MEM_PRICE = 0.033174, 0.004446  # CA's price expander: USD per core-hour, per GB-hour
_GB = 1024**3


@dataclass(frozen=True, slots=True)
class ScaleUp:
    at: float
    group: str
    nodes: int
    pods: tuple[str, ...]


@dataclass(slots=True)
class Option:
    """Growing ``group`` by a node in each of ``zones`` would place ``pods``."""

    group: NodeGroup
    zones: list[str]
    pods: list[Pod]


def unschedulable(pods: Iterable[Pod], config: CAConfig, now: float) -> list[Pod]:
    """The pending pods CA scales up for, by priority, then age, then name."""
    out = []
    cutoff = config.expendable_pods_priority_cutoff
    for pod in pods:
        if pod.node_name or pod.nominated_node or pod.deleting or pod.is_terminal() or pod.scheduling_gated:
            continue
        owner = pod.controller
        if pod.priority < cutoff or (owner is not None and owner.kind == "DaemonSet"):
            continue
        delay = config.new_pod_scale_up_delay
        if SCALE_UP_DELAY in pod.annotations:
            with contextlib.suppress(ValueError):
                delay = parse_duration(pod.annotations[SCALE_UP_DELAY]) or 0.0
        if now - pod.created >= delay:
            out.append(pod)
    return sorted(out, key=lambda p: (-p.priority, p.created, p.key))


def filter_schedulable(world: World, pending: Sequence[Pod]) -> list[Pod]:
    """Place in ``world`` the pods that fit its existing or upcoming nodes; the others."""
    names = list(world.nodes)
    failed: set[tuple[object, ...]] = set()
    remaining: list[Pod] = []
    for pod in pending:
        sig = (podinfo.signature(pod), pod.requests)
        target = None if sig in failed else world.first_fit(pod, names)
        if target is None:
            failed.add(sig)
            remaining.append(pod)
        else:
            world.place(pod, target)
    return remaining


def options(
    world: World,
    groups: Iterable[NodeGroup],
    pods: Sequence[Pod],
    config: CAConfig,
    now: float,
    daemonsets: Mapping[str, DaemonSet],
) -> list[Option]:
    """Each group's estimate for ``pods`` (``world`` is left as it was), skipping groups backed
    off, at their maximum or beyond ``maxNodesTotal``, and estimates that open no node."""
    groups = list(groups)
    total = sum(g.size() for g in groups)
    out = []
    for group in groups:
        room = group.config.max - group.size()
        if config.max_nodes_total > 0:
            room = min(room, config.max_nodes_total - total)
        if group.backoff_until > now or room <= 0:
            continue
        mark = world.mark()
        option = estimate(world, group, pods, min(room, config.max_nodes_per_scaleup), daemonsets)
        world.revert(mark)
        if option.zones:
            out.append(option)
    return out


def estimate(
    world: World, group: NodeGroup, pods: Sequence[Pod], limit: int, daemonsets: Mapping[str, DaemonSet]
) -> Option:
    """CA's binpacking estimator on copies of the group's template node (placed in ``world``)."""
    alloc = group.template.allocatable
    classes: dict[tuple[object, ...], list[Pod]] = {}
    for pod in pods:
        owner = pod.controller
        key = (owner.uid or owner.name if owner else pod.key, podinfo.signature(pod), pod.requests)
        classes.setdefault(key, []).append(pod)

    def share(pod: Pod) -> float:
        return sum(pod.requests.get(r) / alloc.get(r) for r in (CPU, MEMORY) if alloc.get(r) > 0)

    ordered = sorted(classes.values(), key=lambda c: -share(c[0]))
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
        while i < len(members) and place(members[i], world.first_fit(members[i], [s.name for s in opened])):
            i += 1
        for pod in members[i:]:
            last = [opened[-1].name] if opened else []
            if place(pod, world.first_fit(pod, last)):
                continue
            spread = any(c.when_unsatisfiable == "DoNotSchedule" for c in pod.spread)
            if spread and place(pod, world.first_fit(pod, [s.name for s in opened])):
                continue  # autoscaler PR #8181: spread pods may fit an earlier node again
            sim = None if len(opened) >= limit else _open(world, group, pod, counts, len(opened), daemonsets)
            if sim is None:
                break
            opened.append(sim)
            place(pod, sim)
    return Option(group, [s.node.labels[wk.ZONE] for s in opened], helped)


def _open(
    world: World,
    group: NodeGroup,
    pod: Pod,
    counts: dict[str, int],
    index: int,
    daemonsets: Mapping[str, DaemonSet],
) -> SimNode | None:
    """A new template node in the least-populated zone where ``pod`` fits.

    CA itself gives a multi-zone ASG's template one zone; choosing per node models the
    usual one-ASG-per-zone set-up with ``--balance-similar-node-groups``.
    """
    for zone in sorted(group.zones, key=lambda z: (counts[z], group.zones.index(z))):
        mark = world.mark()
        sim = add_template(world, group, zone, f"template-{group.config.name}-{index}", daemonsets)
        if world.first_fit(pod, [sim.name]) is not None:
            counts[zone] += 1
            return sim
        world.revert(mark)
    return None


def expand(options: list[Option], expander: str, rng: random.Random) -> Option:
    """The option the (comma-chained) expander chooses; remaining ties by ``rng``."""
    for strategy in expander.split(","):
        if len(options) == 1:
            break
        scores = [score(strategy, o) for o in options]
        if strategy != "random":
            best = min(scores)
            options = [o for o, s in zip(options, scores, strict=True) if s == best]
    return options[0] if len(options) == 1 else rng.choice(options)


def score(strategy: str, option: Option) -> float:
    """An expander's score of an option; lower is better."""
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
        prices = [o.price for o in group.template.offerings if o.capacity_type == group.config.capacity_type]
        node_price = nodes * (min(prices) if prices else 0.0)
        pod_price = cpu / 1000 * _CPU_PRICE + memory / _GB * _MEM_PRICE
        return (node_price + 0.1) / (pod_price + 0.1)  # CA's stabilisation term, no unfitness penalty
    return 0.0
