"""``karpy snapshot`` against the Kubernetes emulator over real HTTP, and ``karpy plan`` on its folder.

The emulator serves karpy's resources; the command runs through typer with a kubeconfig that
points at it. Checked: one file per kind with the objects as served (``managedFields`` gone),
a folder ``karpy plan -f`` plans the same as the objects written by hand (a Deployment, its
ReplicaSet and their pod counted once), a kind not served skipped with one stderr line, an
unreachable server exiting 2 with one line naming it, and no Secret ever requested.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from emulator import EmulatorThread
from operator_harness import CATALOG, NODE_CLASS, kubeconfig_file, node_pool, pending_pod
from typer.testing import CliRunner, Result

from karpy import cli
from karpy.adapters.kube import snapshot as snapshot_mod
from karpy.adapters.kube.client import RESOURCES, KubeClient

runner = CliRunner()
KARPENTER = ("NodePool", "NodeClaim", "EC2NodeClass", "KWOKNodeClass")
MANAGED = [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1"}]


pytestmark = pytest.mark.usefixtures("restore_logging")


def _run(*args: str) -> Result:
    return runner.invoke(cli.app, list(args))


def _node(name: str = "existing") -> dict[str, Any]:
    capacity = {"cpu": "1", "memory": "2Gi", "pods": "10"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/os": "linux"}},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _running_pod() -> dict[str, Any]:
    pod = pending_pod("busy", app="busy")
    pod["metadata"]["managedFields"] = MANAGED
    pod["spec"]["nodeName"] = "existing"
    pod["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return pod


def _workload(kind: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    template = pending_pod("t", app="api")
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "api"}},
            "template": {"metadata": {"labels": labels}, "spec": template["spec"]},
        },
    }


def _daemonset() -> dict[str, Any]:
    ds = _workload("DaemonSet", "logs", {"app": "logs"})
    del ds["spec"]["replicas"]
    ds["spec"]["selector"] = {"matchLabels": {"app": "logs"}}
    ds["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "100m"}
    return ds


def _api_pod() -> dict[str, Any]:
    """The pending pod of Deployment ``api`` (through its ReplicaSet ``api-7d9f8``)."""
    pod = pending_pod("api-7d9f8-x2b4q", app="api")
    pod["metadata"]["labels"]["pod-template-hash"] = "7d9f8"
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "api-7d9f8",
            "uid": "rs-1",
            "controller": True,
        }
    ]
    return pod


def _objects() -> list[dict[str, Any]]:
    pool = node_pool()
    pool["metadata"]["managedFields"] = MANAGED
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "gp3"},
        "provisioner": "ebs.csi.aws.com",
    }
    return [
        NODE_CLASS,
        pool,
        _node(),
        _running_pod(),
        *(pending_pod(f"web-{i}", cpu="2") for i in range(3)),
        _daemonset(),
        pdb,
        _workload("Deployment", "api", {"app": "api"}),
        _workload("ReplicaSet", "api-7d9f8", {"app": "api", "pod-template-hash": "7d9f8"}),
        _api_pod(),
        pvc,
        storage_class,
    ]


def _plan(folder: Path) -> dict[str, Any]:
    result = _run("plan", "-f", str(folder), "--catalog", CATALOG, "-o", "json")
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def test_snapshot_writes_one_file_per_kind_and_plan_reads_the_folder(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path
) -> None:
    for obj in _objects():
        kubectl.create(obj)
    assert kubectl.list("Pod")[0]["metadata"].get("managedFields") == MANAGED  # served with them
    out = tmp_path / "snap"
    config = kubeconfig_file(tmp_path / "kubeconfig", emu.url, context="target")
    result = _run("snapshot", "--kubeconfig", str(config), "--context", "target", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert emu.url in result.stdout

    expected = {snapshot_mod.file_name(kind) for kind in snapshot_mod.KINDS}
    assert {p.name for p in out.iterdir()} == expected
    assert "persistentvolumeclaims.yaml" in expected and "nodepools.yaml" in expected
    pods = _documents(out / "pods.yaml")
    assert sorted(p["metadata"]["name"] for p in pods) == [
        "api-7d9f8-x2b4q",
        "busy",
        "web-0",
        "web-1",
        "web-2",
    ]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in pods)
    busy = next(p for p in pods if p["metadata"]["name"] == "busy")
    assert busy["spec"]["nodeName"] == "existing"
    assert busy["metadata"]["resourceVersion"]  # as the server returned it
    for file in out.iterdir():
        for doc in _documents(file):
            assert "managedFields" not in doc["metadata"], file.name
    (pool,) = _documents(out / "nodepools.yaml")
    assert pool["spec"] == node_pool()["spec"]
    assert [d["metadata"]["name"] for d in _documents(out / "persistentvolumeclaims.yaml")] == ["data"]
    assert [d["metadata"]["name"] for d in _documents(out / "storageclasses.yaml")] == ["gp3"]
    assert [d["metadata"]["name"] for d in _documents(out / "replicasets.yaml")] == ["api-7d9f8"]
    assert _documents(out / "nodeclaims.yaml") == []

    by_hand = tmp_path / "by-hand"
    by_hand.mkdir()
    (by_hand / "all.yaml").write_text(yaml.safe_dump_all(_objects()))
    planned, expected_plan = _plan(out), _plan(by_hand)
    assert planned["summary"] == expected_plan["summary"]
    # 3 web pods of 2 CPUs and the api pod (once: not again from its Deployment and ReplicaSet)
    assert planned["summary"]["pendingPods"] == 4
    assert planned["summary"]["unschedulablePods"] == 0
    assert planned["summary"]["newNodeClaims"] >= 1
    launched = sorted(pod for claim in planned["nodeClaims"] for pod in claim["pods"])
    assert launched == ["default/api-7d9f8-x2b4q", "default/web-0", "default/web-1", "default/web-2"]

    disrupted = _run("disrupt", "-f", str(out), "--catalog", CATALOG)
    assert disrupted.exit_code == 0, disrupted.stderr


def test_no_secret_is_ever_requested_and_every_kind_is_listed(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path
) -> None:
    kubectl.create(pending_pod())
    config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
    result = _run("snapshot", "--kubeconfig", str(config), "--context", "emu", "-o", str(tmp_path / "s"))
    assert result.exit_code == 0, result.stderr
    paths = [request.url.path for request in emu.requests()]
    assert not [path for path in paths if "secret" in path.lower()]
    for kind in snapshot_mod.KINDS:
        if kind != "Namespace":  # the emulator answers namespaces before kmock logs the request
            assert RESOURCES[kind].path(None) in paths, kind
    with pytest.raises(Exception, match="Secrets"):
        snapshot_mod.read(kubectl, ("Pod", "Secret"))


def test_a_kind_not_served_is_skipped_with_one_line_and_the_rest_is_written(tmp_path: Path) -> None:
    emu = EmulatorThread(kinds=tuple(kind for kind in RESOURCES if kind not in KARPENTER))
    kubectl = KubeClient(host=emu.url, identity="kubectl", timeout=5.0).start()
    try:
        kubectl.create(_node())
        kubectl.create(pending_pod())
        out = tmp_path / "snap"
        config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
        result = _run("snapshot", "--kubeconfig", str(config), "--context", "emu", "-o", str(out))
    finally:
        kubectl.close()
        emu.stop()
    assert result.exit_code == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == len(KARPENTER)
    for kind, line in zip(KARPENTER, lines, strict=True):
        assert line.startswith(f"skipped: {kind}: not served"), line
    names = {p.name for p in out.iterdir()}
    assert not names & {snapshot_mod.file_name(kind) for kind in KARPENTER}
    assert {"pods.yaml", "nodes.yaml", "daemonsets.yaml"} <= names
    assert [p["metadata"]["name"] for p in _documents(out / "pods.yaml")] == ["web-1"]
    assert [n["metadata"]["name"] for n in _documents(out / "nodes.yaml")] == ["existing"]
    planned = _plan(out)  # no NodePool: the pod is pending and unschedulable, not an error
    assert planned["summary"]["pendingPods"] == 1
    assert planned["summary"]["newNodeClaims"] == 0


def test_an_unreachable_server_exits_2_with_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    config = kubeconfig_file(tmp_path / "kubeconfig", server)
    out = tmp_path / "snap"
    result = _run(
        "snapshot", "--kubeconfig", str(config), "--context", "emu", "-o", str(out), "--timeout", "2"
    )
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the API server {server}")
    assert "Traceback" not in result.output
    assert not out.exists()


def test_a_missing_kubeconfig_or_context_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = _run("snapshot", "--kubeconfig", str(tmp_path / "nope"), "-o", str(tmp_path / "s"))
    assert missing.exit_code == 2
    assert len(missing.stderr.splitlines()) == 1 and missing.stderr.startswith("error: cannot load")
    config = kubeconfig_file(tmp_path / "kubeconfig", "http://127.0.0.1:9")
    unknown = _run("snapshot", "--kubeconfig", str(config), "--context", "ghost", "-o", str(tmp_path / "s"))
    assert unknown.exit_code == 2
    (line,) = unknown.stderr.splitlines()
    assert "ghost" in line and line.startswith("error: cannot load")


def test_strip_drops_only_managed_fields() -> None:
    obj = {"kind": "Pod", "metadata": {"name": "a", "managedFields": MANAGED, "labels": {"x": "y"}}}
    assert snapshot_mod.strip(obj) == {"kind": "Pod", "metadata": {"name": "a", "labels": {"x": "y"}}}
    assert obj["metadata"]["managedFields"] == MANAGED  # the input is left as it was
