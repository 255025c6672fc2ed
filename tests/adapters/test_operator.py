"""The operator end to end against kmock's emulator over real HTTP."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from emulator import EmulatorThread
from operator_harness import (
    CATALOG,
    NODE_CLASS,
    RunningOperator,
    http_get,
    node_pool,
    pending_pod,
    wait_for,
    writers,
)
from operator_harness import names as names_of

from karpy import cli
from karpy import operator as operator_mod
from karpy.adapters.kube import leader
from karpy.adapters.kube.client import RESOURCES, KubeClient
from karpy.controllers import termination
from karpy.state.feed import KINDS


@pytest.fixture
def running(emu: EmulatorThread, kubectl: KubeClient) -> Any:
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    ops: list[RunningOperator] = []

    def start(**kwargs: Any) -> RunningOperator:
        ops.append(RunningOperator(emu, **kwargs))
        return ops[-1]

    yield start
    for op in ops:
        op.stop()


def test_pending_pod_claim_node_bind_then_delete_claim_drains_through_the_pdb(
    emu: EmulatorThread, kubectl: KubeClient, running: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real-time polls shortened so the story fits in seconds (the controller is unchanged).
    monkeypatch.setattr(termination, "INSTANCE_POLL", 0.3)
    monkeypatch.setattr(termination, "BACKOFF_MIN", 0.2)
    monkeypatch.setattr(termination, "BACKOFF_MAX", 0.5)
    op = running().op
    wait_for(op.ready, what="caches synced")
    assert http_get(f"http://127.0.0.1:{op.health_port}/readyz")[0] == 200
    assert http_get(f"http://127.0.0.1:{op.health_port}/healthz")[0] == 200
    kubectl.create(pending_pod())
    claim = wait_for(lambda: names_of(kubectl, "NodeClaim"), what="a NodeClaim")[0]
    node = wait_for(lambda: names_of(kubectl, "Node"), what="the kwok Node")[0]
    raw_node = kubectl.get("Node", node)
    assert raw_node["spec"]["providerID"] == f"kwok://{node}"
    assert raw_node["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    kubectl.bind("web-1", "default", node)
    kubectl.patch(
        "Pod",
        "web-1",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
        namespace="default",
    )
    kubectl.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    wait_for(
        lambda: "karpenter.sh/termination" in (kubectl.get("Node", node)["metadata"].get("finalizers") or []),
        what="the Node registered (finalizer)",
    )
    kubectl.delete("NodeClaim", claim)
    wait_for(lambda: ("default", "web-1", 429) in emu.emulator.evictions, what="a 429 eviction")
    assert names_of(kubectl, "Node") == [node]  # held by the PDB
    kubectl.patch("PodDisruptionBudget", "web", {"spec": {"maxUnavailable": 1}}, namespace="default")
    wait_for(lambda: ("default", "web-1", 201) in emu.emulator.evictions, what="the eviction allowed")
    wait_for(lambda: not names_of(kubectl, "Node"), what="the Node removed")
    wait_for(lambda: not names_of(kubectl, "NodeClaim"), what="the NodeClaim removed")
    status, body = http_get(f"http://127.0.0.1:{op.metrics_port}/metrics")
    assert status == 200 and "karpy_nodeclaims_created_total" in body


def test_an_invalid_nodepool_gets_an_event_and_a_condition_while_a_valid_one_provisions(
    emu: EmulatorThread, kubectl: KubeClient, running: Any
) -> None:
    kubectl.create(node_pool("broken", operator="Sometimes"))
    op = running().op
    wait_for(op.ready, what="caches synced")
    kubectl.create(pending_pod())
    wait_for(lambda: names_of(kubectl, "NodeClaim"), what="a NodeClaim from the valid pool")
    claims = kubectl.list("NodeClaim")
    assert {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in claims} == {"default"}

    def warning() -> list[dict[str, Any]]:
        return [
            e
            for e in kubectl.list("Event")
            if e["regarding"]["name"] == "broken" and e["reason"] == "FailedValidation"
        ]

    event = wait_for(warning, what="a FailedValidation event")[0]
    assert event["type"] == "Warning" and event["regarding"]["kind"] == "NodePool"
    conditions = wait_for(lambda: (kubectl.get("NodePool", "broken").get("status") or {}).get("conditions"))
    assert [(c["type"], c["status"]) for c in conditions] == [
        ("Ready", "False"),
        ("ValidationSucceeded", "False"),
    ]
    assert next(c for c in conditions if c["type"] == "ValidationSucceeded")["reason"] == "FailedValidation"


def test_refuses_to_start_beside_foreign_nodeclaims_or_a_karpenter_deployment(
    emu: EmulatorThread, kubectl: KubeClient
) -> None:
    kubectl.create({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "theirs"}})
    with pytest.raises(operator_mod.Refused, match="another controller manages NodeClaims"):
        RunningOperator(emu)
    kubectl.patch("NodeClaim", "theirs", {"metadata": {"annotations": {"karpy.sh/managed-by": "karpy"}}})
    kubectl.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "karpenter", "namespace": "kube-system"},
        }
    )
    with pytest.raises(operator_mod.Refused, match="Karpenter Deployment"):
        RunningOperator(emu)


GHOST = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"name": "karpy-leader-election", "namespace": "karpy-system"},
    "spec": {
        "holderIdentity": "ghost",
        "leaseDurationSeconds": 15,
        "renewTime": (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    },
}


def _electors(ignore_409: bool) -> Any:
    """Electors whose first rounds are lock-stepped: both read the expired Lease, then both write."""
    barrier = threading.Barrier(2)

    class LockStep(leader.LeaderElector):
        first = True

        async def act(self) -> bool:
            if self.first:
                self.first = False
                await asyncio.get_running_loop().run_in_executor(None, barrier.wait, 5)
            return await super().act()

        def on_conflict(self) -> None:
            if ignore_409:
                self._set(True)  # the bug: a lost race treated as a won one
            else:
                super().on_conflict()

    return LockStep


def _two_operators(emu: EmulatorThread, kubectl: KubeClient, running: Any, *, ignore_409: bool) -> list[Any]:
    kubectl.create(GHOST)
    factory = _electors(ignore_409)
    lease = {"leader_elect": True, "lease_duration": 30.0, "renew_deadline": 25.0, "retry_period": 30.0}
    starts = [
        threading.Thread(target=lambda i=i: running(identity=f"karpy-{i}", elector_factory=factory, **lease))
        for i in (0, 1)
    ]
    for thread in starts:
        thread.start()
    for thread in starts:
        thread.join(10)
    return []


def test_two_operators_share_one_lease_and_only_the_leader_writes(
    emu: EmulatorThread, kubectl: KubeClient, running: Any
) -> None:
    _two_operators(emu, kubectl, running, ignore_409=False)
    holder = wait_for(
        lambda: (
            kubectl.get("Lease", "karpy-leader-election", "karpy-system")["spec"]["holderIdentity"]
            not in ("ghost", None)
            and kubectl.get("Lease", "karpy-leader-election", "karpy-system")["spec"]["holderIdentity"]
        )
    )
    kubectl.create(pending_pod())
    wait_for(lambda: names_of(kubectl, "Node"), what="a Node")
    assert writers(emu) == {holder}
    assert len(names_of(kubectl, "NodeClaim")) == 1


def test_the_single_writer_check_fails_against_a_client_that_ignores_409(
    emu: EmulatorThread, kubectl: KubeClient, running: Any
) -> None:
    _two_operators(emu, kubectl, running, ignore_409=True)
    kubectl.create(pending_pod())
    wait_for(lambda: len(writers(emu)) == 2, what="both replicas writing")
    assert len(writers(emu)) != 1  # the assertion of the previous test would fail


def test_sigterm_stops_the_operator_within_5_seconds(
    emu: EmulatorThread, kubectl: KubeClient, running: Any
) -> None:
    op = running()
    wait_for(op.op.ready, what="caches synced")
    assert op.stop() < 5.0
    assert not op.thread.is_alive()


def test_the_cas_extension_is_what_makes_the_lost_race_visible(kubectl: KubeClient) -> None:
    """Without compare-and-swap both PUTs of the lock-stepped race succeed: two leaders."""
    emu = EmulatorThread(cas=False)
    client = KubeClient(host=emu.url, identity="kubectl", timeout=5.0).start()
    ops: list[RunningOperator] = []
    try:
        client.create(NODE_CLASS)
        client.create(node_pool())
        client.create(GHOST)
        factory = _electors(ignore_409=False)
        lease = {"leader_elect": True, "lease_duration": 30.0, "renew_deadline": 25.0, "retry_period": 30.0}
        threads = [
            threading.Thread(
                target=lambda i=i: ops.append(
                    RunningOperator(emu, identity=f"karpy-{i}", elector_factory=factory, **lease)
                )
            )
            for i in (0, 1)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        wait_for(lambda: len(ops) == 2 and all(o.op.elector and o.op.elector.observed for o in ops))
        wait_for(lambda: sum(o.op.is_leader() for o in ops) == 2, what="two leaders without CAS")
    finally:
        for op in ops:
            op.stop()
        client.close()
        emu.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_sigterm_to_the_cli_command_stops_it_within_5_seconds(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real SIGTERM to this process while ``karpy operator`` runs on the main thread."""
    kubectl.create(NODE_CLASS)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: emu\n"
        f"clusters: [{{name: emu, cluster: {{server: '{emu.url}'}}}}]\n"
        "users: [{name: emu, user: {token: test}}]\n"
        "contexts: [{name: emu, context: {cluster: emu, user: emu}}]\n"
    )
    health = _free_port()
    sent: list[float] = []

    def terminate_when_ready() -> None:
        wait_for(lambda: _ready(health), timeout=8, what="/readyz")
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    killer = threading.Thread(target=terminate_when_ready, daemon=True)
    killer.start()
    try:
        args = ["operator", "--provider", "kwok", "--catalog", str(CATALOG), "--kubeconfig", str(kubeconfig)]
        args += ["--metrics-port", str(_free_port()), "--health-port", str(health), "--log-level", "info"]
        typer.main.get_command(cli.app).main(args, prog_name="karpy", standalone_mode=False)
        stopped = time.monotonic()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        root.handlers[:], level = saved
        root.setLevel(level)
    killer.join(1)
    assert sent and stopped - sent[0] < 5.0
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    assert any(line["msg"].endswith("stopped") for line in lines)


def _ready(port: int) -> bool:
    try:
        return http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200
    except OSError:
        return False


def _cache_gauge(op: operator_mod.Operator) -> dict[str, float]:
    return {kind: op.metrics.value("karpy_cache_synced", {"kind": kind}) for kind in sorted(KINDS)}


def test_over_the_extended_emulator_every_cache_syncs_and_readyz_says_ok(
    emu: EmulatorThread, kubectl: KubeClient, running: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27 changed nothing here: Namespace is served, so every cache syncs and nothing warns."""
    caplog.set_level(logging.INFO, logger="karpy")
    op = running().op
    wait_for(lambda: http_get(f"http://127.0.0.1:{op.health_port}/readyz") == (200, "ok"), what="readyz ok")
    assert _cache_gauge(op) == {kind: 1.0 for kind in KINDS}
    kubectl.create(pending_pod())
    wait_for(lambda: names_of(kubectl, "NodeClaim"), what="a NodeClaim")
    assert not [
        r.getMessage() for r in caplog.records if r.name == "karpy.kube.watch" and r.levelno >= logging.INFO
    ]


def test_a_required_kind_not_served_holds_readyz_an_optional_one_does_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """KWOKNodeClass (required for kwok) and EC2NodeClass (optional) answer 404 until declared."""
    caplog.set_level(logging.INFO, logger="karpy")
    served = tuple(k for k in RESOURCES if k not in ("KWOKNodeClass", "EC2NodeClass"))
    emu = EmulatorThread(kinds=served)
    ops: list[RunningOperator] = []
    try:
        ops.append(RunningOperator(emu))
        op = ops[0].op
        readyz = f"http://127.0.0.1:{op.health_port}/readyz"
        waiting = (503, "waiting for caches: KWOKNodeClass; not served (HTTP 404): KWOKNodeClass")
        wait_for(lambda: http_get(readyz) == waiting, what="readyz naming the required kind not served")
        assert not op.ready()
        assert op.metrics.value("karpy_cache_synced", {"kind": "KWOKNodeClass"}) == 0.0
        assert op.metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 1.0
        emu.run(lambda: emu.emulator.declare("KWOKNodeClass"))  # the CRD is installed
        wait_for(lambda: http_get(readyz) == (200, "ok; not synced (optional): EC2NodeClass"), what="ready")
        assert op.metrics.value("karpy_cache_synced", {"kind": "KWOKNodeClass"}) == 1.0
    finally:
        for running_op in ops:
            running_op.stop()
        emu.stop()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    noted = [m for level, m in lines if "watch EC2NodeClass" in m and "not served" in m]
    assert len(noted) == 1 and ("INFO", noted[0]) in lines  # once, at info: optional
    required = [
        m for level, m in lines if level == "WARNING" and m.startswith("required cache KWOKNodeClass")
    ]
    assert len(required) == 1 and "/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses" in required[0]
