"""The kube-scheduler stand-in: binds pending pods to Nodes as the default profile would.

``Binder.reconcile()`` runs on the loop (every ``interval`` seconds, or when woken): it
takes the pending pods (no ``nodeName``, not terminal, not being deleted, not gated) by
priority, then arrival, then name, filters the Nodes with kube-scheduler's filters
(NodeUnschedulable + Ready, TaintToleration for NoSchedule/NoExecute, NodeAffinity,
NodeResourcesFit incl. ``pods``, NodePorts, InterPodAffinity both ways, PodTopologySpread
``DoNotSchedule`` with ``minDomains``), prefers the pod's nominated node when it fits,
scores the rest (NodeResourcesFit LeastAllocated or MostAllocated ×1, BalancedAllocation
×1, TaintToleration for PreferNoSchedule ×3, preferred NodeAffinity ×2; ties by node
name) and binds through ``kube.bind``. A pod that fits nowhere may preempt strictly
lower-priority pods (DefaultPreemption: fewest PDB violations, then the lowest victims):
the victims are deleted and the pod nominated (``status.nominatedNodeName``); nominated
pods hold their node's room against pods of lower or equal priority. The filters shared with
the Cluster Autoscaler model are :mod:`karpy.sim.predicates`; the scores, :mod:`karpy.sim.scoring`;
the volume filters and PreBind of a run with storage, ``binder.volumes`` (:mod:`karpy.sim.volume_filter`).

It reads the typed pods and Nodes of ``state.Cluster`` (kept current by the feed) and
follows its own watch on the API server only to know which pods changed, so a pass with
nothing pending, or with nothing changed since a pass that bound nothing, costs O(1).
Pods with the same scheduling signature share per-node verdicts and raw scores, kept from
pass to pass: every change to a node's pods, nominations or Node object bumps its version
and is logged, so a signature judges again only the nodes logged since it last looked (and
nodes that came or went), not every node; a signature that found no node is not tried
again in a pass until something was bound or preempted.
Bindings (creation -> bind latency) and preemptions are recorded for the simulator's metrics.
Used by the simulator and by controller tests; deterministic.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from karpy.controllers.result import Result
from karpy.core.scheduling import podinfo
from karpy.core.scheduling.volumes import PodVolumes
from karpy.model import errors
from karpy.model.objects import Node, Pod, PodAffinityTerm, PodDisruptionBudget
from karpy.model.resources import EMPTY, Resources, total
from karpy.model.taints import NO_SCHEDULE, Taint, tolerates
from karpy.ports import Clock, KubeAPI, WatchEvent
from karpy.sim import predicates
from karpy.sim.predicates import CounterKey, InterPodPlan, Term, node_affinity_ok, taints_ok
from karpy.sim.scoring import LEAST_ALLOCATED, MOST_ALLOCATED, Entry, nonzero, pick, raw_scores
from karpy.sim.volume_filter import Provisioning, VolumeFilter
from karpy.state.cluster import Cluster

__all__ = [
    "LEAST_ALLOCATED",
    "MOST_ALLOCATED",
    "Binder",
    "Binding",
    "Preemption",
]

_UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", NO_SCHEDULE)
_WATCHED = frozenset({"Pod", "Node", "Namespace", "PersistentVolumeClaim", "PersistentVolume", "CSINode"})
_KEEP_COUNTERS = 64  # selector counters kept without pruning
_KEEP_CLASSES = 128  # pod classes whose per-node verdicts are kept from pass to pass
_MAX_LOG = 1 << 20  # node version bumps remembered before every class starts afresh


@dataclass(frozen=True, slots=True)
class Binding:
    pod: str  # namespace/name
    node: str
    created: float
    bound: float

    @property
    def latency(self) -> float:
        return self.bound - self.created


@dataclass(frozen=True, slots=True)
class Preemption:
    pod: str
    node: str
    victims: tuple[str, ...]
    at: float


_NODE_LOCAL = InterPodPlan()


@dataclass(slots=True)
class _ClassVerdicts:
    """One pod class's node-local verdicts: per node name (its version when judged, raw scores or
    None), the nodes it fits with their scores, for the nodes ``names`` as of the ``seen``-th
    version bump."""

    names: tuple[str, ...]
    seen: int
    entries: dict[str, tuple[int, Entry | None]] = field(default_factory=dict)
    fitting: dict[str, Entry] = field(default_factory=dict)


def _signature(pod: Pod, hint: str) -> tuple[object, ...]:
    """Everything feasibility and scores depend on: equal signatures fare alike on a node while
    its version (its pods, nominations and Node object) stays the same."""
    return (
        pod.namespace,
        tuple(sorted(pod.labels.items())),
        pod.requests,
        pod.host_ports,
        tuple(sorted(pod.node_selector.items())),
        pod.required_terms,
        pod.tolerations,
        pod.preferred_terms,
        pod.spread,
        pod.affinity,
        pod.anti_affinity,
        pod.priority,
        pod.nominated_node,
        hint,
    )


def _importance(pod: Pod) -> tuple[int, float, str]:
    """Sort key, most important first (higher priority, then started earlier)."""
    return (-pod.priority, pod.started if pod.started is not None else float("inf"), pod.key)


class Binder:
    """kube-scheduler for the in-memory API server (see the module docstring)."""

    def __init__(
        self,
        kube: KubeAPI,
        cluster: Cluster,
        clock: Clock,
        *,
        scoring: str = LEAST_ALLOCATED,
        name: str = "binder",
        interval: float = 1.0,
        volumes: Provisioning | None = None,
    ) -> None:
        if scoring not in (LEAST_ALLOCATED, MOST_ALLOCATED):
            raise ValueError(f"scoring must be {LEAST_ALLOCATED} or {MOST_ALLOCATED}, not {scoring!r}")
        self.name = name
        self.scoring = scoring
        self.interval = interval
        self.bindings: list[Binding] = []
        self.latencies: list[float] = []  # seconds from creation to bind, in bind order
        self.preemptions: list[Preemption] = []
        self._kube = kube
        self._cluster = cluster
        self._clock = clock
        self._seen: dict[str, float | None] = {}  # pod key -> when it was created (None: before us)
        self._dirty: set[str] = set()
        self._changed = True
        self._pending: dict[str, Pod] = {}
        self._where: dict[str, str] = {}  # occupying pod -> node
        self._on: dict[str, dict[str, Pod]] = {}  # node -> occupying pods
        self._used: dict[str, Resources] = {}
        self._scored: dict[str, tuple[int, int]] = {}  # node -> non-zero cpu, memory for scoring
        self._free: dict[str, Resources] = {}  # cache: allocatable - used
        self._prios: dict[str, dict[int, int]] = {}  # node -> priority -> live pods
        self._lowest: dict[int, int] = {}  # priority -> live pods, cluster-wide
        self._counters: dict[CounterKey, dict[str, int]] = {}
        self._counter_used: dict[CounterKey, int] = {}  # counter -> the pass that last read it
        self._passes = 0
        self._anti: dict[str, tuple[Term, ...]] = {}  # live occupying pods with required anti-affinity
        self._nominated_on: dict[str, dict[str, Pod]] = {}  # node -> pending pods nominated to it
        self._hints: dict[str, str] = {}  # Karpenter nominations: pod key -> node or NodeClaim name
        self._nodes: list[Node] = []  # this pass's Nodes, by name
        self._names: tuple[str, ...] = ()  # their names (the same tuple while they are the same)
        self._by_name: dict[str, Node] = {}
        self._version: dict[str, int] = {}  # node -> changes to its pods or nominations
        self.volumes = VolumeFilter(volumes, cluster, self._on, self._version)
        self._log: list[str] = []  # the node of each version bump, in order
        # per pod class: its per-node verdicts; kept across passes, as every change to what they
        # read bumps the node's version (and logs it)
        self._classes: dict[tuple[object, ...], _ClassVerdicts] = {}
        self._replaying = True
        kube.watch(self._on_event)
        self._replaying = False

    # -- public ----------------------------------------------------------------------------
    def nominate(self, pod_key: str, target: str) -> None:
        """Prefer ``target`` (a Node or NodeClaim name) for the pod, as a Karpenter nomination."""
        self._hints[pod_key] = target
        self._changed = True

    def pending(self) -> list[str]:
        """Keys of the pods waiting to be bound, sorted."""
        self._sync()
        return sorted(self._pending)

    def reconcile(self) -> Result:
        self._sync()
        if not self._pending or not self._changed:
            return Result(self.interval)
        self._changed = False
        self._passes += 1
        if len(self._counters) > _KEEP_COUNTERS:  # forget selectors of rolled-out templates
            for counter in [c for c, used in self._counter_used.items() if used < self._passes - 10]:
                del self._counters[counter], self._counter_used[counter]
        names = tuple(sorted(self._cluster.nodes))
        if names != self._names:
            self._names = names
        self._nodes = [self._cluster.nodes[n] for n in self._names]
        self._by_name = dict(zip(self._names, self._nodes, strict=True))
        if len(self._classes) > _KEEP_CLASSES or len(self._log) > _MAX_LOG:
            self._classes.clear()
            self._log.clear()
        order = sorted(self._pending.values(), key=lambda p: (-p.priority, self._created(p), p.key))
        failed: set[tuple[object, ...]] = set()
        for pod in order:
            current = self._pending.get(pod.key)
            if current is None:
                continue
            signature = _signature(current, self._hints.get(current.key, ""))
            if signature in failed:
                continue
            if self._schedule(current, signature):
                failed.clear()
            else:
                failed.add(signature)
        return Result(self.interval)

    # -- watch and index -------------------------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        if event.kind not in _WATCHED:
            return
        if event.kind != "Pod":
            self._free.clear()
            self._changed = True
            if event.kind == "Node":  # its node-local verdicts (taints, readiness, labels) may change
                self._bump((event.obj.get("metadata") or {}).get("name", ""))
            return
        meta = event.obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        if event.type == "ADDED" and key not in self._seen:
            self._seen[key] = None if self._replaying else self._clock.now()
        self._dirty.add(key)

    def _created(self, pod: Pod) -> float:
        seen = self._seen.get(pod.key)
        return pod.created if seen is None else seen

    def _sync(self) -> None:
        while self._dirty:
            key = self._dirty.pop()
            self._sync_one(key)

    def _sync_one(self, key: str) -> None:
        old_node = self._where.pop(key, None)
        old = self._on[old_node].pop(key) if old_node is not None else None
        if old is not None and old_node is not None:
            self._account(old, old_node, -1)
        was_pending = self._pending.pop(key, None)
        if was_pending is not None and was_pending.nominated_node:
            self._nominated_on.get(was_pending.nominated_node, {}).pop(key, None)
            self._bump(was_pending.nominated_node)
        pod = self._cluster.pods.get(key)
        if pod is None:
            self._seen.pop(key, None)
            self._hints.pop(key, None)
            self._changed = True
            return
        if pod.is_terminal():
            self._seen.pop(key, None)
            self._changed = self._changed or old is not None
            return
        if pod.node_name:
            self._seen.pop(key, None)  # bound: its creation time has been used
            self._where[key] = pod.node_name
            self._on.setdefault(pod.node_name, {})[key] = pod
            self._account(pod, pod.node_name, +1)
            self._hints.pop(key, None)
            if old is None or old.deleting != pod.deleting or old.labels != pod.labels:
                self._changed = True
        elif not pod.deleting and not pod.scheduling_gated:
            self._pending[key] = pod
            if pod.nominated_node:
                self._nominated_on.setdefault(pod.nominated_node, {})[key] = pod
                self._bump(pod.nominated_node)
            if was_pending is None or was_pending.nominated_node != pod.nominated_node:
                self._changed = True

    def _bump(self, node: str) -> None:
        self._version[node] = self._version.get(node, 0) + 1
        self._log.append(node)

    def _account(self, pod: Pod, node: str, sign: int) -> None:
        """Add (sign=+1) or remove (-1) an occupying pod's contribution to the node's totals."""
        self._bump(node)
        need = podinfo.pod_requests(pod)
        used = self._used.get(node, EMPTY)
        self._used[node] = used + need if sign > 0 else used - need
        self._free.pop(node, None)
        cpu, memory = nonzero(pod)
        scored = self._scored.get(node, (0, 0))
        self._scored[node] = (scored[0] + sign * cpu, scored[1] + sign * memory)
        if pod.deleting:
            return
        for by_priority in (self._prios.setdefault(node, {}), self._lowest):
            by_priority[pod.priority] = by_priority.get(pod.priority, 0) + sign
            if by_priority[pod.priority] <= 0:
                del by_priority[pod.priority]
        for (namespaces, selector), counts in self._counters.items():
            if (namespaces is None or pod.namespace in namespaces) and selector.matches(pod.labels):
                counts[node] = counts.get(node, 0) + sign
        if pod.anti_affinity:
            if sign > 0:
                self._anti[pod.key] = tuple(self._resolve(t, pod) for t in pod.anti_affinity)
            else:
                self._anti.pop(pod.key, None)

    def _counts(self, counter: CounterKey) -> dict[str, int]:
        """Live occupying pods per node matching ``counter`` (kept up to date once built)."""
        self._counter_used[counter] = self._passes
        counts = self._counters.get(counter)
        if counts is None:
            namespaces, selector = counter
            counts = {}
            for node, pods in self._on.items():
                n = sum(
                    1
                    for p in pods.values()
                    if not p.deleting
                    and (namespaces is None or p.namespace in namespaces)
                    and selector.matches(p.labels)
                )
                if n:
                    counts[node] = n
            self._counters[counter] = counts
        return counts

    # -- one pod ---------------------------------------------------------------------------
    def _schedule(self, pod: Pod, signature: tuple[object, ...]) -> bool:
        """Bind or preempt for ``pod``; True when something changed."""
        need = podinfo.pod_requests(pod)
        found = self.volumes.resolve(pod, self._created(pod))
        if found is not None and found.problem:
            return False  # (it waits for its claims)
        plan = self._plan(pod, {})
        target = pod.nominated_node or self._resolve_hint(pod.key)
        node = self._cluster.nodes.get(target) if target else None
        if node is not None and self._fits(pod, node, need, plan, {}) and not self.volumes.unfit(found, node):
            return self._bind(pod, node, found)
        # A node's node-local verdict (admission, resources, ports) and raw scores change only
        # with that node's pods, so pods of one class reuse the entries of unchanged nodes; the
        # inter-pod terms (plan) are checked per pod.
        fitting = self._fitting(pod, need, signature)
        if not plan.node_local() or plan.forbidden:
            by_name = self._by_name
            rows = [(name, entry) for name, entry in fitting.items() if plan.allows(by_name[name])]
        else:
            rows = list(fitting.items())
        allowed = self.volumes.keep(pod, self._created(pod), found, rows, self._by_name)
        if allowed:  # (the order of rows does not matter: ties by name)
            return self._bind(pod, self._by_name[pick(allowed)], found)
        return self._preempt(pod, need, found)

    def _fitting(self, pod: Pod, need: Resources, signature: tuple[object, ...]) -> dict[str, Entry]:
        """The nodes of this pass that ``pod``'s class fits by the node-local filters, with their raw
        scores: judged again only for nodes that are new to the class or whose version was bumped
        since it last looked."""
        cache = self._classes.get(signature)
        log = self._log
        if cache is None or len(log) - cache.seen > len(self._nodes):
            cache = self._classes[signature] = _ClassVerdicts(
                self._names, len(log), {} if cache is None else cache.entries
            )
            names: Iterable[str] = self._names
        else:
            changed = set(log[cache.seen :])
            if cache.names is not self._names:
                before, now = set(cache.names), set(self._names)
                changed |= before ^ now
                cache.names = self._names
            cache.seen = len(log)
            names = changed
        entries, fitting = cache.entries, cache.fitting
        for name in names:
            node = self._by_name.get(name)
            if node is None:
                fitting.pop(name, None)
                continue
            version = self._version.get(name, 0)
            hit = entries.get(name)
            if hit is None or hit[0] != version:
                fits = self._fits(pod, node, need, _NODE_LOCAL, {})
                hit = entries[name] = (version, self._entry(pod, node) if fits else None)
            if hit[1] is None:
                fitting.pop(name, None)
            else:
                fitting[name] = hit[1]
        return fitting

    def _resolve_hint(self, key: str) -> str:
        target = self._hints.get(key, "")
        if not target or target in self._cluster.nodes:
            return target
        claim = self._cluster.claims.get(target)
        if claim is None:
            return ""
        if claim.node_name:
            return claim.node_name
        for node in self._nodes:
            if claim.provider_id and node.provider_id == claim.provider_id:
                return node.name
        return ""

    def _admits(self, pod: Pod, node: Node) -> bool:
        """The node-local filters that removing pods cannot change."""
        if not node.ready or node.deleting:
            return False
        if node.unschedulable and not any(tolerates(t, _UNSCHEDULABLE) for t in pod.tolerations):
            return False
        return taints_ok(pod, node) and node_affinity_ok(pod, node)

    def _fits(
        self, pod: Pod, node: Node, need: Resources, plan: InterPodPlan, removed: Mapping[str, Pod]
    ) -> bool:
        if not self._admits(pod, node):
            return False
        free = self._free.get(node.name)
        if free is None:
            free = node.allocatable - self._used.get(node.name, EMPTY)
            self._free[node.name] = free
        reserved = self._nominated_on.get(node.name)
        if reserved:
            free = free - total(
                podinfo.pod_requests(q)
                for k, q in reserved.items()
                if k != pod.key and q.priority >= pod.priority and k in self._pending
            )
        if removed:
            free = free + total(podinfo.pod_requests(q) for q in removed.values())
        if not need.fits(free):
            return False
        if pod.host_ports:
            for key, other in self._on.get(node.name, {}).items():
                if key in removed:
                    continue
                if any(mine.conflicts(theirs) for mine in pod.host_ports for theirs in other.host_ports):
                    return False
        return plan.allows(node)

    # -- inter-pod constraints --------------------------------------------------------------
    def _resolve(self, term: PodAffinityTerm, owner: Pod) -> Term:
        return predicates.resolve_term(term, owner, self._cluster.namespaces)

    def _live_counts(self, term: Term, removed: Mapping[str, Pod]) -> Mapping[str, int]:
        """Live occupying pods per node matching ``term``, less the ``removed`` ones."""
        counter = term.counter
        if counter is None:
            return {}
        counts = self._counts(counter)
        if not removed:
            return counts
        gone = [q for q in removed.values() if term.matches(q)]
        return {node: n - sum(1 for q in gone if q.node_name == node) for node, n in counts.items()}

    def _domains(self, term: Term, removed: Mapping[str, Pod]) -> set[str]:
        """Topology values of the nodes holding a live pod that matches ``term``."""
        return predicates.term_domains(term, self._live_counts(term, removed), self._cluster.nodes.get)

    def _plan(self, pod: Pod, removed: Mapping[str, Pod]) -> InterPodPlan:
        """The pod's inter-pod terms against the occupying pods, less the ``removed`` ones."""
        plan = InterPodPlan()
        if pod.affinity:
            own = [self._resolve(t, pod) for t in pod.affinity]
            plan.set_affinity(pod, own, lambda t: self._domains(t, removed))
        for term in pod.anti_affinity:
            resolved = self._resolve(term, pod)
            plan.anti.append((resolved.key, self._domains(resolved, removed)))
        plan.forbidden = predicates.forbidden_domains(pod, self._anti_holders(removed))
        hard = predicates.hard_spread(pod)
        keys = [c.topology_key for c in hard]
        for c in hard:
            spread = predicates.spread_term(pod, c)
            counts = self._live_counts(spread, removed)
            plan.spread.append(
                predicates.spread_constraint(pod, c, spread, keys=keys, nodes=self._nodes, counts=counts)
            )
        return plan

    def _anti_holders(self, removed: Mapping[str, Pod]) -> Iterable[tuple[Node, tuple[Term, ...]]]:
        """The occupying pods' nodes and required anti-affinity terms, but the ``removed`` pods'."""
        for key, theirs in self._anti.items():
            if key in removed:
                continue
            node = self._cluster.nodes.get(self._where.get(key, ""))
            if node is not None:
                yield node, theirs

    # -- scoring and binding ---------------------------------------------------------------
    def _entry(self, pod: Pod, node: Node) -> Entry:
        """A feasible node's raw scores: (fit + balanced, intolerable PreferNoSchedule taints, affinity)."""
        return raw_scores(pod, node, self._scored.get(node.name, (0, 0)), self.scoring)

    def _bind(self, pod: Pod, node: Node, found: PodVolumes | None = None) -> bool:
        self.volumes.prebind(pod, node, found)
        try:
            self._kube.bind(pod.name, pod.namespace, node.name)
        except (errors.NotFound, errors.Conflict):
            self._dirty.add(pod.key)
            self._sync()
            return True
        now = self._clock.now()
        binding = Binding(pod.key, node.name, self._created(pod), now)
        self.bindings.append(binding)
        self.latencies.append(binding.latency)
        self.volumes.bound(binding, found)
        self._dirty.add(pod.key)
        self._sync()
        return True

    # -- preemption ------------------------------------------------------------------------
    def _preempt(self, pod: Pod, need: Resources, found: PodVolumes | None = None) -> bool:
        if not self._lowest or min(self._lowest) >= pod.priority:
            return False
        if pod.nominated_node and any(
            q.deleting and q.priority < pod.priority for q in self._on.get(pod.nominated_node, {}).values()
        ):
            return False  # victims are still terminating: wait for them
        allowed: dict[str, int] = {}
        candidates: list[tuple[int, int, int, int, str, tuple[Pod, ...]]] = []
        for node in self._nodes:
            if not self._may_preempt_on(pod, node, found):
                continue
            lower = sorted(
                (
                    q
                    for q in self._on.get(node.name, {}).values()
                    if q.priority < pod.priority and not q.deleting
                ),
                key=_importance,
            )
            removed = {q.key: q for q in lower}
            if not self._fits(pod, node, need, self._plan(pod, removed), removed):
                continue
            violating = self._violating(lower, allowed)
            victims: list[Pod] = []
            for q in [q for q in lower if q.key in violating] + [q for q in lower if q.key not in violating]:
                del removed[q.key]
                if not self._fits(pod, node, need, self._plan(pod, removed), removed):
                    removed[q.key] = q
                    victims.append(q)
            if not victims:  # pragma: no cover - it did not fit before, so something must go
                continue
            candidates.append(
                (
                    sum(1 for v in victims if v.key in violating),
                    max(v.priority for v in victims),
                    sum(v.priority for v in victims),
                    len(victims),
                    node.name,
                    tuple(sorted(victims, key=lambda v: v.key)),
                )
            )
        if not candidates:
            return False
        *_, node_name, victims_ = min(candidates)
        for victim in victims_:
            with contextlib.suppress(errors.NotFound):
                self._kube.delete("Pod", victim.name, victim.namespace)
        with contextlib.suppress(errors.NotFound):
            self._kube.patch("Pod", pod.name, {"status": {"nominatedNodeName": node_name}}, pod.namespace)
        self.preemptions.append(
            Preemption(pod.key, node_name, tuple(v.key for v in victims_), self._clock.now())
        )
        self._sync()
        return True

    def _may_preempt_on(self, pod: Pod, node: Node, found: PodVolumes | None) -> bool:
        """Whether ``node`` holds lower-priority pods and admits ``pod`` (and its volumes, as they are)."""
        prios = self._prios.get(node.name)
        if not prios or min(prios) >= pod.priority or not self._admits(pod, node):
            return False
        return not self.volumes.unfit(found, node)

    def _violating(self, pods: Iterable[Pod], allowed: dict[str, int]) -> set[str]:
        """Keys of the pods whose removal (in this order) would exceed a PDB's budget."""
        budgets = dict(allowed)
        out: set[str] = set()
        for pod in pods:
            for key, pdb in sorted(self._cluster.pdbs.items()):
                if (
                    pdb.namespace != pod.namespace
                    or pdb.selector is None
                    or not pdb.selector.matches(pod.labels)
                ):
                    continue
                if key not in allowed:
                    allowed[key] = budgets[key] = self._pdb_allowed(pdb)
                budgets[key] -= 1
                if budgets[key] < 0:
                    out.add(pod.key)
        return out

    def _pdb_allowed(self, pdb: PodDisruptionBudget) -> int:
        assert pdb.selector is not None
        return predicates.pdb_allowed(pdb, self._cluster.pods.values())
