"""The Cluster Autoscaler model's cluster snapshot and its scale-down (planner and actuator).

:class:`World` is CA's ``ClusterSnapshot`` with the Filter plugins only (no scoring): simulated
nodes (existing, upcoming and template nodes), the pods on them, and ``fits`` =
NodeUnschedulable, NodeResourcesFit (incl. ``pods``), TaintToleration, NodeAffinity (the
binder's functions), NodePorts, InterPodAffinity both ways and PodTopologySpread
``DoNotSchedule`` (with ``minDomains``). Changes are journaled so that ``revert(mark)`` forks
the snapshot as CA's ``Fork``/``Revert`` do. Scale-up (:mod:`karpy.sim.cluster_autoscaler`)
and scale-down share it.

:class:`ScaleDown` follows CA's defaults (``docs/peers.md`` §1.3): a node is unneeded when
``max(cpu, memory)`` requested/allocatable (DaemonSet and mirror pods counted) is below the
threshold and every pod that must move fits elsewhere (sequentially: pods' simulated new homes
are kept, so one drain can make another node needed); pods with ``safe-to-evict: "false"``,
without a controller, of a custom controller, with local storage (hostPath or a non-Memory
emptyDir not listed in ``safe-to-evict-local-volumes``), kube-system pods without a PDB, or
beyond what a PDB allows keep their node (``safe-to-evict: "true"`` overrides all but PDBs);
DaemonSet, mirror and expendable pods are not moved. A node that failed the simulation is
not re-checked for ``unremovable-node-recheck-timeout`` (5 m). Deletion, oldest unneeded first:
empty nodes in bulk and at most ``max-drain-parallelism`` (1) non-empty node at a time, within
``max-scale-down-parallelism`` (10) deletions in progress; group minimums hold. The node is tainted
``ToBeDeletedByClusterAutoscaler:NoSchedule`` and cordoned, its pods evicted through the
Eviction API (retried every 10 s for ``max-pod-eviction-time``, then the deletion fails and
the taint is removed), and ``node-delete-delay-after-taint`` after the taint the instance is
terminated. Deterministic: sorted iteration only.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from karpy.core.scheduling import podinfo
from karpy.model import errors
from karpy.model import labels as wk
from karpy.model.objects import Node, Pod, PodAffinityTerm, PodDisruptionBudget
from karpy.model.resources import CPU, EMPTY, MEMORY, PODS, Resources, total
from karpy.model.selectors import LabelSelector
from karpy.model.taints import NO_SCHEDULE
from karpy.ports import KubeAPI
from karpy.runtime.loop import Loop
from karpy.sim.binder import Term, node_affinity_ok, taints_ok
from karpy.state.cluster import Cluster

if TYPE_CHECKING:
    from karpy.sim.cluster_autoscaler import CAConfig

__all__ = [
    "SAFE_TO_EVICT",
    "SAFE_TO_EVICT_LOCAL_VOLUMES",
    "SCALE_DOWN_DISABLED",
    "TO_BE_DELETED",
    "ScaleDown",
    "SimNode",
    "World",
    "blocking_reason",
    "requested",
    "utilization",
]

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
_KNOWN_CONTROLLERS = frozenset({"ReplicaSet", "ReplicationController", "Job", "StatefulSet", "DaemonSet"})
_RECHECK = 300.0  # --unremovable-node-recheck-timeout
_EVICTION_RETRY = 10.0  # CA's EvictionRetryTime

CounterKey = tuple[frozenset[str] | None, LabelSelector]
MatchCache = dict[CounterKey, dict[str, tuple[Pod, bool]]]


def _label(node: Node, key: str) -> str | None:
    value = node.labels.get(key)
    return node.name if value is None and key == wk.HOSTNAME else value


@dataclass(slots=True)
class SimNode:
    node: Node
    free: Resources
    pods: dict[str, Pod] = field(default_factory=dict)
    upcoming: bool = False

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(slots=True)
class _Plan:
    """What one pod needs of a node beyond the node-local filters (computed once per pod)."""

    affinity: list[tuple[str, set[str]]] = field(default_factory=list)
    affinity_free: bool = False
    anti: list[tuple[str, set[str]]] = field(default_factory=list)
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    spread: list[tuple[str, dict[str, int], int, int, int]] = field(default_factory=list)

    def allows(self, node: Node) -> bool:
        if not self.affinity_free and any(_label(node, k) not in v for k, v in self.affinity):
            return False
        for key, values in self.anti:
            if _label(node, key) in values:
                return False
        if any(_label(node, k) == v for k, v in self.forbidden):
            return False
        for key, domains, minimum, own, skew in self.spread:
            value = _label(node, key)
            if value is None or domains.get(value, 0) + own - minimum > skew:
                return False
        return True


class World:
    """CA's cluster snapshot: simulated nodes and pods, Filter plugins, fork by journal."""

    def __init__(
        self, namespaces: Mapping[str, Mapping[str, str]], matches: MatchCache | None = None
    ) -> None:
        """``matches`` caches selector matches per pod object across snapshots (the caller's)."""
        self.nodes: dict[str, SimNode] = {}
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
        plan: _Plan | None = None
        planned = False  # the plan is computed at the first node that passes the local filters
        for name in itertools.chain((hint,) if hint else (), names):
            sim = self.nodes.get(name)
            if sim is None:
                continue
            free = sim.free
            if cpu > free.get(CPU) or memory > free.get(MEMORY) or not self._admits(pod, sim, need):
                continue
            if not planned:
                plan, planned = self.plan(pod), True
            if plan is None or plan.allows(sim.node):
                return sim
        return None

    def plan(self, pod: Pod) -> _Plan | None:
        hard = [c for c in pod.spread if c.when_unsatisfiable == "DoNotSchedule"]
        if not (pod.affinity or pod.anti_affinity or hard or self._anti):
            return None
        plan = _Plan()
        if pod.affinity:
            own = [self._resolve(t, pod) for t in pod.affinity]
            plan.affinity = [(t.key, self._domains(t)) for t in own]
            plan.affinity_free = not any(v for _, v in plan.affinity) and all(t.matches(pod) for t in own)
        for term in pod.anti_affinity:
            resolved = self._resolve(term, pod)
            plan.anti.append((resolved.key, self._domains(resolved)))
        for key, (node_name, terms) in self._anti.items():
            node = self.nodes[node_name].node
            for t in terms:
                value = _label(node, t.key)
                if value is not None and t.matches(pod) and key != pod.key:
                    plan.forbidden.add((t.key, value))
        keys = [c.topology_key for c in hard]
        for c in hard:
            selector = c.selector
            if selector is not None and c.match_label_keys:
                selector = selector.with_labels(
                    {k: pod.labels[k] for k in c.match_label_keys if k in pod.labels}
                )
            spread = Term(c.topology_key, frozenset({pod.namespace}), selector)
            counts = self._counts(spread)
            domains: dict[str, int] = {}
            for sim in self.nodes.values():
                node = sim.node
                if any(_label(node, k) is None for k in keys):
                    continue
                if c.node_affinity_policy == "Honor" and not node_affinity_ok(pod, node):
                    continue
                if c.node_taints_policy == "Honor" and not taints_ok(pod, node):
                    continue
                value = _label(node, c.topology_key) or ""
                domains[value] = domains.get(value, 0) + counts.get(sim.name, 0)
            minimum = min(domains.values()) if domains else 0
            if c.min_domains is not None and len(domains) < c.min_domains:
                minimum = 0
            plan.spread.append((c.topology_key, domains, minimum, int(spread.matches(pod)), c.max_skew))
        return plan

    def _resolve(self, term: PodAffinityTerm, owner: Pod) -> Term:
        namespaces: frozenset[str] | None = frozenset(term.namespaces)
        if term.namespace_selector is not None:
            selector = term.namespace_selector
            if selector.is_empty():
                namespaces = None
            else:
                chosen = set(term.namespaces)
                chosen |= {n for n, labels in self._namespaces.items() if selector.matches(labels)}
                namespaces = frozenset(chosen)
        elif not term.namespaces:
            namespaces = frozenset({owner.namespace})
        sel = term.selector
        if sel is not None and term.match_label_keys:
            sel = sel.with_labels({k: owner.labels[k] for k in term.match_label_keys if k in owner.labels})
        return Term(term.topology_key, namespaces, sel)

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
        out: set[str] = set()
        for name, n in self._counts(term).items():
            sim = self.nodes.get(name)
            if n > 0 and sim is not None:
                value = _label(sim.node, term.key)
                if value is not None:
                    out.add(value)
        return out


def requested(pods: Sequence[Pod]) -> Resources:
    """What the pods request of a node, ``pods`` slots included."""
    return total(p.requests for p in pods) + Resources({PODS: len(pods)})


# -- drainability --------------------------------------------------------------------------


def utilization(node: Node, pods: Iterable[Pod]) -> float:
    """CA's utilization: max(Σcpu requests / allocatable, Σmemory requests / allocatable)."""
    cpu = memory = 0
    for pod in pods:
        cpu += pod.requests.get(CPU)
        memory += pod.requests.get(MEMORY)
    out = 0.0
    for used, alloc in ((cpu, node.allocatable.get(CPU)), (memory, node.allocatable.get(MEMORY))):
        if alloc > 0:
            out = max(out, used / alloc)
    return out


def blocking_reason(
    pod: Pod, *, local_volumes: frozenset[str], has_pdb: bool, skip_system: bool, skip_local: bool
) -> str:
    """Why this pod keeps its node ("" = it can be evicted if it fits elsewhere)."""
    safe = pod.annotations.get(SAFE_TO_EVICT)
    if safe == "true":
        return ""
    if safe == "false":
        return "NotSafeToEvictAnnotation"
    owner = pod.controller
    if owner is None:
        return "NotReplicated"
    if owner.kind not in _KNOWN_CONTROLLERS:
        return "CustomControllerPod"
    if skip_local and local_volumes:
        allowed = {v.strip() for v in pod.annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "").split(",")}
        if not local_volumes <= allowed:
            return "LocalStorageRequested"
    if skip_system and pod.namespace == "kube-system" and not has_pdb:
        return "UnmovableKubeSystemPod"
    return ""


def _pdb_allowed(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> int:
    selector = pdb.selector
    if selector is None:
        return 0
    chosen = [
        p
        for p in pods
        if p.namespace == pdb.namespace
        and not p.deleting
        and not p.is_terminal()
        and selector.matches(p.labels)
    ]
    healthy = sum(1 for p in chosen if p.ready)

    def scaled(value: str) -> int:
        return -(-int(value[:-1]) * len(chosen) // 100) if value.endswith("%") else int(value)

    if pdb.min_available is not None:
        desired = scaled(str(pdb.min_available))
    elif pdb.max_unavailable is not None:
        desired = len(chosen) - scaled(str(pdb.max_unavailable))
    else:
        desired = len(chosen)
    return max(0, healthy - desired)


# -- scale-down ----------------------------------------------------------------------------


class Terminator(Protocol):
    def terminate_node(self, name: str) -> None: ...


@dataclass(slots=True)
class _Deletion:
    node: str
    empty: bool
    tainted: float


Record = Callable[[str, str, str], None]  # reason, object, message


class ScaleDown:
    """Unneeded-node tracking and node deletion (see the module docstring)."""

    def __init__(
        self,
        *,
        kube: KubeAPI,
        cluster: Cluster,
        loop: Loop,
        cloud: Terminator,
        config: CAConfig,
        local_volumes: Mapping[str, frozenset[str]],
        on_deleted: Callable[[str], None],
        record: Record,
    ) -> None:
        self._kube = kube
        self._cluster = cluster
        self._loop = loop
        self._cloud = cloud
        self._config = config
        self._local = local_volumes
        self._on_deleted = on_deleted
        self._record = record
        self.unneeded: dict[str, float] = {}  # node -> unneeded since
        self.unremovable: dict[str, tuple[float, str]] = {}  # node -> (recheck at, reason)
        self.deleting: dict[str, _Deletion] = {}
        self.last_delete = float("-inf")
        self.last_failure = float("-inf")
        self._hints: dict[str, str] = {}  # pod -> simulated destination
        self._moved: dict[str, int] = {}  # node -> pods that must move (0 = empty)

    def movable(self, pods: Iterable[Pod]) -> list[Pod]:
        """The pods a drain must re-home: not DaemonSet, mirror, expendable, terminal or terminating."""
        cutoff = self._config.expendable_pods_priority_cutoff
        out = []
        for pod in pods:
            owner = pod.controller
            if pod.is_terminal() or pod.deleting or pod.priority < cutoff:
                continue
            if owner is not None and owner.kind in ("DaemonSet", "Node"):
                continue
            out.append(pod)
        return out

    def update(self, world: World, candidates: Iterable[str], now: float) -> None:
        """Recompute the unneeded nodes; ``world`` holds every schedulable existing node."""
        config = self._config
        pdbs = sorted(self._cluster.pdbs.items())
        all_pods = list(self._cluster.pods.values())
        budgets: dict[str, int] = {}
        unneeded: dict[str, float] = {}
        moved: dict[str, int] = {}
        hints: dict[str, str] = {}
        for name in sorted(candidates, key=lambda n: (n not in self.unneeded, n)):
            recheck = self.unremovable.get(name)
            if (recheck is not None and recheck[0] > now) or name not in world.nodes:
                continue
            self.unremovable.pop(name, None)
            sim = world.nodes[name]
            threshold = config.scale_down_utilization_threshold
            if utilization(sim.node, sim.pods.values()) >= threshold:
                continue
            pods = self.movable(sim.pods.values())
            reason, used = "", dict(budgets)
            for pod in pods:
                matching = [
                    k
                    for k, b in pdbs
                    if b.namespace == pod.namespace
                    and b.selector is not None
                    and b.selector.matches(pod.labels)
                ]
                reason = blocking_reason(
                    pod,
                    local_volumes=self._local.get(pod.key, frozenset()),
                    has_pdb=bool(matching),
                    skip_system=config.skip_nodes_with_system_pods,
                    skip_local=config.skip_nodes_with_local_storage,
                )
                for key in matching:
                    if key not in used:
                        used[key] = _pdb_allowed(self._cluster.pdbs[key], all_pods)
                    used[key] -= 1
                    if used[key] < 0:
                        reason = reason or "NotEnoughPdb"
                if reason:
                    break
            if not reason:
                mark = world.mark()
                world.remove_node(name)
                others = [n for n in world.nodes if not world.nodes[n].upcoming]
                for pod in pods:
                    target = world.first_fit(pod, others, hint=self._hints.get(pod.key, ""))
                    if target is None:
                        reason = "NoPlaceToMovePods"
                        break
                    world.place(pod, target)
                    hints[pod.key] = target.name
                if reason:
                    world.revert(mark)
            if reason:
                self.unremovable[name] = (now + _RECHECK, reason)
                continue
            budgets = used
            unneeded[name] = self.unneeded.get(name, now)
            moved[name] = len(pods)
        self.unneeded, self._moved, self._hints = unneeded, moved, hints

    def in_cooldown(self, now: float, last_scale_up: float) -> bool:
        c = self._config
        return (
            now < last_scale_up + c.scale_down_delay_after_add
            or now < self.last_delete + c.scale_down_delay_after_delete
            or now < self.last_failure + c.scale_down_delay_after_failure
        )

    def start(self, now: float, *, allowed: Callable[[str], bool], unready: Collection[str]) -> list[str]:
        """Begin deleting the nodes unneeded long enough; ``allowed(node)`` guards group minimums.

        Empty nodes in bulk, then one non-empty node while no drain is running, all within
        ``max-scale-down-parallelism`` deletions in progress.
        """
        c = self._config
        due = []
        for name, since in sorted(self.unneeded.items(), key=lambda kv: (kv[1], kv[0])):
            wait = c.scale_down_unready_time if name in unready else c.scale_down_unneeded_time
            if name not in self.deleting and now - since >= wait:
                due.append(name)
        started: list[str] = []
        for name in due:
            if len(self.deleting) >= c.max_scale_down_parallelism:
                return started
            if self._moved.get(name, 1) == 0 and allowed(name):
                self._begin(name, now, empty=True)
                started.append(name)
        for name in due:
            drains = sum(1 for d in self.deleting.values() if not d.empty)
            if len(self.deleting) >= c.max_scale_down_parallelism or drains >= c.max_drain_parallelism:
                break
            if name not in self.deleting and self._moved.get(name, 0) > 0 and allowed(name):
                self._begin(name, now, empty=False)
                started.append(name)
        return started

    # -- actuation ----------------------------------------------------------------------
    def _begin(self, name: str, now: float, *, empty: bool) -> None:
        self.deleting[name] = _Deletion(name, empty, now)
        self.unneeded.pop(name, None)
        self._taint(name, add=True, now=now)
        kind = "empty" if empty else "non-empty"
        self._record("ScaleDown", name, f"marking {kind} node {name} for deletion")
        if empty:
            self._loop.call_later(self._config.node_delete_delay_after_taint, lambda: self._finish(name))
        else:
            self._drain(name)

    def _taint(self, name: str, *, add: bool, now: float) -> None:
        try:
            raw = self._kube.get("Node", name)
        except errors.NotFound:
            return
        spec = raw.get("spec") or {}
        taints = [t for t in spec.get("taints") or [] if t.get("key") != TO_BE_DELETED]
        if add:
            taints.append({"key": TO_BE_DELETED, "value": str(int(now)), "effect": NO_SCHEDULE})
        patch: dict[str, Any] = {"spec": {"taints": taints or None, "unschedulable": True if add else None}}
        with contextlib.suppress(errors.NotFound):
            self._kube.patch("Node", name, patch)

    def _drain(self, name: str) -> None:
        deletion = self.deleting.get(name)
        if deletion is None:
            return
        now = self._loop.now
        left = []
        for pod in sorted(self._cluster.pods_on(name), key=lambda p: p.key):
            owner = pod.controller
            if pod.is_terminal() or (owner is not None and owner.kind == "Node"):
                continue
            if owner is not None and owner.kind == "DaemonSet":
                with contextlib.suppress(errors.KubeError):  # best effort, not waited for
                    self._kube.evict(pod.name, pod.namespace)
                continue
            left.append(pod)
            if pod.deleting:
                continue
            with contextlib.suppress(errors.NotFound, errors.TooManyRequests):
                self._kube.evict(pod.name, pod.namespace)
        remaining = [p for p in left if p.key in self._cluster.pods]
        if not remaining:
            wait = deletion.tainted + self._config.node_delete_delay_after_taint - now
            self._loop.call_later(max(0.0, wait), lambda: self._finish(name))
        elif now - deletion.tainted >= self._config.max_pod_eviction_time:
            del self.deleting[name]
            self.last_failure = now
            self._taint(name, add=False, now=now)
            self._record("ScaleDownFailed", name, f"failed to drain node {name}: {len(remaining)} pods left")
        else:
            self._loop.call_later(_EVICTION_RETRY, lambda: self._drain(name))

    def _finish(self, name: str) -> None:
        if self.deleting.pop(name, None) is None:
            return
        self.last_delete = self._loop.now
        self._cloud.terminate_node(name)
        self._on_deleted(name)
        self._record("ScaleDown", name, f"node {name} removed")

    def forget(self, name: str) -> None:
        """A node vanished (e.g. a spot interruption): drop its state."""
        self.unneeded.pop(name, None)
        self.unremovable.pop(name, None)
        self.deleting.pop(name, None)
