"""The pure parts of ``karpy record``: watch events -> a recording (injected clock), the recording
-> a trace, and the anonymizer. No server: events are made here."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import common
from karpy.ports import WatchEvent
from karpy.record import anonymize, model, recorder, writer
from karpy.sim import scenario as scenario_mod

T0 = common.parse_time("2026-03-02T10:00:00Z")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _pod(name: str, *, owner: tuple[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop", "uid": f"uid-{name}", "labels": {"app": "x"}}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "img:1",
                "env": [{"name": "SECRET", "value": "s3"}],
                "resources": {"requests": {"cpu": "1"}},
            }
        ],
        "serviceAccountName": "robot",
    }
    return {"kind": "Pod", "metadata": meta, "spec": {**spec, **extra.pop("spec", {})}, **extra}


def _node(name: str, *, group: str = "", spot: bool = False, ready: bool = True) -> dict[str, Any]:
    labels = {
        "node.kubernetes.io/instance-type": "m5.large",
        "topology.kubernetes.io/zone": "us-east-1a",
        "topology.kubernetes.io/region": "us-east-1",
        "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
        "team": "payments",
    }
    if group:
        labels["eks.amazonaws.com/nodegroup"] = group
    status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {}, "status": status}


def test_the_recorder_stamps_changes_with_its_clock_and_resolves_owners() -> None:
    clock = Clock()
    rec = recorder.Recorder(clock)
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "x"}}, "spec": {}}},
    }
    rec.observe(WatchEvent("ADDED", "Deployment", deployment))
    web_pod = _pod("web-h-1", owner=("ReplicaSet", "web-h"))
    web_pod["metadata"]["labels"]["pod-template-hash"] = "h"  # (no ReplicaSet seen: its name tells)
    rec.observe(WatchEvent("ADDED", "Pod", web_pod))
    rec.begin()
    clock.now = T0 + 60
    rec.observe(
        WatchEvent("MODIFIED", "Deployment", {**deployment, "spec": {**deployment["spec"], "replicas": 5}})
    )
    rec.observe(WatchEvent("ADDED", "Pod", _pod("orphan")))
    clock.now = T0 + 90
    rec.observe(WatchEvent("MODIFIED", "Pod", _pod("orphan", spec={"nodeName": "n1"})))
    rec.observe(WatchEvent("ADDED", "Pod", _pod("rc-1", owner=("ReplicationController", "rc"))))
    clock.now = T0 + 120
    rec.observe(WatchEvent("DELETED", "Pod", _pod("orphan", spec={"nodeName": "n1"})))
    clock.now = T0 + 300
    rec.observe(WatchEvent("DELETED", "Deployment", deployment))
    got = rec.finish()
    assert (got.start, got.end) == (T0, T0 + 300)
    by_name = {p.name: p for p in got.pods}
    assert by_name["web-h-1"].owner == model.OwnerKey("shop", "Deployment", "web")
    assert by_name["web-h-1"].created == T0  # listed before the window: there at its start
    orphan = by_name["orphan"]
    assert orphan.owner == model.OwnerKey("shop", "", "orphan")
    assert (orphan.created, orphan.bound, orphan.deleted, orphan.node) == (T0 + 60, T0 + 90, T0 + 120, "n1")
    assert (
        "env" not in orphan.template["spec"]["containers"][0]
        and "serviceAccountName" not in orphan.template["spec"]
    )
    assert by_name["rc-1"].owner == model.OwnerKey("shop", "ReplicationController", "rc")
    (web,) = [o for o in got.owners if o.key.name == "web"]
    assert web.replicas == ((T0, 2), (T0 + 60, 5), (T0 + 300, 0)) and web.created is None


def test_a_cluster_without_nodeclaims_is_written_for_the_cluster_autoscaler_model() -> None:
    clock = Clock()
    rec = recorder.Recorder(clock)
    rec.observe(WatchEvent("ADDED", "Node", _node("a", group="general")))
    rec.observe(WatchEvent("ADDED", "Node", _node("b", group="general")))
    rec.begin()
    clock.now = T0 + 600
    rec.observe(WatchEvent("ADDED", "Node", _node("c", group="general", ready=False)))
    clock.now = T0 + 660
    rec.observe(WatchEvent("MODIFIED", "Node", _node("c", group="general")))
    rec.observe(WatchEvent("ADDED", "Node", _node("s", spot=True)))
    clock.now = T0 + 1800
    rec.observe(WatchEvent("DELETED", "Node", _node("c", group="general")))
    rec.observe(WatchEvent("ADDED", "Pod", _pod("p")))
    clock.now = T0 + 3600
    doc = writer.trace(rec.finish(), name="ca", catalog="aws:us-east-1")
    assert doc["recorded"]["autoscaler"] == "cluster-autoscaler"
    groups = doc["baseline"]["clusterAutoscaler"]["nodeGroups"]
    assert groups == [
        {
            "name": "general",
            "instanceTypes": ["m5.large"],
            "capacityType": "on-demand",
            "zones": ["us-east-1a"],
            "min": 2,
            "max": 1000,
            "labels": {"team": "payments"},
        },
        {
            "name": "recorded-m5.large-spot",
            "instanceTypes": ["m5.large"],
            "capacityType": "spot",
            "zones": ["us-east-1a"],
            "min": 0,
            "max": 1000,
            "labels": {"team": "payments"},
        },
    ]
    nodes = {n["name"]: n for n in doc["recorded"]["nodes"]}
    assert nodes["c"]["launched"] == "2026-03-02T10:10:00Z" and nodes["c"]["ready"] == "2026-03-02T10:11:00Z"
    assert doc["recorded"]["figures"]["peakNodes"] == 4
    hours = doc["recorded"]["figures"]["nodeHours"]
    assert hours == pytest.approx(2 + 20 / 60 + 49 / 60, abs=1e-4)  # a, b; c 10:10-10:30; s from 10:11
    assert doc["cloud"]["launchLatency"] == {"distribution": "fixed", "p50": "30s"}  # c 60 s, s 0 s
    sc = scenario_mod.parse(doc, file="ca.yaml")
    assert sc.baseline is not None and [g.name for g in sc.baseline.node_groups] == [
        "general",
        "recorded-m5.large-spot",
    ]


def test_jobs_are_runs_of_their_cronjob_with_the_median_time_their_pods_ran() -> None:
    clock = Clock()
    rec = recorder.Recorder(clock)
    rec.begin()
    job = {
        "kind": "Job",
        "metadata": {
            "name": "nightly-1",
            "namespace": "shop",
            "ownerReferences": [{"kind": "CronJob", "name": "nightly", "controller": True}],
        },
        "spec": {"completions": 3, "parallelism": 3, "template": {"spec": {"containers": [{"name": "j"}]}}},
    }
    clock.now = T0 + 60
    rec.observe(WatchEvent("ADDED", "Job", job))
    for i, ran in enumerate((100, 200, 900)):
        pod = _pod(f"nightly-1-{i}", owner=("Job", "nightly-1"))
        rec.observe(WatchEvent("ADDED", "Pod", pod))
        clock.now = T0 + 70
        rec.observe(WatchEvent("MODIFIED", "Pod", {**pod, "status": {"phase": "Running"}}))
        clock.now = T0 + 70 + ran
        rec.observe(WatchEvent("MODIFIED", "Pod", {**pod, "status": {"phase": "Succeeded"}}))
        clock.now = T0 + 60
    clock.now = T0 + 3600
    doc = writer.trace(rec.finish(), name="jobs", catalog="aws:us-east-1")
    (entry,) = doc["workloads"]
    assert entry["job"]["metadata"] == {"name": "nightly", "namespace": "shop"}
    assert entry["job"]["spec"]["completions"] == 3
    assert entry["runs"] == [{"at": "2026-03-02T10:01:00Z", "runFor": "3m20s", "name": "nightly-1"}]


def test_anonymize_hashes_names_consistently_and_keeps_labels() -> None:
    hasher = anonymize.Hasher(b"key")
    assert hasher("web") == hasher("web") != hasher("api")
    assert hasher("runner-").endswith("-") and hasher.namespace("kube-system") == "kube-system"
    assert anonymize.Hasher(b"other")("web") != hasher("web")
    pod = _pod("web-1", owner=("ReplicaSet", "web-h"))
    pod["metadata"]["labels"]["job-name"] = "web"
    pod["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{...web...}",
        "karpenter.sh/do-not-disrupt": "true",
    }
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "namespaces": ["shop", "default"]}
            ]
        }
    }
    (out,) = anonymize.objects([pod], hasher)
    meta = out["metadata"]
    assert (meta["name"], meta["namespace"]) == (hasher("web-1"), hasher("shop"))
    assert meta["ownerReferences"][0]["name"] == hasher("web-h")
    assert meta["labels"] == {"app": "x", "job-name": hasher("web")}
    assert meta["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    container = out["spec"]["containers"][0]
    assert container == {
        "name": hasher("c"),
        "image": hasher("img:1"),
        "resources": {"requests": {"cpu": "1"}},
    }
    terms = out["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["namespaces"] == [hasher("shop"), "default"]
    assert "web" not in repr({**out, "metadata": {**meta, "uid": ""}})
