"""A simulated cluster recorded through the Kubernetes emulator: ``karpy record``'s path end to end.

:func:`simulate` runs a scenario (karpy, a seed) and keeps every event of its API server with its
virtual time. :class:`Mirror` writes those objects into a :class:`~emulator.KarpyEmulator` over
HTTP in virtual-time order, as the cluster's controllers would have: Deployments and StatefulSets
get the scenario's pod template and selector (the simulator's objects carry only their scale), a
ReplicaSet appears with the first pod of each template hash (owned by its Deployment), a Job with
the first pod of each run (owned by a CronJob named after the scenario's job); uids, resource
versions, timestamps and finalizers are left to the emulator (deleted is deleted). Nodes and
NodeClaims are renamed ``rec-<name>`` (and the pods bound to them follow), as a real cluster's
names never look like those the simulator of a replay generates (``default-00001``). The emulator
stamps ``creationTimestamp`` with the virtual clock.

:func:`record` puts it together: the state at ``begin`` is written first, then a
:class:`karpy.record.live.LiveRecording` (the command's own watching, on the virtual clock) takes
its snapshot and watches while each later instant is written, waiting after each until every
watch delivered it; at the end the trace and its snapshot are written (``karpy.record.live.write``).
Deterministic: the same scenario, seed and window give the same files. Used by
``tests/record/test_example.py`` and ``scripts/record_example.py``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import emulator as emulator_mod
from emulator import EmulatorThread

from karpy.adapters.kube.client import KubeClient
from karpy.api import common, encode
from karpy.ports import WatchEvent
from karpy.record import live, model, recorder
from karpy.sim import runner
from karpy.sim import scenario as scenario_mod

__all__ = ["EXAMPLE", "Mirror", "Recorded", "record", "record_example", "simulate"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "backtest"
EXAMPLE_BEGIN = "2026-03-02T07:20:00Z"  # the source runs 07:00-09:00; the recording starts here

MIRRORED = (*recorder.KINDS, "DaemonSet", "PodDisruptionBudget")
_ORDER = {
    kind: i
    for i, kind in enumerate(
        (
            "NodePool",
            "EC2NodeClass",
            "KWOKNodeClass",
            "DaemonSet",
            "PodDisruptionBudget",
            "Deployment",
            "StatefulSet",
            "ReplicaSet",
            "Job",
            "NodeClaim",
            "Node",
            "Pod",
        )
    )
}
_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation", "finalizers")


@dataclass(frozen=True)
class Event:
    at: float
    type: str
    kind: str
    obj: dict[str, Any]


def simulate(scenario: scenario_mod.Scenario, *, seed: int = 1) -> tuple[list[Event], runner.RunResult]:
    """Run ``scenario`` as karpy; every event of the kinds mirrored, with its virtual time."""
    events: list[Event] = []

    def keep(at: float, event: WatchEvent) -> None:
        if event.kind in MIRRORED:
            events.append(Event(at, event.type, event.kind, copy.deepcopy(event.obj)))

    result = runner.run(scenario, seed=seed, observe=[keep])
    return events, result


def _renamed(name: str) -> str:
    """A node's (or a providerID's) name as the mirrored cluster has it."""
    scheme, sep, rest = name.rpartition("://")
    return f"{scheme}{sep}rec-{rest}"


def _key(kind: str, obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))


@dataclass
class Mirror:
    """Writes a simulation's objects into the emulator (see the module docstring)."""

    emu: EmulatorThread
    kubectl: KubeClient
    scenario: scenario_mod.Scenario
    written: dict[str, int] = field(default_factory=dict)  # kind -> resourceVersion of its last write
    _present: set[tuple[str, str, str]] = field(default_factory=set)

    def _body(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(obj)
        body["kind"] = kind
        meta = body.setdefault("metadata", {})
        for key in _SERVER_SET:
            meta.pop(key, None)
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        spec = body.setdefault("spec", {})
        status = body.get("status") or {}
        if kind in ("Node", "NodeClaim"):
            meta["name"] = _renamed(name)
            labels = meta.get("labels") or {}
            if "kubernetes.io/hostname" in labels:
                labels["kubernetes.io/hostname"] = _renamed(labels["kubernetes.io/hostname"])
            for holder, key in ((spec, "providerID"), (status, "providerID"), (status, "nodeName")):
                if holder.get(key):
                    holder[key] = _renamed(str(holder[key]))
        elif kind == "Pod" and spec.get("nodeName"):
            spec["nodeName"] = _renamed(str(spec["nodeName"]))
        if kind == "Deployment":
            found = next(d for d in self.scenario.deployments if (d.namespace, d.name) == (namespace, name))
            labels = (found.template.get("metadata") or {}).get("labels") or {}
            spec.update(selector={"matchLabels": dict(labels)}, template=copy.deepcopy(dict(found.template)))
            if found.strategy:
                spec["strategy"] = dict(found.strategy)
        elif kind == "StatefulSet":
            found_set = next(
                s for s in self.scenario.statefulsets if (s.namespace, s.name) == (namespace, name)
            )
            labels = (found_set.template.get("metadata") or {}).get("labels") or {}
            spec.update(
                selector={"matchLabels": dict(labels)},
                template=copy.deepcopy(dict(found_set.template)),
                serviceName=name,
            )
        return body

    def _write(self, verb: str, kind: str, body: dict[str, Any]) -> None:
        key = _key(kind, body)
        if verb == "create" and key not in self._present:
            self.kubectl.create(body)
            self._present.add(key)
        elif verb == "delete":
            if key not in self._present:
                return
            self.kubectl.delete(kind, key[2], key[1])
            self._present.discard(key)
        elif key in self._present:
            self.kubectl.update(body)
        else:
            return
        self.written[kind] = self.emu.run(lambda: self.emu.emulator._last_rv)

    def _owners_of(self, pod: dict[str, Any]) -> None:
        """The ReplicaSet or Job of a pod's first appearance, written before it."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default")
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "ReplicaSet":
                self._replica_set(
                    namespace, str(ref["name"]), str((meta.get("labels") or {}).get("pod-template-hash"))
                )
            elif ref.get("kind") == "Job":
                self._job(namespace, str(ref["name"]))

    def _replica_set(self, namespace: str, name: str, hash_: str) -> None:
        if ("ReplicaSet", namespace, name) in self._present:
            return
        deployment = name[: -len(hash_) - 1]
        found = next(d for d in self.scenario.deployments if (d.namespace, d.name) == (namespace, deployment))
        template = copy.deepcopy(dict(found.template))
        labels = {**((template.get("metadata") or {}).get("labels") or {}), "pod-template-hash": hash_}
        template.setdefault("metadata", {})["labels"] = labels
        owner = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": deployment,
            "uid": "x",
            "controller": True,
        }
        body = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
        }
        self._write("create", "ReplicaSet", body)

    def _job(self, namespace: str, name: str) -> None:
        if ("Job", namespace, name) in self._present:
            return
        found = next(
            j for j in self.scenario.jobs if j.namespace == namespace and name.startswith(f"{j.name}-")
        )
        owner = {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": found.name,
            "uid": "x",
            "controller": True,
        }
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
            "spec": {
                "completions": found.completions,
                "parallelism": found.parallelism,
                "template": copy.deepcopy(dict(found.template)),
            },
        }
        self._write("create", "Job", body)

    def apply(self, event: Event) -> None:
        """One event of the simulation, as the emulator's write."""
        body = self._body(event.kind, event.obj)
        if event.kind == "Pod" and event.type != "DELETED":
            self._owners_of(body)
        verb = {"ADDED": "create", "DELETED": "delete"}.get(event.type, "update")
        self._write(verb, event.kind, body)

    def state(self, events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
        """The objects as they are after ``events``: (kind, object), in creation order by kind."""
        objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        for event in events:
            key = _key(event.kind, event.obj)
            if event.type == "DELETED":
                objects.pop(key, None)
            else:
                objects[key] = event.obj
        return sorted(((k[0], o) for k, o in objects.items()), key=lambda ko: _ORDER[ko[0]])


def _instants(events: list[Event]) -> Iterator[tuple[float, list[Event]]]:
    group: list[Event] = []
    for event in events:
        if group and event.at != group[0].at:
            yield group[0].at, group
            group = []
        group.append(event)
    if group:
        yield group[0].at, group


@dataclass(frozen=True)
class Recorded:
    trace: Path
    recording: model.Recording
    source: runner.RunResult
    events: int


def record(
    emu: EmulatorThread,
    kubectl: KubeClient,
    source: Path,
    *,
    trace: Path,
    begin: float,
    seed: int = 1,
    name: str | None = None,
    catalog: str | None = None,
) -> Recorded:
    """Simulate ``source``, mirror it into ``emu`` and record it from ``begin`` (POSIX seconds)
    to the scenario's end; the trace (and its snapshot folder) is written to ``trace``."""
    scenario = scenario_mod.load(source)
    events, result = simulate(scenario, seed=seed)
    mirror = Mirror(emu, kubectl, scenario)
    now = [begin]
    before = emulator_mod._now
    emulator_mod._now = lambda: encode.time(now[0])  # the emulator's clock is the virtual one
    client = KubeClient(host=emu.url, identity="karpy-record", timeout=5.0).start()
    try:
        for kind, obj in mirror.state([e for e in events if e.at <= begin]):
            if kind == "Pod":
                mirror._owners_of(obj)
            mirror._write("create", kind, mirror._body(kind, obj))
        recording = live.LiveRecording(client, clock=lambda: now[0], server="kmock")
        snap = recording.start(sync_timeout=10.0)
        later = [e for e in events if begin < e.at < scenario.end]
        for at, group in _instants(later):
            now[0] = at
            for event in group:
                mirror.apply(event)
            _settle(recording, mirror.written)
        now[0] = scenario.end
        recording.pump()
        recorded = recording.finish()
        live.write(recorded, snap, trace=trace, name=name, catalog=catalog or scenario.catalog)
    finally:
        client.close()
        emulator_mod._now = before
    return Recorded(trace, recorded, result, len(later))


def _settle(recording: live.LiveRecording, written: dict[str, int], timeout: float = 10.0) -> None:
    """Wait until the recorder has seen the last write of every kind it watches."""
    deadline = time.monotonic() + timeout
    seen = recording.recorder.versions
    written = {kind: version for kind, version in written.items() if kind in recording.kinds}
    while any(seen.get(kind, 0) < version for kind, version in written.items()):
        if time.monotonic() > deadline:
            late = {k: (seen.get(k, 0), v) for k, v in written.items() if seen.get(k, 0) < v}
            raise TimeoutError(f"the recorder did not see the writes of {late}")
        recording.pump(0.05)


def record_example(out: Path) -> Recorded:
    """Record ``examples/backtest/source.yaml`` into ``out/shop.yaml`` (and ``out/shop-snapshot/``)
    through a fresh emulator: what ``scripts/record_example.py`` commits."""
    emu = EmulatorThread()
    kubectl = KubeClient(host=emu.url, identity="kubectl", timeout=5.0).start()
    try:
        begin = common.parse_time(EXAMPLE_BEGIN)
        return record(emu, kubectl, EXAMPLE / "source.yaml", trace=out / "shop.yaml", begin=begin)
    finally:
        kubectl.close()
        emu.stop()
