"""Write the Prometheus answers ``tests/record/test_record_prometheus.py`` serves (see README.md).

    python tests/record/prometheus/generate.py [--check]

Runs ``examples/backtest/source.yaml`` through karpy's simulator (seed 1, as
``scripts/record_example.py`` does for the live recording ``examples/backtest/shop.yaml``), plays
the objects as the mirrored cluster had them (``tests/record/mirror.py``: nodes renamed
``rec-<name>``, a ReplicaSet per pod template hash owned by its Deployment, a Job per cron run
owned by the CronJob ``report``) plus a ``node-agent`` DaemonSet pod per node, and scrapes them as
kube-state-metrics v2 would every 60 s from 07:20 to 09:00 (pod labels allow-listed: ``app``; node
labels: the well-known ones; no annotations, no node selectors, the opt-in metric being off). It
writes one answer per metric, as Prometheus's HTTP API gives it: the range queries' matrix at the
60 s step over the window, and the instant queries' vector (each series' last value over the
window). ``--check`` writes nothing and exits 1 when the committed files differ.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "adapters"), str(ROOT / "tests" / "record")]

import mirror  # noqa: E402

from karpy.api import common  # noqa: E402
from karpy.model import labels as wk  # noqa: E402
from karpy.model import quantity  # noqa: E402
from karpy.record import prom_labels, prom_series  # noqa: E402
from karpy.sim import scenario as scenario_mod  # noqa: E402

STEP = 60.0
POD_LABELS = ("app",)
NODE_LABELS = (
    wk.INSTANCE_TYPE,
    wk.ZONE,
    wk.REGION,
    wk.CAPACITY_TYPE,
    wk.NODEPOOL,
    wk.ARCH,
    wk.OS,
    wk.HOSTNAME,
)
Labels = tuple[tuple[str, str], ...]


def _stamp(text: str | None, default: float) -> float:
    return float(math.floor(common.parse_time(text))) if text else float(math.floor(default))


class Cluster:
    """The mirrored cluster's objects as they change (see the module docstring)."""

    def __init__(self, scenario: scenario_mod.Scenario) -> None:
        self.scenario = scenario
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> pod (+ "_created", "_scheduled")
        self.nodes: dict[str, dict[str, Any]] = {}
        self.scale: dict[tuple[str, str, str], int] = {}  # (kind, namespace, name) -> spec.replicas
        self.replica_sets: dict[tuple[str, str], tuple[str, float]] = {}  # -> (deployment, created)
        self.jobs: dict[tuple[str, str], tuple[Any, float]] = {}  # -> (scenario job, created)
        agent = scenario.daemon_sets[0]
        self.agent = (agent["metadata"]["namespace"], agent["metadata"]["name"], agent["spec"]["template"])

    def apply(self, event: mirror.Event) -> None:
        obj = copy.deepcopy(event.obj)
        meta = obj.get("metadata") or {}
        if event.kind == "Pod":
            self._pod(event, obj)
        elif event.kind == "Node":
            name = mirror._renamed(meta["name"])
            if event.type == "DELETED":
                self.nodes.pop(name, None)
                self.pods.pop(f"agent-{name}", None)
                return
            obj["metadata"]["name"] = name
            obj["_created"] = _stamp(meta.get("creationTimestamp"), event.at)
            if name not in self.nodes:
                self._agent(name, obj["_created"])
            self.nodes[name] = obj
        elif event.kind in ("Deployment", "StatefulSet"):
            key = (event.kind, meta.get("namespace", "default"), meta["name"])
            if event.type == "DELETED":
                self.scale.pop(key, None)
            else:
                self.scale[key] = int(obj["spec"].get("replicas", 1))

    def _pod(self, event: mirror.Event, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        if event.type == "DELETED":
            self.pods.pop(uid, None)
            return
        old = self.pods.get(uid)
        spec = obj["spec"]
        if spec.get("nodeName"):
            spec["nodeName"] = mirror._renamed(spec["nodeName"])
        obj["_created"] = _stamp(meta.get("creationTimestamp"), event.at)
        scheduled = old.get("_scheduled") if old else None
        obj["_scheduled"] = scheduled or (math.floor(event.at) if spec.get("nodeName") else None)
        namespace = meta.get("namespace", "default")
        for ref in meta.get("ownerReferences") or []:
            if ref["kind"] == "ReplicaSet" and (namespace, ref["name"]) not in self.replica_sets:
                deployment = ref["name"].rpartition("-")[0]
                self.replica_sets[(namespace, ref["name"])] = (deployment, math.floor(event.at))
            if ref["kind"] == "Job" and (namespace, ref["name"]) not in self.jobs:
                job = next(j for j in self.scenario.jobs if ref["name"].startswith(f"{j.name}-"))
                self.jobs[(namespace, ref["name"])] = (job, math.floor(event.at))
        self.pods[uid] = obj

    def _agent(self, node: str, at: float) -> None:
        namespace, name, template = self.agent
        self.pods[f"agent-{node}"] = {
            "metadata": {
                "name": f"{name}-{node}",
                "namespace": namespace,
                "uid": f"agent-{node}",
                "labels": dict(template["metadata"]["labels"]),
                "ownerReferences": [{"kind": "DaemonSet", "name": name, "controller": True}],
            },
            "spec": {**copy.deepcopy(template["spec"]), "nodeName": node},
            "status": {"phase": "Running"},
            "_created": at,
            "_scheduled": at,
        }


def _pod_series(pod: dict[str, Any]) -> Iterator[tuple[str, dict[str, str], float]]:
    """(metric, labels, value) of one pod, as kube-state-metrics exports it."""
    meta, spec = pod["metadata"], pod["spec"]
    who = {"namespace": meta["namespace"], "pod": meta["name"], "uid": meta["uid"]}
    node = spec.get("nodeName", "")
    yield "kube_pod_created", who, pod["_created"]
    yield "kube_pod_status_phase", {**who, "phase": pod["status"].get("phase", "Pending")}, 1.0
    if pod["_scheduled"] is not None:
        yield "kube_pod_status_scheduled_time", who, float(pod["_scheduled"])
    refs = meta.get("ownerReferences") or [{"kind": "<none>", "name": "<none>", "controller": False}]
    for ref in refs:
        owner = {"owner_kind": ref["kind"], "owner_name": ref["name"]}
        yield "kube_pod_owner", {**who, **owner, "owner_is_controller": str(ref["controller"]).lower()}, 1.0
    created_by = (
        {"created_by_kind": refs[0]["kind"], "created_by_name": refs[0]["name"]}
        if meta.get("ownerReferences")
        else {}
    )
    yield "kube_pod_info", {**who, "node": node, **created_by, "host_network": "false"}, 1.0
    for container in spec["containers"]:
        name = container["name"]
        yield "kube_pod_container_info", {**who, "container": name, "image": container["image"]}, 1.0
        for resource, amount in (container.get("resources") or {}).get("requests", {}).items():
            value = (
                quantity.to_milli(amount) / 1000 if resource == "cpu" else float(quantity.to_units(amount))
            )
            unit = "core" if resource == "cpu" else "byte"
            labels = {**who, "container": name, "node": node, "resource": resource, "unit": unit}
            yield "kube_pod_container_resource_requests", labels, value
    kept = {
        f"label_{prom_labels.name_of(k)}": v for k, v in (meta.get("labels") or {}).items() if k in POD_LABELS
    }
    yield "kube_pod_labels", {**who, **kept}, 1.0
    for t in spec.get("tolerations") or []:
        fields = {k: str(t[k]) for k in ("key", "operator", "value", "effect") if t.get(k)}
        yield "kube_pod_tolerations", {**who, **fields}, 1.0


def _node_series(name: str, node: dict[str, Any]) -> Iterator[tuple[str, dict[str, str], float]]:
    meta = node["metadata"]
    yield "kube_node_created", {"node": name}, node["_created"]
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Ready" and cond["status"] == "True":
            yield "kube_node_status_condition", {"node": name, "condition": "Ready", "status": "true"}, 1.0
    if meta.get("deletionTimestamp"):
        yield "kube_node_deletion_timestamp", {"node": name}, _stamp(meta["deletionTimestamp"], 0)
    labels = {
        f"label_{prom_labels.name_of(k)}": v
        for k, v in (meta.get("labels") or {}).items()
        if k in NODE_LABELS
    }
    labels[f"label_{prom_labels.name_of(wk.HOSTNAME)}"] = name
    yield "kube_node_labels", {"node": name, **labels}, 1.0
    for taint in (node.get("spec") or {}).get("taints") or []:
        fields = {k: taint[k] for k in ("key", "value", "effect") if taint.get(k)}
        yield "kube_node_spec_taint", {"node": name, **fields}, 1.0


def _scrape(cluster: Cluster) -> Iterator[tuple[str, dict[str, str], float]]:
    """Every series kube-state-metrics exports of the cluster as it is now."""
    for pod in cluster.pods.values():
        yield from _pod_series(pod)
    for name, node in sorted(cluster.nodes.items()):
        yield from _node_series(name, node)
    for (kind, namespace, name), replicas in sorted(cluster.scale.items()):
        metric = "kube_deployment_spec_replicas" if kind == "Deployment" else "kube_statefulset_replicas"
        yield metric, {"namespace": namespace, kind.lower(): name}, float(replicas)
    for (namespace, name), (deployment, created) in sorted(cluster.replica_sets.items()):
        who = {"namespace": namespace, "replicaset": name}
        owner = {"owner_kind": "Deployment", "owner_name": deployment, "owner_is_controller": "true"}
        yield "kube_replicaset_owner", {**who, **owner}, 1.0
        yield "kube_replicaset_created", who, float(created)
    for (namespace, name), (job, created) in sorted(cluster.jobs.items()):
        who = {"namespace": namespace, "job_name": name}
        owner = {"owner_kind": "CronJob", "owner_name": job.name, "owner_is_controller": "true"}
        yield "kube_job_owner", {**who, **owner}, 1.0
        yield "kube_job_created", who, float(created)
        yield "kube_job_spec_completions", who, float(job.completions)
        yield "kube_job_spec_parallelism", who, float(job.parallelism)


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def answers() -> dict[str, dict[str, Any]]:
    """The answer to each query of :data:`karpy.record.prom_series.QUERIES`, by metric."""
    scenario = scenario_mod.load(mirror.EXAMPLE / "source.yaml")
    events, _ = mirror.simulate(scenario)
    start, end = common.parse_time(mirror.EXAMPLE_BEGIN), scenario.end
    cluster = Cluster(scenario)
    ranged: dict[str, dict[Labels, list[list[Any]]]] = {}
    last: dict[str, dict[Labels, float]] = {}
    queries = {q.metric: q for q in prom_series.QUERIES}
    pending = iter(events)
    upcoming = next(pending, None)
    t = start
    while t <= end:
        while upcoming is not None and upcoming.at <= t:
            cluster.apply(upcoming)
            upcoming = next(pending, None)
        for metric, labels, value in _scrape(cluster):
            key = tuple(sorted(labels.items()))
            if queries[metric].ranged:
                ranged.setdefault(metric, {}).setdefault(key, []).append([t, _number(value)])
            else:
                last.setdefault(metric, {})[key] = value
        t += STEP
    out = {}
    for metric, query in queries.items():
        if query.ranged:
            name = {} if query.selector else {"__name__": metric}
            result = [
                {"metric": {**name, **dict(k)}, "values": v}
                for k, v in sorted(ranged.get(metric, {}).items())
            ]
            out[metric] = {"resultType": "matrix", "result": result}
        else:
            at = end
            result = [
                {"metric": dict(k), "value": [at, _number(v)]}
                for k, v in sorted(last.get(metric, {}).items())
            ]
            out[metric] = {"resultType": "vector", "result": result}
    return out


def _text(data: dict[str, Any]) -> str:
    """A Prometheus answer, one series per line."""
    series = ",\n".join(json.dumps(s, separators=(",", ":")) for s in data["result"])
    head = f'{{"status":"success","data":{{"resultType":"{data["resultType"]}","result":['
    return f"{head}\n{series}\n]}}}}\n" if series else f"{head}]}}}}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files, write nothing"
    )
    args = parser.parse_args()
    differ = []
    for metric, data in answers().items():
        path = HERE / f"{metric}.json"
        text = _text(data)
        if args.check:
            if not path.exists() or path.read_text() != text:
                differ.append(path.name)
        else:
            path.write_text(text)
    for name in differ:
        print(f"differs: tests/record/prometheus/{name}")
    if not args.check:
        print(f"wrote {len(prom_series.QUERIES)} answers into tests/record/prometheus/")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
