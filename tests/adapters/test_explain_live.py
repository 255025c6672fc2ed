"""``karpy explain pod|node --kubeconfig`` against the Kubernetes emulator over real HTTP.

Checked: the live answer (pod or node) is the answer for the same objects in files, with the pod's Events
(kube-scheduler's and karpy's, oldest first) added; a cluster without Karpenter's CRDs still
explains its pods (no NodePool to try); a pod that is not there and an unreachable server exit 2
with one line naming where karpy looked.
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
from karpy.adapters.kube.client import RESOURCES, KubeClient

runner = CliRunner()
KARPENTER = ("NodePool", "NodeClaim", "EC2NodeClass", "KWOKNodeClass")


pytestmark = pytest.mark.usefixtures("restore_logging")


def _run(*args: str) -> Result:
    return runner.invoke(cli.app, list(args))


def _explain(pod: str, config: Path, *more: str) -> Result:
    """``karpy explain pod POD`` on the emulator behind ``config`` (context ``emu``)."""
    return _run("explain", "pod", pod, "--kubeconfig", str(config), "--context", "emu", *more)


def _event(name: str, reason: str, note: str, when: str, *, pod: str = "web-1") -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": when,
        "reportingController": "karpy" if reason != "FailedScheduling" else "default-scheduler",
        "reportingInstance": "test",
        "action": reason,
        "reason": reason,
        "note": note,
        "type": "Normal" if reason == "Nominated" else "Warning",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": "default"},
    }


def _objects() -> list[dict[str, Any]]:
    return [NODE_CLASS, node_pool(), pending_pod("web-1", cpu="2")]


def test_live_answer_equals_the_files_answer_and_adds_the_pods_events(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path
) -> None:
    for obj in _objects():
        kubectl.create(obj)
    kubectl.create(
        _event(
            "web-1.b",
            "Nominated",
            "Pod should schedule on: nodeclaim/default-x",
            "2026-03-02T09:00:05.000000Z",
        )
    )
    kubectl.create(
        _event("web-1.a", "FailedScheduling", "0/0 nodes are available", "2026-03-02T09:00:01.000000Z")
    )
    kubectl.create(
        _event("other.a", "FailedScheduling", "not about web-1", "2026-03-02T09:00:02.000000Z", pod="web-2")
    )
    config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
    live = _explain("default/web-1", config, "--catalog", CATALOG, "-o", "json")
    assert live.exit_code == 0, live.stderr
    doc = json.loads(live.stdout)
    assert doc["kind"] == "PodExplanation" and doc["status"] == "new-nodeclaim"
    assert [(e["reason"], e["controller"]) for e in doc["events"]] == [
        ("FailedScheduling", "default-scheduler"),
        ("Nominated", "karpy"),
    ]

    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "all.yaml").write_text(yaml.safe_dump_all(_objects()))
    files = _run(
        "explain", "pod", "default/web-1", "-f", str(tmp_path / "files"), "--catalog", CATALOG, "-o", "json"
    )
    assert files.exit_code == 0, files.stderr
    from_files = json.loads(files.stdout)
    assert from_files["events"] == []
    assert {k: v for k, v in doc.items() if k != "events"} == {
        k: v for k, v in from_files.items() if k != "events"
    }

    table = _explain("default/web-1", config, "--catalog", CATALOG)
    assert table.exit_code == 0, table.stderr
    assert "Events (the newest 2, oldest first):" in table.stdout
    assert "Nominated (karpy): Pod should schedule on: nodeclaim/default-x" in table.stdout


def test_a_cluster_without_karpenter_crds_still_explains_its_pods(tmp_path: Path) -> None:
    emu = EmulatorThread(kinds=tuple(kind for kind in RESOURCES if kind not in KARPENTER))
    kubectl = KubeClient(host=emu.url, identity="kubectl", timeout=5.0).start()
    try:
        kubectl.create(pending_pod("web-1"))
        config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
        result = _explain("web-1", config, "--catalog", CATALOG, "-o", "json")
    finally:
        kubectl.close()
        emu.stop()
    assert result.exit_code == 0, result.stderr
    assert [line.split(":")[1].strip() for line in result.stderr.splitlines()] == list(KARPENTER)
    doc = json.loads(result.stdout)
    assert doc["status"] == "unschedulable"
    assert doc["reason"] == "no-nodepool"
    assert doc["nodePools"] == []


def test_a_pod_not_there_exits_2_naming_the_server(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path
) -> None:
    kubectl.create(pending_pod("web-1"))
    config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
    result = _explain("default/web-9", config, "--catalog", CATALOG)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line == f"error: pod default/web-9 not found in {emu.url}; pods there: default/web-1"


def test_an_unreachable_server_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    config = kubeconfig_file(tmp_path / "kubeconfig", server)
    result = _explain("default/web-1", config)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: cannot reach the API server {server}")
    assert "Traceback" not in result.output


def test_a_node_is_explained_live_as_from_files(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path
) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "plain", "labels": {"kubernetes.io/os": "linux"}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    for obj in [NODE_CLASS, node_pool(), node]:
        kubectl.create(obj)
    config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
    now = "2026-03-02T12:00:00Z"
    live = _run(
        "explain",
        "node",
        "plain",
        "--kubeconfig",
        str(config),
        "--context",
        "emu",
        "--catalog",
        CATALOG,
        "--now",
        now,
        "-o",
        "json",
    )
    assert live.exit_code == 0, live.stderr
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "all.yaml").write_text(yaml.safe_dump_all([NODE_CLASS, node_pool(), node]))
    files = _run(
        "explain",
        "node",
        "plain",
        "-f",
        str(tmp_path / "files"),
        "--catalog",
        CATALOG,
        "--now",
        now,
        "-o",
        "json",
    )
    assert files.exit_code == 0, files.stderr
    doc = json.loads(live.stdout)
    assert doc["kind"] == "NodeExplanation"
    assert doc == json.loads(files.stdout)
    assert doc["methods"][0]["method"] == "expiration"
