"""A :class:`~karpy.record.model.Recording` -> a trace: a ``kind: Simulation`` document, and its YAML.

:func:`trace` writes what ``karpy simulate`` and ``karpy backtest`` read (``docs/backtest.md``):

- ``start`` and ``duration``: the window, to whole seconds; ``initialState: {snapshot, pods: false}``
  when a snapshot was taken (its nodes, NodePools, DaemonSets, PDBs start the run; the trace runs
  every workload pod, also those alive at the start);
- ``nodePools`` and ``nodeClasses`` as they were at the start (status and server-set metadata
  dropped); ``cloud.launchLatency`` fitted to the recorded nodes (launch -> Ready: p50 and p95,
  lognormal; fixed with fewer than 3 nodes or no spread);
- one workload per top owner with pods alive in the window (DaemonSet and static pods left out):
  a Deployment (or a ReplicaSet or another controller, followed by its pods' count) with its
  ``spec.replicas`` as a step curve at RFC3339 times and its rollouts; a StatefulSet likewise; a
  Job (per CronJob, or per Job) with one run per recorded Job (start, the median time its pods
  ran, name); bare pods (per name or ``generateName``) with one run per pod (created, ran for,
  deleted);
- for a cluster without NodeClaims, ``baseline.clusterAutoscaler`` with one node group per
  recorded group (``eks.amazonaws.com/nodegroup``, else instance type and capacity type): its
  instance types, capacity type, zones, shared labels and taints, ``min`` the fewest of its nodes
  at any time recorded;
- ``recorded``: the nodes and the figures (:func:`karpy.sim.recorded.node_figures`, pods created,
  pending seconds by :func:`karpy.sim.metrics.percentiles`).

:func:`dump` renders it as YAML (short lists and flat entries in flow style). Deterministic: the
same recording gives the same text. Pure; used by ``karpy record`` (and any other source of a
recording).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

from karpy.api import common, encode
from karpy.model import labels as wk
from karpy.record import model
from karpy.record.recorder import CAPACITY_LABEL, NODE_GROUP_LABEL
from karpy.sim import initial, metrics
from karpy.sim import recorded as recorded_mod

__all__ = ["dump", "trace"]

_PER_NODE = frozenset(
    {wk.HOSTNAME, wk.ZONE, wk.REGION, wk.INSTANCE_TYPE, NODE_GROUP_LABEL, CAPACITY_LABEL, wk.CAPACITY_TYPE}
)


def _stamp(t: float) -> str:
    return encode.time(round(t))


def _duration(seconds: float) -> str:
    return encode.duration(max(1, round(seconds)))


def trace(
    recording: model.Recording,
    *,
    name: str,
    catalog: str,
    snapshot: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    """The trace document of ``recording`` (see the module docstring)."""
    start = math.floor(recording.start)
    end = max(start + 1, round(recording.end))
    karpenter = recording.node_claims > 0
    doc: dict[str, Any] = {
        "apiVersion": common.KARPY_API_VERSION,
        "kind": "Simulation",
        "name": name,
        "description": description or _describe(recording),
        "start": _stamp(start),
        "duration": _duration(end - start),
        "catalog": catalog,
    }
    if snapshot is not None:
        doc["initialState"] = {"snapshot": snapshot, "pods": False}
    if recording.node_pools:
        doc["nodePools"] = [_cleaned(p) for p in recording.node_pools]
    if recording.node_classes:
        doc["nodeClasses"] = [_cleaned(c) for c in recording.node_classes]
    doc["workloads"] = _workloads(recording, start=start, end=end)
    latency = _latency(recording.nodes, start)
    if latency is not None:
        doc["cloud"] = {"launchLatency": latency}
    if not karpenter:
        groups = _node_groups(recording.nodes, start=start, end=end)
        if groups:
            doc["baseline"] = {"clusterAutoscaler": {"nodeGroups": groups}}
    doc["recorded"] = _recorded(recording, start=start, end=end, karpenter=karpenter)
    return doc


def _cleaned(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A NodePool or NodeClass as a scenario gives it: no status, nothing the API server set."""
    out = initial.clean(raw)
    meta = out["metadata"]
    for key in ("uid", "ownerReferences", "finalizers"):
        meta.pop(key, None)
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if not k.startswith("kubectl.kubernetes.io/")
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return out


def _describe(recording: model.Recording) -> str:
    where = f" from {recording.server}" if recording.server else ""
    cut = " (interrupted: a partial recording)" if recording.interrupted else ""
    return f"recorded by karpy record{where}{cut}"


# -- workloads ------------------------------------------------------------------------------


def _alive(pod: model.PodLife, start: float) -> bool:
    """A workload pod there (or arriving) during the window, not one already done at its start."""
    if pod.daemonset:
        return False
    done = [t for t in (pod.finished, pod.deleted) if t is not None]
    return not done or min(done) > start


def _workloads(recording: model.Recording, *, start: float, end: float) -> list[dict[str, Any]]:
    by_owner: dict[model.OwnerKey, list[model.PodLife]] = {}
    for pod in recording.pods:
        if _alive(pod, start):
            by_owner.setdefault(pod.owner, []).append(pod)
    owners = {o.key: o for o in recording.owners}
    jobs = {(j.namespace, j.name): j for j in recording.jobs}
    out: list[dict[str, Any]] = []
    for key in sorted(by_owner):
        pods = by_owner[key]
        owner = owners.get(key) or model.Owner(key, pods[0].template)
        if key.kind == model.BARE:
            out.append(_bare(owner, pods))
        elif key.kind in (model.JOB, model.CRONJOB):
            out.append(_job(owner, pods, jobs=jobs, start=start, end=end))
        else:
            out.append(_replicated(owner, pods, start=start, end=end))
    return out


def _meta(key: model.OwnerKey, kind: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": key.name, "namespace": key.namespace}
    if key.kind not in (kind, model.BARE):  # a ReplicaSet, ReplicationController, ... run as a Deployment
        meta["annotations"] = {"karpy.dev/recorded-owner": f"{key.kind}/{key.name}"}
    return meta


def _points(changes: Iterable[tuple[float, int]], *, start: float, end: float) -> list[tuple[int, int]]:
    """Whole-second step points from ``start``: the last value at each second, no repeats."""
    at: dict[int, int] = {}
    for t, n in sorted(changes, key=lambda c: c[0]):
        at[round(min(end, max(start, t)))] = n
    points: list[tuple[int, int]] = []
    for t, n in sorted(at.items()):
        if not points or points[-1][1] != n:
            points.append((t, n))
    if not points or points[0][0] != start:
        points.insert(0, (round(start), 0))
    return points


def _curve(points: Sequence[tuple[int, int]]) -> int | dict[str, Any]:
    if len(points) == 1:
        return points[0][1]
    return {"interpolate": "step", "points": [[_stamp(t), n] for t, n in points]}


def _counts(pods: Sequence[model.PodLife], *, start: float) -> list[tuple[float, int]]:
    """The number of the owner's live pods at every change (for an owner whose object was not seen)."""
    steps: list[tuple[float, int]] = []
    for pod in pods:
        steps.append((pod.created, 1))
        done = [t for t in (pod.finished, pod.deleted) if t is not None]
        if done:
            steps.append((min(done), -1))
    count, out = 0, [(start, 0)]
    for t, step in sorted(steps):
        count += step
        out.append((t, count))
    return out


def _replicated(
    owner: model.Owner, pods: Sequence[model.PodLife], *, start: float, end: float
) -> dict[str, Any]:
    """A Deployment or StatefulSet (or another controller's pods, as a Deployment)."""
    changes = list(owner.replicas) or _counts(pods, start=start)
    if owner.replicas and owner.created is not None:
        changes.insert(0, (start, 0))  # created during the window: none before
    if owner.replicas and owner.replicas[0][0] > start and owner.created is None:
        changes.insert(0, (start, owner.replicas[0][1]))
    points = _points(changes, start=start, end=end)
    if owner.key.kind == model.STATEFULSET:
        spec: dict[str, Any] = {"template": owner.template}
        if owner.parallel:
            spec["podManagementPolicy"] = "Parallel"
        return {
            "statefulSet": {"metadata": _meta(owner.key, model.STATEFULSET), "spec": spec},
            "replicas": _curve(points),
        }
    spec = {"template": owner.template}
    if owner.strategy:
        spec["strategy"] = dict(owner.strategy)
    entry: dict[str, Any] = {
        "deployment": {"metadata": _meta(owner.key, model.DEPLOYMENT), "spec": spec},
        "replicas": _curve(points),
    }
    rollouts = sorted({round(t) for t in owner.rollouts if start < t < end})
    if rollouts:
        entry["rollouts"] = [_stamp(t) for t in rollouts]
    return entry


def _ran(pod: model.PodLife, since: float) -> float | None:
    """How long a finished pod ran (from ``since`` at the earliest); None while unfinished."""
    if pod.finished is None:
        return None
    began = pod.running if pod.running is not None else pod.created
    return max(0.0, pod.finished - max(began, since))


def _job(
    owner: model.Owner,
    pods: Sequence[model.PodLife],
    *,
    jobs: Mapping[tuple[str, str], model.JobLife],
    start: float,
    end: float,
) -> dict[str, Any]:
    """A Job workload with one run per recorded Job of ``owner`` (itself, or its CronJob's Jobs)."""
    by_job: dict[str, list[model.PodLife]] = {}
    for pod in pods:
        by_job.setdefault(pod.job or owner.key.name, []).append(pod)
    runs: list[dict[str, Any]] = []
    first: model.JobLife | None = None
    for job_name, members in sorted(by_job.items(), key=lambda kv: (min(p.created for p in kv[1]), kv[0])):
        life = jobs.get((owner.key.namespace, job_name))
        first = first or life
        at = max(start, life.created if life is not None and life.created is not None else members[0].created)
        durations = [d for d in (_ran(p, at) for p in members) if d is not None]
        run_for = statistics.median(durations) if durations else end - at
        runs.append({"at": _stamp(at), "runFor": _duration(run_for), "name": job_name})
    completions = (first.completions if first is not None else None) or len(by_job[runs[0]["name"]])
    parallelism = (first.parallelism if first is not None else None) or completions
    template = first.template if first is not None and first.template.get("spec") else owner.template
    job = {
        "metadata": _meta(owner.key, owner.key.kind),
        "spec": {"completions": completions, "parallelism": parallelism, "template": template},
    }
    return {"job": job, "runs": runs}


def _bare(owner: model.Owner, pods: Sequence[model.PodLife]) -> dict[str, Any]:
    """Bare pods of one name (or ``generateName``): a run per pod."""
    meta: dict[str, Any] = dict(owner.template.get("metadata") or {})
    named = "generateName" if pods[0].generate_name else "name"
    meta = {named: owner.key.name, "namespace": owner.key.namespace, **meta}
    runs = []
    for pod in sorted(pods, key=lambda p: p.created):
        run: dict[str, Any] = {"at": _stamp(pod.created)}
        ran = _ran(pod, pod.created)
        if ran is not None:
            run["runFor"] = _duration(ran)
        if pod.deleted is not None:
            run["deleteAt"] = _stamp(max(pod.deleted, pod.created))
        runs.append(run)
    return {"pod": {"metadata": meta, "spec": owner.template.get("spec") or {}}, "runs": runs}


# -- nodes ----------------------------------------------------------------------------------


def _latency(nodes: Sequence[model.NodeLife], start: float) -> dict[str, Any] | None:
    """Launch -> Ready of the nodes launched during the window (None: none was)."""
    seen = sorted(n.ready - n.launched for n in nodes if n.launched > start and n.ready is not None)
    if not seen:
        return None
    figures = metrics.percentiles(seen)
    p50, p95 = max(1, round(figures["p50"] or 0)), max(1, round(figures["p95"] or 0))
    if len(seen) < 3 or p95 <= p50:
        return {"distribution": "fixed", "p50": f"{p50}s"}
    return {"distribution": "lognormal", "p50": f"{p50}s", "p95": f"{p95}s"}


def _group_of(node: model.NodeLife) -> str:
    return node.node_group or f"recorded-{node.instance_type}-{node.capacity_type}"


def _node_groups(nodes: Sequence[model.NodeLife], *, start: float, end: float) -> list[dict[str, Any]]:
    """Cluster Autoscaler node groups from the recorded nodes (see the module docstring)."""
    groups: dict[tuple[str, str], list[model.NodeLife]] = {}
    for n in nodes:
        groups.setdefault((_group_of(n), n.capacity_type), []).append(n)
    names = [g for g, _ in groups]
    out = []
    for (group, capacity), members in sorted(groups.items()):
        label_sets = [dict(n.labels) for n in members]
        shared = {k: v for k, v in label_sets[0].items() if all(s.get(k) == v for s in label_sets[1:])}
        taints = [t for t in members[0].taints if all(t in n.taints for n in members[1:])]
        entry: dict[str, Any] = {
            "name": group if names.count(group) == 1 else f"{group}-{capacity}",
            "instanceTypes": sorted({n.instance_type for n in members}),
            "capacityType": capacity,
            "zones": sorted({n.zone for n in members if n.zone}),
            "min": _fewest(members, start=start, end=end),
            "max": 1000,
        }
        labels = {
            k: v
            for k, v in sorted(shared.items())
            if k not in _PER_NODE and not k.startswith("karpenter.sh/")
        }
        if labels:
            entry["labels"] = labels
        if taints:
            entry["taints"] = [dict(t) for t in taints]
        out.append(entry)
    return out


def _fewest(members: Sequence[model.NodeLife], *, start: float, end: float) -> int:
    """The fewest of these nodes registered at any time of the window (each instant's changes together)."""
    steps: dict[float, int] = {start: 0}
    for n in members:
        if n.registered is not None:
            steps[n.registered] = steps.get(n.registered, 0) + 1
            if n.deleted is not None and n.deleted <= end:
                steps[n.deleted] = steps.get(n.deleted, 0) - 1
    count, fewest = 0, None
    for t, step in sorted(steps.items()):
        count += step
        if t >= start:
            fewest = count if fewest is None else min(fewest, count)
    return max(0, fewest or 0)


def _recorded(recording: model.Recording, *, start: float, end: float, karpenter: bool) -> dict[str, Any]:
    nodes: list[dict[str, Any]] = []
    values: list[recorded_mod.RecordedNode] = []
    for n in recording.nodes:
        entry: dict[str, Any] = {"name": n.name, "launched": _stamp(n.launched)}
        for field in ("registered", "ready", "deleted"):
            value = getattr(n, field)
            if value is not None:
                entry[field] = _stamp(max(value, n.launched))
        entry.update(instanceType=n.instance_type, zone=n.zone, capacityType=n.capacity_type)
        if n.node_pool:
            entry["nodePool"] = n.node_pool
        if n.node_group:
            entry["nodeGroup"] = n.node_group
        nodes.append(entry)
        values.append(
            recorded_mod.RecordedNode(
                n.name,
                round(n.launched),
                n.instance_type,
                registered=None if n.registered is None else round(max(n.registered, n.launched)),
                deleted=None if n.deleted is None else round(max(n.deleted, n.launched)),
            )
        )
    counted = recorded_mod.node_figures(values, start=start, end=end)
    pods = [p for p in recording.pods if not p.daemonset and p.created > start]
    pending = [p.bound - p.created for p in pods if p.bound is not None and p.priority >= 0]
    figures: dict[str, Any] = {
        "nodeHours": counted["node_hours"],
        "peakNodes": counted["peak_nodes"],
        "nodesLaunched": counted["nodes_launched"],
        "launchesPerHour": counted["launches_per_hour"],
        "podsCreated": len(pods),
        "pendingSeconds": metrics.percentiles(pending) if pending else None,
    }
    block: dict[str, Any] = {
        "source": recording.source,
        "server": recording.server,
        "autoscaler": recorded_mod.KARPENTER if karpenter else "cluster-autoscaler",
        "interrupted": recording.interrupted,
        "figures": {k: v for k, v in figures.items() if v is not None},
        "nodes": nodes,
    }
    return block


# -- YAML -----------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Block style, but lists of scalars and flat mappings in lists (runs, nodes) in flow style."""


class _Flow(dict[str, Any]):
    """A mapping of scalars written on one line."""


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> Any:
    flow = bool(value) and all(_scalar(v) or (isinstance(v, list) and all(map(_scalar, v))) for v in value)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


def _flow(dumper: yaml.SafeDumper, value: _Flow) -> Any:
    return dumper.represent_mapping("tag:yaml.org,2002:map", dict(value), flow_style=True)


_Dumper.add_representer(list, _list)
_Dumper.add_representer(_Flow, _flow)


def _flat(value: Any) -> Any:
    """``value`` with every mapping of scalars that is an item of a list marked as :class:`_Flow`."""
    if isinstance(value, Mapping):
        return {k: _flat(v) for k, v in value.items()}
    if isinstance(value, list):
        return [
            _Flow(v) if isinstance(v, Mapping) and v and all(map(_scalar, v.values())) else _flat(v)
            for v in value
        ]
    return value


def dump(document: Mapping[str, Any]) -> str:
    """The trace as YAML text."""
    header = "# Recorded by `karpy record` (docs/backtest.md): karpy simulate and karpy backtest read it.\n"
    return header + yaml.dump(_flat(document), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
