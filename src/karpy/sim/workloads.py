"""ReplicaSet, StatefulSet, Job, bare pod and kubelet stand-ins on the in-memory API server.

``Workloads`` keeps the desired state of Deployments, StatefulSets, Jobs and bare pods registered
in code (no API objects needed) and makes the pods follow it, as the Deployment/ReplicaSet,
StatefulSet, Job and pod garbage-collection controllers and the kubelet would:

- a Deployment keeps ``replicas`` pods named ``<deploy>-<template-hash>-<n>`` (labels of
  the template plus ``pod-template-hash``; ownerReference to the ReplicaSet
  ``<deploy>-<hash>``, controller true); a template change rolls out per the strategy:
  new pods up to ``replicas + maxSurge``, old pods deleted only while at least
  ``replicas - maxUnavailable`` pods stay Ready (unready old pods go first);
  ``Recreate`` deletes the old pods before creating new ones; the pods to delete are taken in
  kube-controller-manager's order (:mod:`karpy.sim.replicaset_order`: unassigned, pending and unready
  pods first, then those doubled up on a node with more of the Deployment's pods, then the
  most recently Ready and created);
- a StatefulSet keeps ``replicas`` pods named ``<set>-<ordinal>``, created and deleted in
  order (``OrderedReady``) or all at once (``Parallel``): :mod:`karpy.sim.statefulsets`; its API
  object carries ``spec.replicas`` and the status counts; its pods' claims, made before them,
  are :class:`~karpy.sim.statefulsets.ClaimTemplates`' (``volumeClaimTemplates``);
- a Job runs ``completions`` pods, ``parallelism`` at a time; each succeeds (phase
  Succeeded) ``run_for`` seconds after it started running;
- a bare pod (no owner: a recorded one) is created once, succeeds ``run_for`` seconds after it
  started running when given one, and is never replaced;
- pods that were evicted or deleted are replaced (a StatefulSet's with their name; not a bare
  pod); pods bound to a Node that no longer exists are deleted (and replaced);
- a bound pod becomes Running and Ready ``ready_after`` seconds after its binding
  (a number, or ``ready_after(pod_raw, node_raw) -> seconds`` for image pulls);
- a Deployment's API object carries the status the Deployment controller would write, after
  each sync (:mod:`karpy.sim.deployment_status`).

``reconcile()`` is a loop task (registered on construction, woken by watch events). It syncs
only the workloads whose desired state or pods' status changed since their last sync began
(the sync of any other would do nothing: it reads nothing else), and looks for pods of gone
Nodes only after a Node was deleted. A Deployment's counts of active, current-template and
ready pods are kept as its pods come, change and go (counted again after a template change),
not walked for each sync. The start and completion of pods are one-shot loop
callbacks. Used by the simulator and by
controller tests; deterministic (names from counters, iteration in sorted order).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import heapq
import json
import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import encode
from karpy.controllers.result import Result
from karpy.model import errors
from karpy.model.objects import TERMINAL_PHASES
from karpy.ports import Clock, KubeAPI, RawObject, WatchEvent
from karpy.runtime.loop import Loop
from karpy.sim import deployment_status, replicaset_order, statefulsets
from karpy.sim.workload_state import Counts as _Counts
from karpy.sim.workload_state import PodState as _Pod
from karpy.sim.workload_state import WorkloadState as _Workload

__all__ = ["DEFAULT_STRATEGY", "PodStart", "StartupDelay", "WorkloadStatus", "Workloads", "template_hash"]

StartupDelay = Callable[[RawObject, RawObject], float]
DEFAULT_STRATEGY: Mapping[str, int | str] = {"maxSurge": "25%", "maxUnavailable": "25%"}
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of Kubernetes' generated names
DEPLOYMENT = "Deployment"
STATEFULSET = "StatefulSet"
JOB = "Job"
POD = "Pod"  # a bare pod (no owner)


def template_hash(template: Mapping[str, Any]) -> str:
    """A stable 10-character hash of a pod template's labels, annotations and spec."""
    meta = template.get("metadata") or {}
    view = {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}
    text = json.dumps([view, template.get("spec") or {}], sort_keys=True, separators=(",", ":"))
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(10):
        number, digit = divmod(number, len(_SAFE))
        out.append(_SAFE[digit])
    return "".join(out)


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "karpy-sim:" + "/".join(parts)))


def _active(pod: _Pod) -> bool:
    return pod.active


def _ready(status: Mapping[str, Any]) -> bool:
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


@dataclass(frozen=True, slots=True)
class PodStart:
    """One pod's way to Ready: created -> bound -> Running and Ready (seconds)."""

    pod: str  # namespace/name
    node: str
    created: float
    bound: float
    ready: float


@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    desired: int  # replicas, or completions for a Job
    active: int  # pods not terminal and not being deleted
    ready: int
    updated: int  # active pods of the current template
    succeeded: int = 0
    complete: bool = False


class Workloads:
    """Deployment and Job stand-ins (see the module docstring)."""

    def __init__(
        self,
        kube: KubeAPI,
        clock: Clock,
        *,
        loop: Loop,
        ready_after: float | StartupDelay = 0.0,
        name: str = "workloads",
        register: bool = True,
    ) -> None:
        self.name = name
        self.started: list[PodStart] = []  # pods that became Running and Ready, in order
        self.pods_created = 0
        self._kube = kube
        self._clock = clock
        self._loop = loop
        self._ready_after = ready_after
        self._workloads: dict[tuple[str, str, str], _Workload] = {}  # (kind, namespace, name)
        self._owned: dict[tuple[str, str], _Workload] = {}  # (namespace, pod name) -> owner
        self._nodes: dict[str, RawObject] = {}
        # what the next reconcile must look at: the workloads whose desired state or pods'
        # status changed since their last sync began (the others' sync would do nothing), and
        # whether a Node went away (pod garbage collection)
        self._dirty: set[tuple[str, str, str]] = set()
        self._collect = False
        # pods by the node they are bound to, and the node names the next garbage collection
        # looks at (Nodes deleted, and nodes not known when a pod was bound to them): so it
        # reads the pods of those nodes, not every pod
        self._on_node: dict[str, set[tuple[str, str]]] = {}
        self._gone: set[str] = set()
        if register:
            loop.add(name, lambda: self.reconcile().requeue_after)
        kube.watch(self._on_event)

    # -- desired state ---------------------------------------------------------------------
    def set_deployment(
        self,
        name: str,
        namespace: str,
        *,
        template: Mapping[str, Any],
        replicas: int,
        strategy: Mapping[str, Any] | None = None,
    ) -> None:
        """Create or replace a Deployment (a template change rolls out)."""
        strategy = dict(DEFAULT_STRATEGY if strategy is None else strategy)
        rolling = strategy.get("rollingUpdate") or strategy
        key = (DEPLOYMENT, namespace, name)
        wl = self._workloads.get(key)
        if wl is None:
            wl = _Workload(DEPLOYMENT, namespace, name, {}, "")
            self._workloads[key] = wl
        wl.template, wl.hash = copy.deepcopy(dict(template)), template_hash(template)
        wl.replicas = replicas
        wl.recreate = strategy.get("type") == "Recreate"
        wl.max_surge = rolling.get("maxSurge", DEFAULT_STRATEGY["maxSurge"])
        wl.max_unavailable = rolling.get("maxUnavailable", DEFAULT_STRATEGY["maxUnavailable"])
        self._wake(key)

    def scale(self, name: str, namespace: str, *, replicas: int, kind: str = DEPLOYMENT) -> None:
        """Scale a Deployment (or a StatefulSet: ``kind``)."""
        self._get(kind, name, namespace).replicas = replicas
        self._wake((kind, namespace, name))

    def set_statefulset(
        self,
        name: str,
        namespace: str,
        *,
        template: Mapping[str, Any],
        replicas: int,
        parallel: bool = False,
        claims: statefulsets.ClaimTemplates | None = None,
    ) -> None:
        """Create a StatefulSet (``parallel``: podManagementPolicy Parallel, else OrderedReady;
        ``claims``: its volumeClaimTemplates)."""
        key = (STATEFULSET, namespace, name)
        if key in self._workloads:
            raise ValueError(f"StatefulSet {namespace}/{name} already exists")
        wl = _Workload(STATEFULSET, namespace, name, copy.deepcopy(dict(template)), template_hash(template))
        wl.replicas, wl.parallel = replicas, parallel
        wl.claims = claims if claims is not None and claims.templates else None
        self._workloads[key] = wl
        self._wake(key)

    def run_pod(
        self, name: str, namespace: str, *, template: Mapping[str, Any], run_for: float | None = None
    ) -> None:
        """Create a bare pod (no owner, never replaced); it succeeds ``run_for`` seconds after it
        started running, or runs until deleted (None). A pod of that name still there is waited for."""
        key = (POD, namespace, name)
        self._workloads[key] = _Workload(
            POD,
            namespace,
            name,
            copy.deepcopy(dict(template)),
            template_hash(template),
            replicas=1,
            run_for=math.inf if run_for is None else run_for,
        )
        self._wake(key)

    def delete_pod(self, name: str, namespace: str) -> None:
        """Delete a bare pod (and forget it)."""
        wl = self._workloads.pop((POD, namespace, name), None)
        if wl is None:
            return
        for pod in sorted(wl.pods.values(), key=lambda p: p.name):
            self._delete(wl, pod)

    def rollout(self, name: str, namespace: str, *, template: Mapping[str, Any]) -> None:
        """Change the pod template; pods are replaced per the Deployment's strategy."""
        wl = self._get(DEPLOYMENT, name, namespace)
        wl.template, wl.hash = copy.deepcopy(dict(template)), template_hash(template)
        self._wake((DEPLOYMENT, namespace, name))

    def delete_deployment(self, name: str, namespace: str) -> None:
        """Forget the Deployment and delete its pods."""
        wl = self._get(DEPLOYMENT, name, namespace)
        del self._workloads[(DEPLOYMENT, namespace, name)]
        for pod in sorted(wl.pods.values(), key=lambda p: p.name):
            self._delete(wl, pod)
        if wl.status is not None:
            wl.status.delete()

    def run_job(
        self,
        name: str,
        namespace: str,
        *,
        template: Mapping[str, Any],
        run_for: float,
        completions: int = 1,
        parallelism: int = 1,
    ) -> None:
        """Start a Job whose pods each succeed ``run_for`` seconds after they start running."""
        key = (JOB, namespace, name)
        if key in self._workloads:
            raise ValueError(f"Job {namespace}/{name} already exists")
        self._workloads[key] = _Workload(
            JOB,
            namespace,
            name,
            copy.deepcopy(dict(template)),
            template_hash(template),
            replicas=completions,
            parallelism=parallelism,
            run_for=run_for,
        )
        self._wake(key)

    def status(self, kind: str, name: str, namespace: str) -> WorkloadStatus:
        wl = self._get(kind, name, namespace)
        active = [p for p in wl.pods.values() if p.active]
        return WorkloadStatus(
            desired=wl.replicas,
            active=len(active),
            ready=sum(1 for p in active if p.ready),
            updated=sum(1 for p in active if p.hash == wl.hash),
            succeeded=wl.succeeded,
            complete=wl.completed is not None,
        )

    def _get(self, kind: str, name: str, namespace: str) -> _Workload:
        try:
            return self._workloads[(kind, namespace, name)]
        except KeyError:
            raise KeyError(f"no {kind} {namespace}/{name}") from None

    # -- reconcile -------------------------------------------------------------------------
    def reconcile(self) -> Result:
        collect, self._collect = self._collect, False
        stranded = self._stranded() if collect else {}
        for key in sorted(self._workloads):
            wl = self._workloads[key]
            for pod in sorted(stranded.get(key, ()), key=lambda p: p.name):
                if pod.node not in self._nodes and pod.active:
                    self._delete(wl, pod)  # pod garbage collection: its node is gone
            if key not in self._dirty:
                continue
            self._dirty.discard(key)  # (what the sync itself changes marks it again)
            if wl.kind == DEPLOYMENT:
                self._sync_deployment(wl)
                self._publish(wl)
            elif wl.kind == STATEFULSET:
                self._sync_statefulset(wl)
            elif wl.kind == POD:
                if wl.next_index == 0:
                    self._create(wl)  # once: a bare pod that goes is not replaced
            else:
                self._sync_job(wl)
        return Result(None)

    @staticmethod
    def _counts(wl: _Workload) -> _Counts:
        """What the Deployment sync compares (kept as pods change, not a walk over them)."""
        return wl.counts()

    def _stranded(self) -> dict[tuple[str, str, str], list[_Pod]]:
        """Per workload, its active pods bound to a node that is gone (what a walk over every
        pod would find: a pod's node is set once, and only on those nodes can it be gone)."""
        gone, self._gone = self._gone, set()
        found: dict[tuple[str, str, str], list[_Pod]] = {}
        for node in gone:  # (a node back again is skipped where its pods are read)
            for namespace, name in self._on_node.get(node, ()):
                wl = self._owned.get((namespace, name))
                pod = wl.pods.get(name) if wl is not None else None
                if wl is not None and pod is not None and pod.active:
                    found.setdefault(wl.key, []).append(pod)
        return found

    def _order(self, wl: _Workload) -> Callable[[_Pod], tuple[object, ...]]:
        """The Deployment's deletion order now (:func:`karpy.sim.replicaset_order.deletion_order`)."""
        return replicaset_order.deletion_order(wl.pods.values(), now=self._clock.now(), active=_active)

    def _sync_deployment(self, wl: _Workload) -> None:
        if wl.recreate:
            old = [p for p in wl.pods.values() if p.hash != wl.hash and p.phase not in TERMINAL_PHASES]
            for pod in sorted(old, key=self._order(wl)):
                if not pod.deleting:
                    self._delete(wl, pod)
            if old:
                return  # new pods only once every old one is gone
        surge, unavailable = wl.fenceposts() if not wl.recreate else (0, wl.replicas)
        counts = self._counts(wl)
        wanted = min(wl.replicas - counts.new, wl.replicas + surge - counts.active)
        for _ in range(wanted):
            self._create(wl)
        if wanted > 0:
            counts = self._counts(wl)
        if counts.new > wl.replicas:
            new = [p for p in wl.pods.values() if p.active and p.hash == wl.hash]
            # the first len(new) - replicas in deletion order (what sorting them all and taking
            # the head gives, without sorting them all)
            for pod in heapq.nsmallest(len(new) - wl.replicas, new, key=self._order(wl)):
                self._delete(wl, pod)
            counts = self._counts(wl)
        if not counts.old:
            return
        ready = counts.ready
        floor = wl.replicas - unavailable
        old = [p for p in wl.pods.values() if p.active and p.hash != wl.hash]
        for pod in sorted(old, key=self._order(wl)):
            if not pod.ready:
                self._delete(wl, pod)
            elif ready - 1 >= floor:
                self._delete(wl, pod)
                ready -= 1

    def _publish(self, wl: _Workload) -> None:
        """The Deployment's API object, after a sync (:mod:`karpy.sim.deployment_status`)."""
        if wl.status is None:
            wl.status = deployment_status.Publisher(self._kube, wl.namespace, wl.name)
        c = self._counts(wl)
        wl.status.publish(
            self._clock.now(), replicas=wl.replicas, active=c.active, updated=c.new, ready=c.ready
        )

    def _sync_statefulset(self, wl: _Workload) -> None:
        """One pass of the StatefulSet controller (:func:`karpy.sim.statefulsets.plan`), then its object."""
        pods: dict[int, statefulsets.Ordinal] = {}
        for pod in wl.pods.values():
            ordinal = statefulsets.ordinal_of(wl.name, pod.name)
            if ordinal is not None:
                pods[ordinal] = statefulsets.Ordinal(ready=pod.ready, going=not pod.active)
        create, delete = statefulsets.plan(wl.replicas, pods, parallel=wl.parallel)
        for ordinal in create:
            wl.next_index = ordinal
            self._create(wl)
        for ordinal in delete:
            self._delete(wl, wl.pods[f"{wl.name}-{ordinal}"])
        if wl.claims is not None and wl.claims.delete_when_scaled:
            wl.condemned.update(delete)
            for claim in wl.claims.released(wl.name, wl.condemned, alive=wl.pods, replicas=wl.replicas):
                with contextlib.suppress(errors.NotFound):
                    self._kube.delete("PersistentVolumeClaim", claim, wl.namespace)
        if wl.set_status is None:
            revision = f"{wl.name}-{wl.hash}"
            wl.set_status = statefulsets.Publisher(
                self._kube, wl.namespace, wl.name, parallel=wl.parallel, revision=revision
            )
        c = wl.counts()
        wl.set_status.publish(replicas=wl.replicas, active=c.active, ready=c.ready)

    def _sync_job(self, wl: _Workload) -> None:
        if wl.completed is not None:
            return
        if wl.succeeded >= wl.replicas:
            wl.completed = self._clock.now()
            return
        running = sum(1 for p in wl.pods.values() if p.active)
        for _ in range(min(wl.parallelism, wl.replicas - wl.succeeded) - running):
            self._create(wl)

    # -- pods ------------------------------------------------------------------------------
    def _create(self, wl: _Workload) -> None:
        index = wl.next_index
        wl.next_index += 1
        owner: dict[str, Any] | None
        if wl.kind == DEPLOYMENT:
            name = f"{wl.name}-{wl.hash}-{index}"
            owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{wl.name}-{wl.hash}"}
            extra = {"pod-template-hash": wl.hash}
        elif wl.kind == STATEFULSET:
            name = f"{wl.name}-{index}"
            owner = {"apiVersion": "apps/v1", "kind": STATEFULSET, "name": wl.name}
            extra = {
                "statefulset.kubernetes.io/pod-name": name,
                "apps.kubernetes.io/pod-index": str(index),
                "controller-revision-hash": f"{wl.name}-{wl.hash}",
            }
        elif wl.kind == POD:
            name, owner, extra = wl.name, None, {}
        else:
            name = f"{wl.name}-{index}"
            owner = {"apiVersion": "batch/v1", "kind": "Job", "name": wl.name}
            extra = {"job-name": wl.name, "batch.kubernetes.io/job-name": wl.name}
        meta = wl.template.get("metadata") or {}
        spec = copy.deepcopy(wl.template.get("spec") or {})
        spec.pop("nodeName", None)
        if wl.claims is not None:  # (a StatefulSet's: its claims first, as its controller does)
            for claim in wl.claims.claims(wl.namespace, wl.name, index):
                with contextlib.suppress(errors.AlreadyExists):
                    self._kube.create(claim)
            spec["volumes"] = wl.claims.pod_volumes(spec.get("volumes") or [], wl.name, index)
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": wl.namespace,
            "labels": {**(meta.get("labels") or {}), **extra},
            "annotations": dict(meta.get("annotations") or {}),
        }
        if owner is not None:
            owner.update(uid=_uid(owner["kind"], wl.namespace, owner["name"]))
            metadata["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
        raw: RawObject = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {"phase": "Pending"},
        }
        key = (wl.namespace, name)
        cost = replicaset_order.deletion_cost(raw["metadata"]["annotations"])
        pod = wl.pods[name] = _Pod(name, wl.hash, self._clock.now(), deletion_cost=cost)
        wl.tally(pod, +1)
        self._owned[key] = wl
        try:
            self._kube.create(raw)
        except errors.AlreadyExists:
            wl.tally(wl.pods.pop(name), -1)
            self._owned.pop(key, None)
            self._dirty.add(wl.key)  # the next reconcile tries again
            return
        self.pods_created += 1

    def _delete(self, wl: _Workload, pod: _Pod) -> None:
        with contextlib.suppress(errors.NotFound):
            self._kube.delete("Pod", pod.name, wl.namespace)

    def _wake(self, key: tuple[str, str, str] | None = None) -> None:
        """Have the next reconcile sync the workload ``key`` (None: none; a Node went away)."""
        if key is not None:
            self._dirty.add(key)
        if self.name in self._loop.tasks:
            self._loop.wake(self.name)

    def _on_event(self, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        if event.kind == "Node":
            if event.type == "DELETED":
                self._nodes.pop(meta.get("name", ""), None)
                self._gone.add(meta.get("name", ""))
                self._collect = True
                self._wake()
            else:
                self._nodes[meta.get("name", "")] = event.obj
            return
        if event.kind != "Pod":
            return
        key = (meta.get("namespace") or "default", meta.get("name", ""))
        wl = self._owned.get(key)
        if wl is None:
            return
        if event.type == "DELETED":
            gone = wl.pods.pop(key[1], None)
            if gone is not None:
                wl.tally(gone, -1)
            if gone is not None and gone.node:
                on_node = self._on_node.get(gone.node)
                if on_node is not None:
                    on_node.discard(key)
                    if not on_node:
                        del self._on_node[gone.node]
            del self._owned[key]
            self._wake(wl.key)
            return
        pod = wl.pods.get(key[1])
        if pod is None:
            return
        status = event.obj.get("status") or {}
        before = (pod.phase, pod.ready, pod.deleting)
        wl.tally(pod, -1)
        uid = meta.get("uid", "")
        if uid != pod.uid:
            pod.uid, pod.shuffle = uid, replicaset_order.shuffle(uid)
        pod.phase = status.get("phase") or "Pending"
        ready = _ready(status)
        if ready and not pod.ready:
            pod.ready_since = self._clock.now()
        pod.ready = ready
        pod.deleting = bool(meta.get("deletionTimestamp"))
        wl.tally(pod, +1)
        node = (event.obj.get("spec") or {}).get("nodeName") or ""
        if node and not pod.node:
            pod.node, pod.bound = node, self._clock.now()
            self._on_node.setdefault(node, set()).add(key)
            if node not in self._nodes:
                self._gone.add(node)  # never seen (or gone already): the next collection looks
            if callable(self._ready_after):
                delay = self._ready_after(event.obj, self._nodes.get(node, {}))
            else:
                delay = self._ready_after
            uid = pod.uid
            self._loop.call_later(max(0.0, delay), lambda: self._start(key, uid), name=f"{self.name}:start")
        if before != (pod.phase, pod.ready, pod.deleting):
            self._wake(wl.key)

    def _current(self, key: tuple[str, str], uid: str) -> tuple[_Workload, _Pod] | None:
        wl = self._owned.get(key)
        pod = wl.pods.get(key[1]) if wl is not None else None
        if wl is None or pod is None or pod.uid != uid or pod.deleting:
            return None
        return wl, pod

    def _start(self, key: tuple[str, str], uid: str) -> None:
        """The kubelet: the pod's containers run and pass their readiness probe."""
        found = self._current(key, uid)
        if found is None or found[1].phase != "Pending" or found[1].node not in self._nodes:
            return
        wl, pod = found
        now = self._clock.now()
        stamp = encode.time(now)
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": stamp}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        patch = {"status": {"phase": "Running", "startTime": stamp, "conditions": conditions}}
        with contextlib.suppress(errors.NotFound):
            self._kube.patch("Pod", pod.name, patch, wl.namespace)
            assert pod.bound is not None
            self.started.append(PodStart(f"{key[0]}/{key[1]}", pod.node, pod.created, pod.bound, now))
            if wl.kind == JOB or (wl.kind == POD and wl.run_for != math.inf):
                self._loop.call_later(wl.run_for, lambda: self._finish(key, uid), name=f"{self.name}:finish")

    def _finish(self, key: tuple[str, str], uid: str) -> None:
        """A Job pod's (or a bare pod's) containers exit 0."""
        found = self._current(key, uid)
        if found is None or found[1].phase != "Running":
            return
        wl, pod = found
        stamp = encode.time(self._clock.now())
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": stamp}
            for kind in ("PodScheduled", "Initialized")
        ] + [
            {"type": kind, "status": "False", "reason": "PodCompleted", "lastTransitionTime": stamp}
            for kind in ("ContainersReady", "Ready")
        ]
        with contextlib.suppress(errors.NotFound):
            self._kube.patch(
                "Pod", pod.name, {"status": {"phase": "Succeeded", "conditions": conditions}}, wl.namespace
            )
            wl.succeeded += 1
