"""Running karpy operators against the emulator in threads, and the objects the tests apply."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emulator import EmulatorThread

from karpy import operator as operator_mod
from karpy.adapters.kube.client import KubeClient

CATALOG = str(Path(__file__).parents[1] / "conformance/catalogs/karpenter-fake.yaml")

NODE_CLASS = {
    "apiVersion": "karpenter.kwok.sh/v1alpha1",
    "kind": "KWOKNodeClass",
    "metadata": {"name": "default"},
}


def node_pool(name: str = "default", *, operator: str = "In") -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": operator, "values": ["on-demand"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
        },
    }


def pending_pod(name: str = "web-1", *, app: str = "web", cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
            ]
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def wait_for(check: Callable[[], Any], timeout: float = 8.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class RunningOperator:
    def __init__(self, emu: EmulatorThread, *, identity: str = "karpy-0", **overrides: Any) -> None:
        factory = overrides.pop("elector_factory", None)
        config = operator_mod.OperatorConfig(
            host=emu.url,
            catalog=CATALOG,
            metrics_port=0,
            health_port=0,
            bind_address="127.0.0.1",
            identity=identity,
            **overrides,
        )
        self.op = operator_mod.Operator(config, elector_factory=factory)
        self.op.start()
        self.thread = threading.Thread(target=self.op.run, name=f"operator-{identity}", daemon=True)
        self.thread.start()

    def stop(self) -> float:
        started = time.monotonic()
        self.op.stop()
        self.thread.join(10)
        return time.monotonic() - started


def writers(emu: EmulatorThread) -> set[str]:
    """User agents of the write requests (Leases and Events aside): who acted on the cluster."""
    out = set()
    for request in emu.requests():
        if request.method.value not in ("POST", "PUT", "PATCH", "DELETE"):
            continue
        path = str(request.url.path)
        if "/leases" in path or "/events" in path:
            continue
        agent = str(request.headers.get("User-Agent", ""))
        if agent.startswith("karpy/") and agent != "karpy/kubectl":
            out.add(agent.removeprefix("karpy/"))
    return out


def names(kube: KubeClient, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in kube.list(kind))


def http_get(url: str) -> tuple[int, str]:
    """A GET's status and body (an HTTP error's too)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def kubeconfig_file(path: Path, server: str, *, context: str = "emu") -> Path:
    """A kubeconfig whose context ``context`` points at ``server`` (the current context is another,
    unreachable one: a command must pass ``--context``)."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: other\n"
        f"clusters: [{{name: emu, cluster: {{server: '{server}'}}}},"
        " {name: other, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: emu, user: {token: test}}]\n"
        f"contexts: [{{name: {context}, context: {{cluster: emu, user: emu}}}},"
        " {name: other, context: {cluster: other, user: emu}}]\n"
    )
    return path
