"""The rollout guard: no consolidation of nodes holding pods of a rollout in progress.

karpy's own, opt-in per NodePool (``karpy.sh/rollout-guard``, see
:func:`karpy.model.objects.rollout_guard_settle`): while a Deployment or StatefulSet rolls out,
consolidation (multi- and single-node) leaves alone every node of the pool that holds one of its
live pods, and keeps doing so for the pool's settle time after the rollout completes.
Emptiness (a node holding none of its pods is not held), drift and expiration are unaffected.

A pod belongs to a StatefulSet that is its controller, or to the Deployment of its controlling
ReplicaSet: the one named ``<deployment>-<pod-template-hash>`` (how the Deployment controller
names its ReplicaSets). A rollout is in progress (:func:`progress`):

- Deployment: not paused, its ``Progressing`` condition not ``False`` (the progress deadline
  exceeded) nor older than ``progressDeadlineSeconds`` while its reason is not
  ``NewReplicaSetAvailable``, and: its new spec not yet observed (``observedGeneration <
  generation``), fewer updated replicas than ``spec.replicas``, old replicas still running
  (``status.replicas > updatedReplicas``), updated replicas not all available, or the condition
  still saying anything but ``NewReplicaSetAvailable`` (what ``kubectl rollout status`` waits for;
  a scale-up is progress too);
- StatefulSet: its new spec not yet observed, fewer updated replicas than ``spec.replicas``, or
  ``currentRevision`` not yet ``updateRevision``.

It completed (:meth:`Guard.completed`) at the ``Progressing`` condition's ``lastUpdateTime`` when
its reason is ``NewReplicaSetAvailable``; otherwise (a StatefulSet, or a Deployment without the
condition) at the latest start (else creation) of its live pods. :func:`moments` are the times
at which the guard's answer may change with no object changing (a settle time ending, a
progress deadline passing), for :func:`karpy.core.disruption.horizon.next_change`. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from karpy.core.snapshot import Snapshot, StateNode
from karpy.model.objects import NodePool, Pod, Rollout

__all__ = ["NEW_RS_AVAILABLE", "Guard", "WorkloadKey", "moments", "owner", "progress"]

NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
WorkloadKey = tuple[str, str, str]  # (kind, namespace, name)


def owner(pod: Pod) -> WorkloadKey | None:
    """The Deployment or StatefulSet the pod belongs to (see the module docstring), or None."""
    ref = pod.controller
    if ref is None:
        return None
    if ref.kind == "StatefulSet":
        return ("StatefulSet", pod.namespace, ref.name)
    if ref.kind == "ReplicaSet":
        suffix = pod.labels.get("pod-template-hash")
        if suffix and ref.name.endswith("-" + suffix) and len(ref.name) > len(suffix) + 1:
            return ("Deployment", pod.namespace, ref.name[: -len(suffix) - 1])
    return None


def _deadline(r: Rollout) -> float | None:
    """When a Deployment's progress stalls: its Progressing condition's last update plus the
    progress deadline (None: no condition time, or the condition says the rollout completed)."""
    if r.kind != "Deployment" or r.progress_updated is None or r.progress_reason == NEW_RS_AVAILABLE:
        return None
    return r.progress_updated + r.progress_deadline


def progress(r: Rollout, now: float) -> str | None:
    """How the rollout is in progress at ``now`` (a few words), or None when it is not."""
    if r.kind == "Deployment":
        if r.paused or r.progress_status == "False":
            return None
        stall = _deadline(r)
        if stall is not None and now >= stall:
            return None
    if r.observed_generation < r.generation:
        return "its new spec not yet observed"
    if r.updated < r.replicas:
        return f"{r.updated}/{r.replicas} updated"
    if r.kind == "StatefulSet":
        if r.update_revision and r.current_revision != r.update_revision:
            return f"revision {r.update_revision} not yet current"
        return None
    if r.status_replicas > r.updated:
        old = r.status_replicas - r.updated
        return f"{old} old replica{'' if old == 1 else 's'} still running"
    if r.available < r.updated:
        return f"{r.available}/{r.updated} updated replicas available"
    if r.progress_status and r.progress_reason != NEW_RS_AVAILABLE:
        return f"Progressing: {r.progress_reason or 'not complete'}"
    return None


def _text(seconds: float) -> str:
    """``5m``, ``1h30m``, ``90s`` -> ``1m30s``, ``0s``."""
    left = round(seconds)
    parts = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class _Known:
    """What one pass found about one rollout."""

    progress: str | None
    completed: float | None


class Guard:
    """The rollout guard of one pass at ``now``: ``guard(node, pool)`` says why consolidation must
    leave the node alone ("" when it need not). The pools' settle times are read once; each
    rollout is judged once per pass; a node's workloads are kept on its StateNode."""

    def __init__(self, snapshot: Snapshot, now: float, pools: Mapping[str, NodePool]) -> None:
        self.now = now
        self.settles: dict[str, float] = {}
        for name, pool in pools.items():
            settle = pool.rollout_guard()
            if settle is not None:
                self.settles[name] = settle
        self.rollouts: dict[WorkloadKey, Rollout] = (
            {(r.kind, r.namespace, r.name): r for r in snapshot.rollouts} if self.settles else {}
        )
        self._pods = snapshot.pods
        self._known: dict[WorkloadKey, _Known] = {}
        self._started: dict[WorkloadKey, float] | None = None

    def __call__(self, node: StateNode, pool: NodePool) -> str:
        settle = self.settles.get(pool.name)
        if settle is None or not self.rollouts:
            return ""
        for key in _workloads(node):
            r = self.rollouts.get(key)
            if r is None:
                continue
            known = self.judge(r)
            what = f"rollout of {r.kind} {r.namespace}/{r.name}"
            if known.progress is not None:
                return (
                    f"{what} in progress ({known.progress}); "
                    f"consolidation resumes {_text(settle)} after it completes"
                )
            if known.completed is not None and self.now < known.completed + settle:
                return (
                    f"{what} completed at {_iso(known.completed)}; "
                    f"consolidation resumes at {_iso(known.completed + settle)} ({_text(settle)} settle time)"
                )
        return ""

    def judge(self, r: Rollout) -> _Known:
        """Whether the rollout is in progress now, else when it completed (None: unknown)."""
        key = (r.kind, r.namespace, r.name)
        known = self._known.get(key)
        if known is None:
            moving = progress(r, self.now)
            known = self._known[key] = _Known(moving, None if moving is not None else self.completed(r))
        return known

    def completed(self, r: Rollout) -> float | None:
        """When the rollout completed (see the module docstring; None: unknown)."""
        if (
            r.kind == "Deployment"
            and r.progress_reason == NEW_RS_AVAILABLE
            and r.progress_updated is not None
        ):
            return r.progress_updated
        if self._started is None:
            self._started = _latest_starts(self._pods, set(self.rollouts))
        return self._started.get((r.kind, r.namespace, r.name))


def _workloads(node: StateNode) -> tuple[WorkloadKey, ...]:
    """The Deployments and StatefulSets of the node's live pods, sorted (kept on the StateNode)."""
    found: tuple[WorkloadKey, ...] | None = node._derived.get("rollout-workloads")
    if found is None:
        keys = {owner(p) for p in node.pods if not p.is_terminal() and not p.deleting}
        keys.discard(None)
        found = tuple(sorted(k for k in keys if k is not None))
        node._derived["rollout-workloads"] = found
    return found


def _latest_starts(pods: Iterable[Pod], wanted: set[WorkloadKey]) -> dict[WorkloadKey, float]:
    """Per workload of ``wanted``, the latest start (else creation) of its live pods."""
    out: dict[WorkloadKey, float] = {}
    for pod in pods:
        if pod.is_terminal() or pod.deleting:
            continue
        key = owner(pod)
        if key is None or key not in wanted:
            continue
        moment = pod.started if pod.started is not None else pod.created
        if moment > out.get(key, -1.0):
            out[key] = moment
    return out


def moments(snapshot: Snapshot, pools: Mapping[str, NodePool] | None = None) -> list[float]:
    """The times after which the guard's answers over ``snapshot`` may change with no object
    changing: each completed rollout's end of settle time (per settle time in use), each
    progressing Deployment's progress deadline. Empty when no NodePool turns the guard on."""
    pools = {p.name: p for p in snapshot.node_pools} if pools is None else pools
    guard = Guard(snapshot, snapshot.now, pools)
    if not guard.settles or not guard.rollouts:
        return []
    settles = sorted(set(guard.settles.values()))
    out: list[float] = []
    for r in guard.rollouts.values():
        stall = _deadline(r)
        if stall is not None and r.progress_status != "False" and not r.paused:
            out.append(stall)
        done = guard.judge(r).completed  # (None while in progress: its end is an object change)
        if done is not None:
            out.extend(done + settle for settle in settles)
    return out
