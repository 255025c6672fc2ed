"""An existing node (or a launched, not yet registered NodeClaim) as a place for pods.

Remaining room = allocatable − requests of bound pods − DaemonSet pods still expected.
``can_add`` checks, in Karpenter's order: taints (startup and known ephemeral taints
ignored while a managed node initializes), host ports, resources, label requirements
(no undefined keys allowed: the node's labels are all there is), the pod's volumes (their
topology against the node's labels, CSI attach limits: :mod:`~karpy.core.scheduling.volumes`),
then topology.
Used by :mod:`karpy.core.scheduling.scheduler`.

The solves of a disruption pass see the same (frozen) StateNodes again and again:
what a node contributes before any pod joins it is built once per StateNode, and so is the
verdict of the checks before topology for each kind of pod (:meth:`ExistingNode.known_unfit`),
which a node nothing has joined yet in this solve answers without checking again. The solver
builds a node's :class:`ExistingNode` only when a pod gets past what its :class:`NodeBase`
answers (:meth:`NodeBase.known_unfit`, :meth:`NodeBase.domain`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from karpy.core import lifecycle
from karpy.core.scheduling import daemons, podinfo, volumes
from karpy.core.scheduling.cache import IdentityCache, ObjectMemo, by_identity
from karpy.core.scheduling.nodeclaim import Unfit, domain_key
from karpy.core.scheduling.podinfo import PodData
from karpy.core.scheduling.topology import Topology, TopologyError
from karpy.core.snapshot import Snapshot, StateNode
from karpy.model import labels
from karpy.model.objects import DaemonSet, HostPort, NodePool, Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources, total
from karpy.model.taints import Taint, first_untolerated

__all__ = [
    "EPHEMERAL_TAINT_KEYS",
    "ExistingNode",
    "NodeBase",
    "Places",
    "cut",
    "existing_places",
    "in_consolidate_window",
    "node_base",
    "pod_kind",
    "register_hostnames",
    "scheduling_taints",
]

T = TypeVar("T")

EPHEMERAL_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "karpenter.sh/unregistered",
    }
)


def scheduling_taints(node: StateNode) -> tuple[Taint, ...]:
    """The taints pods must tolerate: a managed, uninitialized node hides startup/ephemeral ones."""
    taints = node.taints
    if node.managed and not node.initialized:
        startup = set(node.claim.startup_taints) if node.claim is not None else set()
        taints = tuple(
            t
            for t in taints
            if t not in startup
            and t.key not in EPHEMERAL_TAINT_KEYS
            and not t.key.startswith("readiness.k8s.io/")
        )
    return taints


class NodeBase:
    """What an existing node contributes before any pod is placed: a pure function of the (frozen)
    StateNode and the DaemonSets, shared by the many solves of a disruption pass.

    ``verdicts``: per pod kind (:func:`pod_kind`), what :meth:`ExistingNode._static` says of the
    node as built here (None: no objection), for the nodes no pod has joined yet in a solve.
    """

    __slots__ = (
        "available",
        "daemonsets",
        "domains",
        "node_pool",
        "ports",
        "requests",
        "requirements",
        "since",
        "taints",
        "verdicts",
    )

    def __init__(self, state: StateNode, daemonsets: tuple[DaemonSet, ...]) -> None:
        self.daemonsets = daemonsets
        self.taints = scheduling_taints(state)
        bound = [p for p in state.pods if not p.is_terminal()]
        used = total(podinfo.pod_requests(p) for p in bound)
        label_reqs = Requirements.from_labels(state.labels)
        self.available = state.allocatable - used
        self.requests = daemons.node_overhead(
            daemonsets, taints=self.taints, node_labels=label_reqs, bound=bound
        )
        self.requirements = label_reqs.add(Requirement.in_(labels.HOSTNAME, state.name))
        self.ports = tuple(port for p in bound for port in p.host_ports)
        self.node_pool = state.node_pool
        self.since = lifecycle.consolidatable_since(state.claim) if state.claim is not None else None
        self.verdicts: dict[int, Unfit | None] = {}
        self.domains: dict[str, tuple[object, ...]] = {}

    def known_unfit(self, under: bool, pod: Pod, data: PodData, kind: int) -> Unfit | None:
        """:meth:`ExistingNode.known_unfit` of this node before any pod joined it in a solve
        (``under``: inside its consolidateAfter window in this solve)."""
        if under and pod.node_name:
            return _IN_WINDOW_UNFIT
        verdicts = self.verdicts
        found = verdicts.get(kind, _UNKNOWN)
        if found is _UNKNOWN:
            found = _static(
                self.taints, self.ports, self.requests, self.available, self.requirements, pod, data
            )
            if len(verdicts) >= MAX_VERDICTS:
                verdicts.clear()
            verdicts[kind] = found
        return found  # type: ignore[return-value]

    def domain(self, key: str) -> tuple[object, ...]:
        """:meth:`ExistingNode.domain` of this node before any pod joined it."""
        found = self.domains.get(key)
        if found is None:
            found = self.domains[key] = domain_key(self.requirements.get_or_exists(key))
        return found


_BASES: ObjectMemo[NodeBase] = ObjectMemo(8192)


def node_base(state: StateNode, daemonsets: tuple[DaemonSet, ...]) -> NodeBase:
    """The (shared) :class:`NodeBase` of ``state`` with ``daemonsets``."""
    found = _BASES.get(
        state, functools.partial(NodeBase, state, daemonsets), check=lambda b: b.daemonsets == daemonsets
    )
    return found


class Places:
    """A snapshot's existing nodes in the solver's order (not marked for deletion nor deleting;
    initialized first, then by name) and their :class:`NodeBase` with the snapshot's DaemonSets.
    Shared by the solves of a pass (per node tuple), which take some nodes out and keep the
    order of the rest."""

    __slots__ = ("_fitting", "_node_positions", "_positions", "_windows", "active", "bases", "nodes")

    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = snapshot.nodes
        self._node_positions: dict[str, list[int]] | None = None
        active = [n for n in snapshot.nodes if not n.marked_for_deletion and not (n.node and n.node.deleting)]
        active.sort(key=lambda n: (not n.initialized, n.name))
        self.active: tuple[StateNode, ...] = tuple(active)
        ds = tuple(snapshot.daemonsets)
        self.bases: list[NodeBase] = [node_base(n, ds) for n in active]
        self._windows: tuple[Sequence[NodePool], float, tuple[bool, ...]] | None = None
        self._positions: dict[str, list[int]] | None = None
        self._fitting: dict[tuple[int, object], tuple[tuple[bool, ...] | None, tuple[int, ...]]] = {}

    def positions(self, names: frozenset[str]) -> list[int]:
        """The ascending indices in ``active`` of the nodes named in ``names``."""
        if self._positions is None:
            self._positions = _indices_by_name(self.active)
        return _named(self._positions, names)

    def nodes_without(self, names: frozenset[str]) -> tuple[StateNode, ...]:
        """The snapshot's nodes (all of them, in order) but those named in ``names``."""
        if self._node_positions is None:
            self._node_positions = _indices_by_name(self.nodes)
        return tuple(cut(self.nodes, _named(self._node_positions, names)))

    def fitting(self, unders: tuple[bool, ...] | None, pod: Pod, data: PodData, kind: int) -> tuple[int, ...]:
        """The indices of the nodes whose :class:`NodeBase` has no lasting objection to pods like
        ``pod`` (``kind``; ``unders``: the consolidateAfter windows of a consolidation solve, else
        None). A node left out rejects such a pod for the whole solve: a monotone objection only
        tightens as pods join it (:meth:`ExistingNode.can_add`). Remembered for the solves of a pass."""
        windows = unders if pod.node_name else None  # the window only keeps running pods off
        key = (kind, id(windows))
        found = self._fitting.get(key)
        if found is not None and found[0] is windows:
            return found[1]
        bases = self.bases
        out: list[int] = []
        for i, base in enumerate(bases):
            unfit = base.known_unfit(windows[i] if windows is not None else False, pod, data, kind)
            if unfit is None or not unfit.monotone:
                out.append(i)
        if len(self._fitting) >= MAX_FITTING:
            self._fitting.clear()
        kept = tuple(out)
        self._fitting[key] = (windows, kept)  # the entry keeps ``windows`` alive: its id stays valid
        return kept

    def inside_windows(self, node_pools: Sequence[NodePool], now: float) -> tuple[bool, ...]:
        """Per node, whether it is inside its NodePool's consolidateAfter window at ``now`` (a
        consolidation moves no running pod onto it); the last answer is kept for the pass."""
        last = self._windows
        if last is not None and last[0] is node_pools and last[1] == now:
            return last[2]
        after = {p.name: p.disruption.consolidate_after for p in node_pools}
        found = tuple(in_consolidate_window(b.since, after.get(b.node_pool), now) for b in self.bases)
        self._windows = (node_pools, now, found)
        return found


def _indices_by_name(states: Sequence[StateNode]) -> dict[str, list[int]]:
    index: dict[str, list[int]] = {}
    for i, state in enumerate(states):
        index.setdefault(state.name, []).append(i)
    return index


def _named(index: dict[str, list[int]], names: frozenset[str]) -> list[int]:
    """The ascending indices of every node named in ``names`` (a repeated name: all of its)."""
    return sorted(i for name in names for i in index.get(name, ()))


def cut(items: Sequence[T], removed: Sequence[int]) -> Sequence[T]:
    """``items`` without the ascending indices ``removed`` (the same object when none)."""
    if not removed:
        return items
    out: list[T] = []
    last = 0
    for i in removed:
        out.extend(items[last:i])
        last = i + 1
    out.extend(items[last:])
    return out


def existing_places(snapshot: Snapshot, cache: IdentityCache[Places]) -> Places:
    """The :class:`Places` of the snapshot's nodes and DaemonSets, shared through ``cache``."""
    return cache.get(
        (by_identity(snapshot.nodes), by_identity(snapshot.daemonsets)), lambda: Places(snapshot)
    )


MAX_VERDICTS = 64  # pod kinds remembered per node (cleared at once when full)
MAX_FITTING = 512  # (pod kind, windows) lists remembered per Places (cleared at once when full)

# A number per distinct pod kind, never reused (a cleared table hands out new ones, so the
# verdicts filed under old numbers are simply never found again).
_KINDS: dict[tuple[object, ...], int] = {}
_SERIAL = itertools.count()
MAX_KINDS = 4096


def pod_kind(pod: Pod, data: PodData) -> int:
    """A number for everything of a pod that :meth:`ExistingNode._static` reads. The requirements
    are keyed in their order, which the rejection message follows."""
    key = (pod.tolerations, pod.host_ports, data.requests, tuple(data.requirements.items()))
    kind = _KINDS.get(key)
    if kind is None:
        if len(_KINDS) >= MAX_KINDS:
            _KINDS.clear()
        kind = _KINDS[key] = next(_SERIAL)
    return kind


def in_consolidate_window(since: float | None, after: float | None, now: float) -> bool:
    """:func:`karpy.core.lifecycle.under_consolidate_after` from the claim's ``since`` and the
    pool's ``consolidateAfter`` (None: no claim, not initialized, no pool or no window)."""
    return after is not None and since is not None and now - since < after


@dataclass(slots=True)
class ExistingNode:
    state: StateNode
    base: NodeBase
    taints: tuple[Taint, ...]
    available: Resources
    requests: Resources
    requirements: Requirements
    topology: Topology
    host_ports: list[HostPort] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    under_consolidate_after: bool = False
    _domains: dict[str, tuple[object, ...]] = field(default_factory=dict)
    _attached: dict[str, frozenset[str]] | None = None  # claims attached per CSI driver (on first need)

    @classmethod
    def build_all(
        cls,
        states: Sequence[StateNode],
        topology: Topology,
        daemonsets: Sequence[DaemonSet],
        *,
        unders: Sequence[bool] | None = None,
        bases: Sequence[NodeBase] | None = None,
    ) -> list[ExistingNode]:
        """The places of ``states``, in order, each registered with the topology as a hostname.
        ``unders``: in a consolidation simulation, whether each node is inside its consolidateAfter
        window (:meth:`Places.inside_windows`; it then takes no running pods). ``bases``: the
        states' :func:`node_base` with ``daemonsets``, when the caller has them."""
        ds = tuple(daemonsets)
        if bases is None:
            bases = [node_base(state, ds) for state in states]
        if unders is None:
            unders = [False] * len(states)
        register_hostnames(states, topology)
        return [
            cls.materialize(state, base, topology, under)
            for state, base, under in zip(states, bases, unders, strict=True)
        ]

    @classmethod
    def materialize(cls, state: StateNode, base: NodeBase, topology: Topology, under: bool) -> ExistingNode:
        """The place of ``state`` in one solve, before any pod joined it."""
        return cls(
            state,
            base,
            base.taints,
            base.available,
            base.requests,
            base.requirements,
            topology,
            list(base.ports),
            [],
            under,
            {},
        )

    @property
    def name(self) -> str:
        return self.state.name

    def can_add(self, pod: Pod, data: PodData) -> Requirements:
        """The node's requirements with ``pod`` added; raises :class:`Unfit` (``monotone`` when the
        same pod would fail here for the rest of the solve: only topology can loosen)."""
        if self.under_consolidate_after and pod.node_name:
            raise Unfit(_IN_WINDOW, monotone=True)
        unfit = self._static(pod, data)
        if unfit is None and data.volumes is not None:
            unfit = self._volume_unfit(data.volumes)
        if unfit is not None:
            raise unfit
        node_reqs = self.requirements
        try:
            topo = self.topology.add_requirements(pod, self.taints, data.strict, node_reqs, frozenset())
        except TopologyError as exc:
            raise Unfit(
                exc.describe, monotone=exc.monotone, domains=(exc.group.key, exc.node_domains)
            ) from None
        if topo is node_reqs:
            return node_reqs
        if not node_reqs.is_compatible(topo):
            raise Unfit(
                lambda: "incompatible topology requirements: " + "; ".join(node_reqs.compatible(topo))
            )
        return node_reqs.union_with(topo)

    def _static(self, pod: Pod, data: PodData) -> Unfit | None:
        return _static(
            self.taints, self.host_ports, self.requests, self.available, self.requirements, pod, data
        )

    def _volume_unfit(self, found: volumes.PodVolumes) -> Unfit | None:
        """The pod's volumes here: their topology against the node's labels, then the CSI attach
        limits (the node's CSINode, else its instance type's) with what its pods attach already."""
        node_reqs, wanted = self.requirements, found.requirements
        if wanted is not None and not node_reqs.is_compatible(wanted):
            return Unfit(lambda: volumes.conflict(found, node_reqs), monotone=not node_reqs.undefined(wanted))
        context = found.context
        if not found.attach or context is None:
            return None
        state = self.state
        over = volumes.over_limit(
            self._usage(context), found.attach, context.limits(state.name, state.labels)
        )
        if over is None:
            return None
        return Unfit(lambda: volumes.limit_message(over, f"node {state.name}"), monotone=True)

    def _usage(self, context: volumes.VolumeContext) -> dict[str, frozenset[str]]:
        if self._attached is None:
            self._attached = volumes.attached(self.state.pods, context.storage)
        return self._attached

    def known_unfit(self, pod: Pod, data: PodData, kind: int) -> Unfit | None:
        """What :meth:`can_add` raises before topology: the consolidateAfter window of this solve,
        else, for a node no pod has joined yet in this solve, the verdict remembered per ``kind``
        (:func:`pod_kind`) across solves. None when there is no objection before topology or the
        node has taken pods (ask :meth:`can_add`). The Unfit returned is shared: read it, never
        raise it (a raise would tie the solve's frames to it)."""
        if self.under_consolidate_after and pod.node_name:
            return _IN_WINDOW_UNFIT
        if self.pods:
            return None
        return self.base.known_unfit(False, pod, data, kind)

    def domain(self, key: str) -> tuple[object, ...]:
        """This node's domains of ``key`` as a plain tuple (equal tuples: equal requirements)."""
        found = self._domains.get(key)
        if found is None:
            found = self._domains[key] = domain_key(self.requirements.get_or_exists(key))
        return found

    def add(self, pod: Pod, data: PodData, reqs: Requirements) -> None:
        self._domains.clear()
        self.pods.append(pod)
        self.requests = self.requests + data.requests
        self.requirements = reqs
        self.topology.record(pod, self.taints, reqs, frozenset())
        self.host_ports.extend(pod.host_ports)
        found = data.volumes
        if found is not None and found.attach and found.context is not None:
            self._attached = volumes.merged(self._usage(found.context), found.attach)


def register_hostnames(states: Sequence[StateNode], topology: Topology) -> None:
    """Register each node as a hostname domain with the topology (in order)."""
    if not topology.keyed(labels.HOSTNAME):
        if states:
            topology.forget()  # all that registering a hostname no group is keyed on does
        return
    for state in states:
        topology.register(labels.HOSTNAME, state.name)


def _static(
    taints: Sequence[Taint],
    host_ports: Sequence[HostPort],
    requests: Resources,
    available: Resources,
    node_reqs: Requirements,
    pod: Pod,
    data: PodData,
) -> Unfit | None:
    """The checks before topology, in order: taints, host ports, resources, requirements."""
    taint = first_untolerated(pod.tolerations, taints)
    if taint is not None:
        return Unfit(lambda: f"did not tolerate taint {taint}", monotone=True)
    for port in pod.host_ports:
        if any(port.conflicts(used) for used in host_ports):
            return Unfit(f"host port {port.port}/{port.protocol} already used", monotone=True)
    if not requests.fits_with(data.requests, available):
        return Unfit(
            lambda: "not enough " + ", ".join((requests + data.requests).exceeding(available)), monotone=True
        )  # the message is built only if someone reads it
    if not node_reqs.is_compatible(data.requirements):
        return Unfit(
            lambda: "incompatible requirements: " + "; ".join(node_reqs.compatible(data.requirements)),
            monotone=not node_reqs.undefined(data.requirements),
        )
    return None


_UNKNOWN = object()
_IN_WINDOW = "node is still inside its consolidateAfter window (consolidation moves no pods onto it)"
_IN_WINDOW_UNFIT = Unfit(_IN_WINDOW, monotone=True)
