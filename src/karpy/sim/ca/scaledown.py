"""The Cluster Autoscaler model's scale-down: which nodes are unneeded, and their deletion.

:class:`ScaleDown` follows CA's defaults (``docs/peers.md`` §1.3): a node is unneeded when
``max(cpu, memory)`` requested/allocatable (DaemonSet and mirror pods counted) is below the
threshold and every pod that must move fits elsewhere in the :class:`~karpy.sim.ca.world.World`
(sequentially: pods' simulated new homes are kept, so one drain can make another node needed);
pods with ``safe-to-evict: "false"``, without a controller, of a custom controller, with local
storage (hostPath or a non-Memory emptyDir not listed in ``safe-to-evict-local-volumes``),
kube-system pods without a PDB, or beyond what a PDB allows keep their node
(``safe-to-evict: "true"`` overrides all but PDBs); DaemonSet, mirror and expendable pods are not
moved. A node that failed the simulation is not re-checked for
``unremovable-node-recheck-timeout`` (5 m). Deletion, oldest unneeded first: empty nodes in bulk
and at most ``max-drain-parallelism`` (1) non-empty node at a time, within
``max-scale-down-parallelism`` (10) deletions in progress; group minimums hold. The node is
tainted ``ToBeDeletedByClusterAutoscaler:NoSchedule`` and cordoned, its pods evicted through the
Eviction API (retried every 10 s for ``max-pod-eviction-time``, then the deletion fails and the
taint is removed), and ``node-delete-delay-after-taint`` after the taint the instance is
terminated. Driven by :class:`~karpy.sim.ca.autoscaler.ClusterAutoscaler`; deterministic: sorted
iteration only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from karpy.model import errors
from karpy.model.objects import Node, Pod
from karpy.model.resources import CPU, MEMORY
from karpy.model.taints import NO_SCHEDULE
from karpy.ports import KubeAPI
from karpy.runtime.loop import Loop
from karpy.sim.ca.config import CAConfig
from karpy.sim.ca.world import World
from karpy.sim.predicates import pdb_allowed
from karpy.state.cluster import Cluster

__all__ = [
    "SAFE_TO_EVICT",
    "SAFE_TO_EVICT_LOCAL_VOLUMES",
    "SCALE_DOWN_DISABLED",
    "TO_BE_DELETED",
    "ScaleDown",
    "blocking_reason",
    "utilization",
]

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
_KNOWN_CONTROLLERS = frozenset({"ReplicaSet", "ReplicationController", "Job", "StatefulSet", "DaemonSet"})
_RECHECK = 300.0  # --unremovable-node-recheck-timeout
_EVICTION_RETRY = 10.0  # CA's EvictionRetryTime


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
                        used[key] = pdb_allowed(self._cluster.pdbs[key], all_pods)
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
