"""An existing node (or a launched, not yet registered NodeClaim) as a place for pods.

Remaining room = allocatable − requests of bound pods − DaemonSet pods still expected.
``can_add`` checks, in Karpenter's order: taints (startup and known ephemeral taints
ignored while a managed node initializes), host ports, resources, label requirements
(no undefined keys allowed: the node's labels are all there is), then topology.
Used by :mod:`karpy.core.scheduling.scheduler`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from karpy.core.scheduling import daemons, podinfo
from karpy.core.scheduling.cache import ObjectMemo
from karpy.core.scheduling.nodeclaim import Unfit, domain_key
from karpy.core.scheduling.podinfo import PodData
from karpy.core.scheduling.topology import Topology, TopologyError
from karpy.core.snapshot import StateNode
from karpy.model import labels
from karpy.model.objects import DaemonSet, HostPort, Pod
from karpy.model.requirements import Requirement, Requirements
from karpy.model.resources import Resources, total
from karpy.model.taints import Taint, first_untolerated

__all__ = ["EPHEMERAL_TAINT_KEYS", "ExistingNode", "scheduling_taints"]

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


_Parts = tuple[tuple[Taint, ...], Resources, Resources, Requirements, tuple[HostPort, ...]]
# What an existing node contributes before any pod is placed: a pure function of the (frozen)
# StateNode and the DaemonSets, shared by the many solves of a disruption pass (issue 6).
_PARTS: ObjectMemo[tuple[tuple[DaemonSet, ...], _Parts]] = ObjectMemo(8192)


def _parts(state: StateNode, daemonsets: Sequence[DaemonSet]) -> _Parts:
    taints = scheduling_taints(state)
    bound = [p for p in state.pods if not p.is_terminal()]
    used = total(podinfo.pod_requests(p) for p in bound)
    label_reqs = Requirements.from_labels(state.labels)
    reqs = label_reqs.add(Requirement.in_(labels.HOSTNAME, state.name))
    remaining_daemons = daemons.node_overhead(daemonsets, taints=taints, node_labels=label_reqs, bound=bound)
    ports = tuple(port for p in bound for port in p.host_ports)
    return taints, state.allocatable - used, remaining_daemons, reqs, ports


@dataclass(slots=True)
class ExistingNode:
    state: StateNode
    taints: tuple[Taint, ...]
    available: Resources
    requests: Resources
    requirements: Requirements
    topology: Topology
    host_ports: list[HostPort] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    under_consolidate_after: bool = False
    _domains: dict[str, tuple[object, ...]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        state: StateNode,
        topology: Topology,
        daemonsets: Sequence[DaemonSet],
        *,
        under_consolidate_after: bool = False,
    ) -> ExistingNode:
        ds = tuple(daemonsets)
        _, (taints, available, remaining_daemons, reqs, ports) = _PARTS.get(
            state, lambda: (ds, _parts(state, ds)), check=lambda cached: cached[0] == ds
        )
        topology.register(labels.HOSTNAME, state.name)
        return cls(
            state,
            taints,
            available,
            remaining_daemons,
            reqs,
            topology,
            list(ports),
            under_consolidate_after=under_consolidate_after,
        )

    @property
    def name(self) -> str:
        return self.state.name

    def can_add(self, pod: Pod, data: PodData) -> Requirements:
        """The node's requirements with ``pod`` added; raises :class:`Unfit` (``monotone`` when the
        same pod would fail here for the rest of the solve: only topology can loosen)."""
        if self.under_consolidate_after and pod.node_name:
            raise Unfit(
                "node is still inside its consolidateAfter window (consolidation moves no pods onto it)",
                monotone=True,
            )
        taint = first_untolerated(pod.tolerations, self.taints)
        if taint is not None:
            raise Unfit(lambda: f"did not tolerate taint {taint}", monotone=True)
        for port in pod.host_ports:
            if any(port.conflicts(used) for used in self.host_ports):
                raise Unfit(f"host port {port.port}/{port.protocol} already used", monotone=True)
        if not self.requests.fits_with(data.requests, self.available):
            used, wanted, available = self.requests, data.requests, self.available
            raise Unfit(
                lambda: "not enough " + ", ".join((used + wanted).exceeding(available)), monotone=True
            )  # the message is built only if someone reads it
        node_reqs = self.requirements
        if not node_reqs.is_compatible(data.requirements):
            raise Unfit(
                lambda: "incompatible requirements: " + "; ".join(node_reqs.compatible(data.requirements)),
                monotone=not node_reqs.undefined(data.requirements),
            )
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
