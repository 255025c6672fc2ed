"""The fault suite's helpers: ``karpy operator`` as a real subprocess, and what the tests apply.

:class:`OperatorProcess` runs ``python -m karpy operator --provider kwok`` with a kubeconfig
pointing at the emulator (or at a :class:`proxy.FaultProxy` in front of it), its own health and
metrics ports and ``POD_NAME`` as its identity, so a test can send it real signals (SIGTERM,
SIGKILL), read ``/healthz`` ``/readyz`` and its JSON log lines. :func:`launched_claims` makes
NodeClaims as the provisioner does (a lifecycle pass then launches them all);
:func:`spread_pods` makes pods that each need a NodeClaim of their own (hostname
anti-affinity); :func:`nominations` reads the ``Nominated`` events an operator posted.
Used by tests/adapters/test_faults_lifecycle.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from operator_harness import CATALOG

from karpy.adapters.kube.client import KubeClient

LEASE = ("karpy-system", "karpy-leader-election")


def poll(check: Callable[[], Any], *, timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    """``check()``'s first truthy value, tried every ``interval`` s (AssertionError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: emu\n"
        f"clusters: [{{name: emu, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: emu, user: {token: test}}]\n"
        "contexts: [{name: emu, context: {cluster: emu, user: emu}}]\n"
    )
    return path


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status of a GET (None when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


class OperatorProcess:
    """One ``karpy operator`` subprocess (kwok provider); :meth:`close` kills what is left."""

    def __init__(
        self,
        server: str,
        workdir: Path,
        *,
        identity: str = "karpy-0",
        leader_elect: bool = False,
        lease: tuple[float, float, float] = (4.0, 3.0, 0.5),  # duration, renew deadline, retry period
        liveness_timeout: float | None = None,
        log_level: str = "info",
    ) -> None:
        self.identity = identity
        self.health_port = free_port()
        self.metrics_port = free_port()
        self.log_path = workdir / f"{identity}-{time.monotonic_ns()}.log"
        kubeconfig = write_kubeconfig(workdir / f"kubeconfig-{identity}", server)
        args = [
            sys.executable,
            "-m",
            "karpy",
            "operator",
            "--provider",
            "kwok",
            "--catalog",
            CATALOG,
            "--kubeconfig",
            str(kubeconfig),
            "--health-port",
            str(self.health_port),
            "--metrics-port",
            str(self.metrics_port),
            "--log-level",
            log_level,
            "--leader-elect" if leader_elect else "--no-leader-elect",
            "--leader-elect-lease-duration",
            str(lease[0]),
            "--leader-elect-renew-deadline",
            str(lease[1]),
            "--leader-elect-retry-period",
            str(lease[2]),
        ]
        if liveness_timeout is not None:
            args += ["--liveness-timeout", str(liveness_timeout)]
        env = {**os.environ, "POD_NAME": identity, "POD_NAMESPACE": LEASE[0]}
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    # -- probes --------------------------------------------------------------------------------
    def healthz(self) -> int | None:
        return http_status(f"http://127.0.0.1:{self.health_port}/healthz")

    def readyz(self) -> int | None:
        return http_status(f"http://127.0.0.1:{self.health_port}/readyz")

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.identity} exited ({self.proc.returncode}):\n{self.output()}")
            return self.readyz() == 200

        poll(ready, timeout=timeout, interval=0.1, what=f"{self.identity} /readyz")

    # -- signals -------------------------------------------------------------------------------
    def terminate(self, timeout: float = 15.0) -> float:
        """SIGTERM; the seconds until the process exited (raises if it did not within ``timeout``)."""
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.identity} still running {timeout} s after SIGTERM") from None
        return time.monotonic() - sent

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self._log.close()

    # -- output --------------------------------------------------------------------------------
    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines so far."""
        out = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out


def launched_claims(count: int, *, pool: str = "default", prefix: str = "bulk") -> list[dict[str, Any]]:
    """``count`` NodeClaims as the provisioner creates them (karpy's, with the termination
    finalizer), not launched yet: the operator's lifecycle launches every one."""
    return [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": f"{prefix}-{i:04d}",
                "labels": {"karpenter.sh/nodepool": pool},
                "annotations": {"karpy.sh/managed-by": "karpy", "karpy.sh/creation-reason": "provisioned"},
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["small-instance-type"],
                    },
                ],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "pods": "1"}},
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            },
        }
        for i in range(count)
    ]


def spread_pods(count: int, *, app: str = "spread", first: int = 0) -> list[dict[str, Any]]:
    """Pending pods ``<app>-<first>`` ... that repel each other (and every pod of ``app``) per
    hostname: each needs a NodeClaim of its own."""
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{app}-{i:03d}", "namespace": "default", "labels": {"app": app}},
            "spec": {
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
                ],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            },
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            },
        }
        for i in range(first, first + count)
    ]


def calls(emu: Any, identity: str) -> int:
    """The API requests ``identity`` made to the emulator so far, watches and the Lease aside:
    its controllers' calls (progress of a pass, whatever the calls are)."""
    count = 0
    for request in emu.requests():
        if str(request.headers.get("User-Agent", "")) != f"karpy/{identity}":
            continue
        if request.url.query.get("watch") == "true" or "/leases" in str(request.url.path):
            continue
        count += 1
    return count


def lease_spec(kube: KubeClient) -> dict[str, Any]:
    spec: dict[str, Any] = kube.get("Lease", LEASE[1], LEASE[0]).get("spec") or {}
    return spec


def nominations(kube: KubeClient, instance: str) -> dict[str, set[str]]:
    """Pod name -> the targets (``nodeclaim/X``, ``node/Y``) ``instance`` nominated it to."""
    out: dict[str, set[str]] = {}
    for event in kube.list("Event"):
        if event.get("reason") != "Nominated" or event.get("reportingInstance") != instance:
            continue
        note = str(event.get("note") or "")
        out.setdefault(event["regarding"]["name"], set()).add(note.rpartition(" ")[2])
    return out
