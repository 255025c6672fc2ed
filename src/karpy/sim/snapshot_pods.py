"""The controllers of a snapshot's pods: replacement, pod garbage collection and the kubelet.

The pods a run takes from a snapshot (:mod:`karpy.sim.adopt`) belong to no workload trace, so
the Deployment/Job stand-in (:mod:`karpy.sim.workloads`) does not know them. :class:`SnapshotPods`
does for them what the cluster's controllers would, so that a Deployment of the snapshot keeps
its replica count for the whole run:

- a pod whose ``Rule`` says so is replaced when it goes (evicted by a drain or consolidation,
  deleted with its node): a ReplicaSet's, Job's or ReplicationController's pod by a new pending
  pod of the same spec named ``<owner>-r<n>``, a StatefulSet's by a pod of the same name;
  a pod of no controller (or of one the simulator does not run) is not replaced;
- a pod bound to a Node that is deleted is deleted (pod garbage collection);
- a pod bound during the run becomes Running and Ready ``ready_after(pod, node)`` seconds
  after its binding (the run's image-pull model), as the kubelet would.

Pods created by it and pods that turned Ready are counted in ``pods_created`` and ``started``
for the run's figures, as the workload stand-in counts its own. Deterministic: names from a
counter, node clean-ups and replacements as loop callbacks in event order.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from dataclasses import dataclass
from typing import Any

from karpy.api import encode
from karpy.model import errors
from karpy.ports import Clock, KubeAPI, RawObject, WatchEvent
from karpy.runtime.loop import Loop
from karpy.sim.workloads import PodStart, StartupDelay

__all__ = ["Rule", "SnapshotPods"]

Key = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True, slots=True)
class Rule:
    """How a pod that goes is replaced: ``same_name`` (a StatefulSet's), or ``prefix`` + ``r<n>``."""

    prefix: str = ""
    same_name: bool = False

    @property
    def replaces(self) -> bool:
        return self.same_name or bool(self.prefix)


@dataclass(slots=True)
class _Tracked:
    template: RawObject  # the pod as a replacement is created (pending, no uid)
    rule: Rule
    created: float
    uid: str = ""
    node: str = ""
    bound: float | None = None
    started: bool = False


class SnapshotPods:
    """Replacement, pod garbage collection and the kubelet for the snapshot's pods."""

    def __init__(self, kube: KubeAPI, clock: Clock, loop: Loop, *, ready_after: StartupDelay) -> None:
        self.pods_created = 0  # replacements created during the run
        self.started: list[PodStart] = []  # pods bound during the run that turned Running and Ready
        self._kube, self._clock, self._loop = kube, clock, loop
        self._ready_after = ready_after
        self._tracked: dict[Key, _Tracked] = {}
        self._on_node: dict[str, set[Key]] = {}
        self._ids = itertools.count(1)
        kube.watch(self._on_event)

    def create(self, raw: RawObject, rule: Rule) -> None:
        """Create a pod of the snapshot (bound ones Running and Ready already) and look after it."""
        meta = raw["metadata"]
        key = (str(meta.get("namespace") or "default"), str(meta["name"]))
        spec = raw.get("spec") or {}
        template = copy.deepcopy(raw)
        template["spec"] = {k: v for k, v in spec.items() if k != "nodeName"}
        template["status"] = {"phase": "Pending"}
        template["metadata"] = {k: v for k, v in meta.items() if k != "uid"}
        tracked = _Tracked(template, rule, self._clock.now(), started=bool(spec.get("nodeName")))
        self._tracked[key] = tracked
        try:
            stored = self._kube.create(copy.deepcopy(raw))
        except errors.AlreadyExists:
            del self._tracked[key]
            return
        tracked.uid = str(stored["metadata"].get("uid") or "")
        if spec.get("nodeName"):
            tracked.node, tracked.bound = str(spec["nodeName"]), self._clock.now()
            self._on_node.setdefault(tracked.node, set()).add(key)

    # -- events --------------------------------------------------------------------------
    def _on_event(self, event: WatchEvent) -> None:
        meta = event.obj.get("metadata") or {}
        if event.kind == "Node":
            if event.type == "DELETED":
                name = str(meta.get("name", ""))
                self._loop.call_later(0.0, lambda: self._collect(name), name="sim:snapshot-pod-gc")
            return
        if event.kind != "Pod":
            return
        key = (str(meta.get("namespace") or "default"), str(meta.get("name", "")))
        tracked = self._tracked.get(key)
        if tracked is None or (tracked.uid and meta.get("uid") != tracked.uid):
            return
        if event.type == "DELETED":
            self._gone(key, tracked)
            return
        node = str((event.obj.get("spec") or {}).get("nodeName") or "")
        if node and not tracked.node:
            tracked.node, tracked.bound = node, self._clock.now()
            self._on_node.setdefault(node, set()).add(key)
            delay = max(0.0, self._ready_after(event.obj, {"metadata": {"name": node}}))
            uid = tracked.uid
            self._loop.call_later(delay, lambda: self._start(key, uid), name="sim:snapshot-pod-start")

    def _gone(self, key: Key, tracked: _Tracked) -> None:
        del self._tracked[key]
        if tracked.node:
            on_node = self._on_node.get(tracked.node)
            if on_node is not None:
                on_node.discard(key)
        if tracked.rule.replaces:
            self._loop.call_later(0.0, lambda: self._replace(key, tracked), name="sim:snapshot-pod-replace")

    def _collect(self, node: str) -> None:
        """Pod garbage collection: the pods bound to a Node that is gone are deleted."""
        for namespace, name in sorted(self._on_node.pop(node, set())):
            with contextlib.suppress(errors.NotFound):
                self._kube.delete("Pod", name, namespace)

    def _replace(self, key: Key, gone: _Tracked) -> None:
        raw = copy.deepcopy(gone.template)
        name = key[1] if gone.rule.same_name else f"{gone.rule.prefix}r{next(self._ids):05d}"
        raw["metadata"]["name"] = name
        new_key = (key[0], name)
        self._tracked[new_key] = _Tracked(copy.deepcopy(gone.template), gone.rule, self._clock.now())
        try:
            stored = self._kube.create(raw)
        except errors.AlreadyExists:  # (a StatefulSet's pod of that name is back already)
            del self._tracked[new_key]
            return
        self._tracked[new_key].uid = str(stored["metadata"].get("uid") or "")
        self.pods_created += 1

    def _start(self, key: Key, uid: str) -> None:
        """The kubelet: the bound pod's containers run and pass their readiness probe."""
        tracked = self._tracked.get(key)
        if tracked is None or tracked.uid != uid or tracked.started or tracked.bound is None:
            return
        now = self._clock.now()
        stamp = encode.time(now)
        conditions: list[dict[str, Any]] = [
            {"type": kind, "status": "True", "lastTransitionTime": stamp}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        patch = {"status": {"phase": "Running", "startTime": stamp, "conditions": conditions}}
        with contextlib.suppress(errors.NotFound):
            self._kube.patch("Pod", key[1], patch, key[0])
            tracked.started = True
            pod = f"{key[0]}/{key[1]}"
            self.started.append(PodStart(pod, tracked.node, tracked.created, tracked.bound, now))
