"""The Cluster Autoscaler model's cluster snapshot: simulated nodes, their pods, the Filter plugins.

:class:`World` is CA's ``ClusterSnapshot`` with the Filter plugins only (no scoring): simulated
nodes (existing, upcoming and template nodes), the pods on them, and :meth:`World.first_fit` =
NodeUnschedulable, NodeResourcesFit (incl. ``pods``), TaintToleration, NodeAffinity, NodePorts,
InterPodAffinity both ways, PodTopologySpread ``DoNotSchedule`` (with ``minDomains``) and, given
the storage's ``volumes`` context, the volume filters (a bound volume's zone, an unbound claim's
class topology, CSI attach limits: a template node's from its instance type), the predicates of
:mod:`karpy.sim.predicates` that the binder applies too. Changes are journaled so
that ``revert(mark)`` forks the snapshot as CA's ``Fork``/``Revert`` do. Scale-up
(:mod:`karpy.sim.ca.scaleup`) and scale-down (:mod:`karpy.sim.ca.scaledown`) share it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.core.scheduling import podinfo
from karpy.core.scheduling import volumes as volumes_mod
from karpy.model.objects import Node, Pod, PodAffinityTerm
from karpy.model.resources import CPU, EMPTY, MEMORY, PODS, Resources, total
from karpy.sim import predicates
from karpy.sim.predicates import CounterKey, InterPodPlan, Term, node_affinity_ok, taints_ok

__all__ = ["MatchCache", "SimNode", "World", "requested"]

MatchCache = dict[CounterKey, dict[str, tuple[Pod, bool]]]  # selector -> pod -> (pod object, matches)


@dataclass(slots=True)
class SimNode:
    node: Node
    free: Resources
    pods: dict[str, Pod] = field(default_factory=dict)
    upcoming: bool = False

    @property
    def name(self) -> str:
        return self.node.name


class World:
    """CA's cluster snapshot: simulated nodes and pods, Filter plugins, fork by journal."""

    def __init__(
        self,
        namespaces: Mapping[str, Mapping[str, str]],
        matches: MatchCache | None = None,
        volumes: volumes_mod.VolumeContext | None = None,
    ) -> None:
        """``matches`` caches selector matches per pod object across snapshots (the caller's);
        ``volumes``: the storage the volume filters read (None: pods' volumes are not checked)."""
        self.nodes: dict[str, SimNode] = {}
        self._volumes = volumes
        self._matches: MatchCache = {} if matches is None else matches
        self._namespaces = namespaces
        self._counters: dict[CounterKey, dict[str, int]] = {}
        self._anti: dict[str, tuple[str, tuple[Term, ...]]] = {}  # pod -> (node, terms)
        self._log: list[tuple[str, Any, Any]] = []

    # -- changes (journaled) ------------------------------------------------------------
    def mark(self) -> int:
        return len(self._log)

    def revert(self, mark: int) -> None:
        while len(self._log) > mark:
            op, a, b = self._log.pop()
            if op == "place":
                self._unplace(a, self.nodes[b])
            elif op == "add":
                self._drop(a)
            else:
                self.nodes[a.name] = a
                for pod in b:
                    self._place(pod, a)

    def add_node(
        self,
        node: Node,
        pods: Iterable[Pod] = (),
        *,
        upcoming: bool = False,
        reserved: Resources = EMPTY,
        used: Resources | None = None,
    ) -> SimNode:
        """Add a node with its pods (in bulk); ``reserved`` = DaemonSet overhead of a template,
        ``used`` = the pods' requests when the caller knows them."""
        chosen = list(pods)
        if used is None:
            used = requested(chosen)
        used = used + reserved if reserved else used
        sim = SimNode(node, node.allocatable - used, {p.key: p for p in chosen}, upcoming)
        self.nodes[node.name] = sim
        self._log.append(("add", node.name, None))
        for pod in chosen:
            for (namespaces, selector), counts in self._counters.items():
                if (namespaces is None or pod.namespace in namespaces) and selector.matches(pod.labels):
                    counts[sim.name] = counts.get(sim.name, 0) + 1
            if pod.anti_affinity:
                self._anti[pod.key] = (sim.name, tuple(self._resolve(t, pod) for t in pod.anti_affinity))
        return sim

    def remove_node(self, name: str) -> list[Pod]:
        """Take a node out with its pods (returned, sorted); revertible."""
        sim = self.nodes[name]
        pods = [sim.pods[k] for k in sorted(sim.pods)]
        self._drop(name)
        self._log.append(("remove", sim, pods))
        return pods

    def place(self, pod: Pod, sim: SimNode) -> None:
        self._place(pod, sim)
        self._log.append(("place", pod.key, sim.name))

    def _place(self, pod: Pod, sim: SimNode) -> None:
        sim.pods[pod.key] = pod
        sim.free = sim.free - podinfo.pod_requests(pod)
        for (namespaces, selector), counts in self._counters.items():
            if (namespaces is None or pod.namespace in namespaces) and selector.matches(pod.labels):
                counts[sim.name] = counts.get(sim.name, 0) + 1
        if pod.anti_affinity:
            self._anti[pod.key] = (sim.name, tuple(self._resolve(t, pod) for t in pod.anti_affinity))

    def _unplace(self, key: str, sim: SimNode) -> None:
        pod = sim.pods.pop(key)
        sim.free = sim.free + podinfo.pod_requests(pod)
        for (namespaces, selector), counts in self._counters.items():
            if (namespaces is None or pod.namespace in namespaces) and selector.matches(pod.labels):
                counts[sim.name] -= 1
        self._anti.pop(key, None)

    def _drop(self, name: str) -> None:
        sim = self.nodes[name]
        for key in list(sim.pods):
            self._unplace(key, sim)
        del self.nodes[name]

    # -- predicates ---------------------------------------------------------------------
    def _admits(self, pod: Pod, sim: SimNode, need: Resources) -> bool:
        """The node-local filters: NodeUnschedulable, NodeResourcesFit, taints, node affinity, ports."""
        node = sim.node
        if node.unschedulable or not need.fits(sim.free):
            return False
        if not taints_ok(pod, node) or not node_affinity_ok(pod, node):
            return False
        if pod.host_ports:
            for other in sim.pods.values():
                if any(a.conflicts(b) for a in pod.host_ports for b in other.host_ports):
                    return False
        return True

    def first_fit(self, pod: Pod, names: Iterable[str], *, hint: str = "") -> SimNode | None:
        """The first of ``names`` (``hint`` first) that the pod fits on."""
        need = podinfo.pod_requests(pod)
        cpu, memory = need.get(CPU), need.get(MEMORY)
        plan: InterPodPlan | None = None
        planned = False  # the plan is computed at the first node that passes the local filters
        found = self._volumes.resolve(pod) if self._volumes is not None and pod.volumes else None
        if found is not None and found.problem:
            return None
        for name in itertools.chain((hint,) if hint else (), names):
            sim = self.nodes.get(name)
            if sim is None:
                continue
            free = sim.free
            if cpu > free.get(CPU) or memory > free.get(MEMORY) or not self._admits(pod, sim, need):
                continue
            if found is not None and predicates.volume_verdict(
                found, sim.node, functools.partial(self._claims, sim)
            ):
                continue
            if not planned:
                plan, planned = self.plan(pod), True
            if plan is None or plan.allows(sim.node):
                return sim
        return None

    def _claims(self, sim: SimNode) -> volumes_mod.Attached:
        """The claims the node's (simulated) pods attach, per driver."""
        assert self._volumes is not None
        return volumes_mod.attached(sim.pods.values(), self._volumes.storage)

    def plan(self, pod: Pod) -> InterPodPlan | None:
        """The pod's inter-pod terms against the placed pods (None: there are none)."""
        hard = predicates.hard_spread(pod)
        if not (pod.affinity or pod.anti_affinity or hard or self._anti):
            return None
        plan = InterPodPlan()
        if pod.affinity:
            plan.set_affinity(pod, [self._resolve(t, pod) for t in pod.affinity], self._domains)
        for term in pod.anti_affinity:
            resolved = self._resolve(term, pod)
            plan.anti.append((resolved.key, self._domains(resolved)))
        holders = ((self.nodes[n].node, terms) for key, (n, terms) in self._anti.items() if key != pod.key)
        plan.forbidden = predicates.forbidden_domains(pod, holders)
        keys = [c.topology_key for c in hard]
        nodes = [sim.node for sim in self.nodes.values()] if hard else []
        for c in hard:
            spread = predicates.spread_term(pod, c)
            counts = self._counts(spread)
            plan.spread.append(
                predicates.spread_constraint(pod, c, spread, keys=keys, nodes=nodes, counts=counts)
            )
        return plan

    def _resolve(self, term: PodAffinityTerm, owner: Pod) -> Term:
        # the CA model reads matchLabelKeys but not mismatchLabelKeys
        return predicates.resolve_term(term, owner, self._namespaces, mismatch_label_keys=False)

    def _counts(self, term: Term) -> dict[str, int]:
        if term.selector is None:
            return {}
        counter = (term.namespaces, term.selector)
        counts = self._counters.get(counter)
        if counts is None:
            counts = {}
            known = self._matches.setdefault(counter, {})
            for sim in self.nodes.values():
                n = 0
                for key, pod in sim.pods.items():
                    seen = known.get(key)
                    if seen is None or seen[0] is not pod:
                        seen = known[key] = (pod, term.matches(pod))
                    n += seen[1]
                if n:
                    counts[sim.name] = n
            self._counters[counter] = counts
        return counts

    def _domains(self, term: Term) -> set[str]:
        """Topology values of the nodes holding a placed pod that matches ``term``."""
        return predicates.term_domains(term, self._counts(term), self._node)

    def _node(self, name: str) -> Node | None:
        sim = self.nodes.get(name)
        return None if sim is None else sim.node


def requested(pods: Sequence[Pod]) -> Resources:
    """What the pods request of a node, ``pods`` slots included."""
    return total(p.requests for p in pods) + Resources({PODS: len(pods)})
