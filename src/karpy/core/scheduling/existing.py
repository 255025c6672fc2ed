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
from karpy.core.scheduling.nodeclaim import Unfit
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

    @classmethod
    def build(
        cls,
        state: StateNode,
        topology: Topology,
        daemonsets: Sequence[DaemonSet],
        *,
        under_consolidate_after: bool = False,
    ) -> ExistingNode:
        taints = scheduling_taints(state)
        bound = [p for p in state.pods if not p.is_terminal()]
        used = total(podinfo.pod_requests(p) for p in bound)
        node_labels = state.labels
        reqs = Requirements.from_labels(node_labels).add(Requirement.in_(labels.HOSTNAME, state.name))
        remaining_daemons = daemons.node_overhead(
            daemonsets, taints=taints, node_labels=Requirements.from_labels(node_labels), bound=bound
        )
        topology.register(labels.HOSTNAME, state.name)
        ports = [port for p in bound for port in p.host_ports]
        return cls(
            state,
            taints,
            state.allocatable - used,
            remaining_daemons,
            reqs,
            topology,
            ports,
            under_consolidate_after=under_consolidate_after,
        )

    @property
    def name(self) -> str:
        return self.state.name

    def can_add(self, pod: Pod, data: PodData) -> Requirements:
        if self.under_consolidate_after and pod.node_name:
            raise Unfit(
                "node is still inside its consolidateAfter window (consolidation moves no pods onto it)"
            )
        taint = first_untolerated(pod.tolerations, self.taints)
        if taint is not None:
            raise Unfit(f"did not tolerate taint {taint}")
        for port in pod.host_ports:
            if any(port.conflicts(used) for used in self.host_ports):
                raise Unfit(f"host port {port.port}/{port.protocol} already used")
        needed = self.requests + data.requests
        if not needed.fits(self.available):
            raise Unfit("not enough " + ", ".join(needed.exceeding(self.available)))
        errors = self.requirements.compatible(data.requirements)
        if errors:
            raise Unfit("incompatible requirements: " + "; ".join(errors))
        try:
            topo = self.topology.add_requirements(
                pod, self.taints, data.strict, self.requirements, frozenset()
            )
        except TopologyError as exc:
            raise Unfit(exc.describe()) from None
        errors = self.requirements.compatible(topo)
        if errors:
            raise Unfit("incompatible topology requirements: " + "; ".join(errors))
        return self.requirements.union_with(topo)

    def add(self, pod: Pod, data: PodData, reqs: Requirements) -> None:
        self.pods.append(pod)
        self.requests = self.requests + data.requests
        self.requirements = reqs
        self.topology.record(pod, self.taints, reqs, frozenset())
        self.host_ports.extend(pod.host_ports)
