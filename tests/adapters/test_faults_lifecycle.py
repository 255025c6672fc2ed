"""The fault suite, lifecycle part: liveness, SIGTERM and SIGKILL, restarts, failover,
the controllers' logging during an outage, a create answered without a name.

The operators are real ``karpy operator`` subprocesses (:mod:`fault_harness`) against the
project's emulator over HTTP, through a :class:`proxy.FaultProxy` where the API server must be
slow or cut; the signals are real. Where a controller must misbehave (stuck, a nameless answer)
the operator runs in-process (:class:`operator_harness.RunningOperator`). Each test is bounded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from emulator import EmulatorThread
from fault_harness import (
    OperatorProcess,
    calls,
    http_status,
    launched_claims,
    lease_spec,
    nominations,
    poll,
    spread_pods,
)
from operator_harness import NODE_CLASS, RunningOperator, node_pool, pending_pod, wait_for, writers
from operator_harness import names as names_of
from proxy import FaultProxy

from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube import leader
from karpy.adapters.kube.client import KubeClient
from karpy.controllers import provisioning
from karpy.model import errors
from karpy.operator import guard
from karpy.operator.liveness import Heartbeat

LEASE = (4.0, 3.0, 0.5)  # duration, renew deadline, retry period (s) of the leader-elected operators


@pytest.fixture
def procs() -> Iterator[list[OperatorProcess]]:
    started: list[OperatorProcess] = []
    yield started
    for proc in started:
        proc.close()


@pytest.fixture
def pool(kubectl: KubeClient) -> None:
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())


def _holder(kubectl: KubeClient) -> str:
    try:
        return str(lease_spec(kubectl).get("holderIdentity") or "")
    except errors.NotFound:
        return ""


# -- liveness and SIGTERM during a long pass ----------------------------------------------------


def test_a_long_pass_on_a_slow_api_server_stays_live_and_sigterm_ends_it_within_5_seconds(
    emu: EmulatorThread, kubectl: KubeClient, pool: None, tmp_path: Path, procs: list[OperatorProcess]
) -> None:
    """500 NodeClaims to launch, every call 200 ms late: /healthz stays 200 for more than twice the
    liveness timeout while one lifecycle pass goes on, then SIGTERM exits within 5 s and the Lease
    is released (another replica takes it at once, not after the lease duration)."""
    for claim in launched_claims(500):
        kubectl.create(claim)
    proxy = FaultProxy(emu.url, latency=0.2)
    try:
        op = OperatorProcess(
            proxy.url, tmp_path, leader_elect=True, lease=(15.0, 10.0, 0.5), liveness_timeout=3.0
        )
        procs.append(op)
        op.wait_ready(timeout=40)
        listed = calls(emu, op.identity)  # the preflight and the caches' lists
        poll(lambda: calls(emu, op.identity) > listed + 20, timeout=30, what="the pass under way")
        began = calls(emu, op.identity)
        statuses = []
        until = time.monotonic() + 8.0
        while time.monotonic() < until:
            statuses.append(op.healthz())
            time.sleep(0.25)
        during = calls(emu, op.identity)
        launched = len(names_of(kubectl, "Node"))
        assert set(statuses) == {200}, statuses
        assert during > began + 20  # the pass went on all along (calls answered) ...
        assert launched < 500  # ... and is not over
        assert _holder(kubectl) == op.identity
        took = op.terminate()
        print(
            f"SIGTERM to exit during the pass: {took:.2f} s ({during} calls made, {launched} of 500 launched)"
        )
        assert took < 5.0, op.output()[-3000:]
        assert op.proc.returncode == 0, op.output()[-3000:]
    finally:
        proxy.stop()
    assert _holder(kubectl) == ""
    successor = leader.LeaderElector(kubectl, identity="successor", lease_duration=15.0)
    kubectl.edge.call(successor.observe(), 5.0)
    assert kubectl.edge.call(successor.act(), 5.0) is True  # taken at once


def test_healthz_turns_503_only_when_the_operator_thread_is_stuck(
    emu: EmulatorThread, kubectl: KubeClient, pool: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller blocked without making API calls: /healthz 503 after the liveness timeout
    (the body says why), 200 again once it moves on."""
    stuck, unstuck = threading.Event(), threading.Event()
    reconcile = provisioning.Provisioner.reconcile

    def blocking(self: provisioning.Provisioner) -> Any:
        if stuck.is_set():
            unstuck.wait(20)
        return reconcile(self)

    monkeypatch.setattr(provisioning.Provisioner, "reconcile", blocking)
    running = RunningOperator(emu, liveness_timeout=1.0)
    try:
        op = running.op
        wait_for(op.ready, what="caches synced")
        time.sleep(1.5)  # idle longer than the timeout: the idle loop turns count
        assert op.liveness() == (True, "ok")
        stuck.set()
        kubectl.create(pending_pod())  # wakes the provisioner, which blocks
        _, text = wait_for(lambda: (not op.liveness()[0]) and op.liveness(), timeout=5, what="503")
        assert "no progress" in text
        assert http_status(f"http://127.0.0.1:{op.health_port}/healthz") == 503
        unstuck.set()
        wait_for(lambda: op.liveness()[0], timeout=5, what="alive again")
        wait_for(lambda: names_of(kubectl, "NodeClaim"), what="the pod provisioned after all")
    finally:
        unstuck.set()
        running.stop()
    assert op.liveness() == (False, "the operator's loop has stopped")  # the thread is dead


def test_the_heartbeat_fails_on_silence_or_a_dead_thread_and_not_before() -> None:
    now = [100.0]
    beat = Heartbeat(60.0, clock=lambda: now[0])
    now[0] += 59.9
    assert beat.check() == (True, "ok")
    beat.beat()
    now[0] += 59.9
    assert beat.check()[0]
    now[0] += 0.2
    assert beat.check() == (False, "the operator's loop made no progress for 60 s")
    beat.beat()
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    beat.thread = thread
    assert beat.check() == (False, "the operator's loop has stopped")


# -- restarts -------------------------------------------------------------------------------------


def _claim_of(kubectl: KubeClient, target: str) -> str:
    """The NodeClaim a nomination target (``nodeclaim/X`` or ``node/Y``) stands for ('' for a Node
    of no claim)."""
    kind, _, name = target.partition("/")
    if kind == "nodeclaim":
        return name
    for claim in kubectl.list("NodeClaim"):
        if (claim.get("status") or {}).get("nodeName") == name:
            return str(claim["metadata"]["name"])
    return ""


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_a_restart_after_a_signal_at_the_first_nodeclaim_makes_no_duplicate_and_places_every_pod(
    emu: EmulatorThread,
    kubectl: KubeClient,
    pool: None,
    tmp_path: Path,
    procs: list[OperatorProcess],
    signal_name: str,
) -> None:
    """20 pods that each need a NodeClaim; the operator is signalled as soon as the first NodeClaim
    exists (its creates 150 ms apart), then started again: every pod is nominated by the new
    operator, to a NodeClaim of its own, and every NodeClaim serves one of them (none made twice)."""
    count = 20
    proxy = FaultProxy(emu.url, latency=0.15)
    try:
        first = OperatorProcess(proxy.url, tmp_path, identity="karpy-a")
        procs.append(first)
        first.wait_ready()
        for pod in spread_pods(count):
            kubectl.create(pod)
        poll(lambda: names_of(kubectl, "NodeClaim"), timeout=30, interval=0.01, what="the first NodeClaim")
        if signal_name == "SIGTERM":
            took = first.terminate()
            assert took < 5.0 and first.proc.returncode == 0, first.output()[-3000:]
        else:
            first.kill()
        before = len(names_of(kubectl, "NodeClaim"))
        second = OperatorProcess(proxy.url, tmp_path, identity="karpy-b")
        procs.append(second)
        second.wait_ready()
        placed = wait_for(
            lambda: len(nominations(kubectl, "karpy-b")) == count and nominations(kubectl, "karpy-b"),
            timeout=40,
            what="every pod nominated by the second operator",
        )
    finally:
        proxy.stop()
    claims = set(names_of(kubectl, "NodeClaim"))
    print(f"{signal_name}: {before} NodeClaims when stopped, {len(claims)} after the restart")
    assert before < count  # the signal did cut the first operator's pass short
    by_pod = {pod: {_claim_of(kubectl, t) for t in targets} for pod, targets in placed.items()}
    for pod, served in by_pod.items():
        assert len(served) == 1, (pod, placed[pod])  # one place per pod
    served_claims = [next(iter(s)) for s in by_pod.values() if next(iter(s))]
    assert len(served_claims) == len(set(served_claims))  # no two pods on one claim (anti-affinity)
    assert set(served_claims) == claims  # and no NodeClaim without its pod: none made twice


# -- leader election ------------------------------------------------------------------------------


def _two_leader_elected(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path, procs: list[OperatorProcess]
) -> tuple[OperatorProcess, OperatorProcess]:
    ops = {
        name: OperatorProcess(emu.url, tmp_path, identity=name, leader_elect=True, lease=LEASE)
        for name in ("karpy-a", "karpy-b")
    }
    procs.extend(ops.values())
    for op in ops.values():
        op.wait_ready()
    holder = wait_for(lambda: _holder(kubectl) in ops and _holder(kubectl), what="a leader")
    return ops[holder], next(op for name, op in ops.items() if name != holder)


def test_two_leader_elected_operators_one_writes_and_the_other_takes_over_after_sigkill(
    emu: EmulatorThread, kubectl: KubeClient, pool: None, tmp_path: Path, procs: list[OperatorProcess]
) -> None:
    leading, following = _two_leader_elected(emu, kubectl, tmp_path, procs)
    for pod in spread_pods(3):
        kubectl.create(pod)
    wait_for(lambda: len(names_of(kubectl, "NodeClaim")) == 3, timeout=20, what="3 NodeClaims")
    time.sleep(1.0)  # the follower had every chance to write too
    assert writers(emu) == {leading.identity}
    seen = len(emu.requests())
    leading.kill()
    killed = time.monotonic()
    wait_for(lambda: _holder(kubectl) == following.identity, timeout=LEASE[0] + 4, what="the takeover")
    took = time.monotonic() - killed
    print(f"takeover after SIGKILL of the leader: {took:.2f} s (lease {LEASE[0]} s)")
    assert took <= LEASE[0] + 1.5
    for pod in spread_pods(2, first=3):  # each needs a NodeClaim of its own
        kubectl.create(pod)
    wait_for(lambda: len(names_of(kubectl, "NodeClaim")) == 5, timeout=20, what="2 more NodeClaims")
    after = {
        str(r.headers.get("User-Agent", "")).removeprefix("karpy/")
        for r in emu.requests()[seen:]
        if r.method.value in ("POST", "PUT", "PATCH", "DELETE")
        and "/leases" not in str(r.url.path)
        and "/events" not in str(r.url.path)
    }
    assert after - {"kubectl"} == {following.identity}


def test_sigterm_of_the_leader_hands_the_lease_to_the_other_operator_at_once(
    emu: EmulatorThread, kubectl: KubeClient, pool: None, tmp_path: Path, procs: list[OperatorProcess]
) -> None:
    leading, following = _two_leader_elected(emu, kubectl, tmp_path, procs)
    took = leading.terminate()
    stopped = time.monotonic()
    assert took < 5.0 and leading.proc.returncode == 0, leading.output()[-3000:]
    wait_for(lambda: _holder(kubectl) == following.identity, timeout=LEASE[0] + 4, what="the handover")
    handover = time.monotonic() - stopped
    print(f"SIGTERM of the leader: exit {took:.2f} s, the other leads {handover:.2f} s later")
    assert handover < LEASE[0] - 1.0  # released: no waiting for the lease to expire


# -- an outage: one warning line per controller -------------------------------------------------


def test_an_outage_is_one_warning_line_per_controller_without_a_traceback(
    emu: EmulatorThread, kubectl: KubeClient, pool: None, tmp_path: Path, procs: list[OperatorProcess]
) -> None:
    """The API server cut for 6 s in the middle of a lifecycle pass: each controller that fails
    logs one warning (with its retry delay), its repeats at debug level, the recovery at info
    level; no line of the operator's controllers carries a traceback; the launches go on after."""
    for claim in launched_claims(15):
        kubectl.create(claim)
    proxy = FaultProxy(emu.url, latency=0.05)
    try:
        op = OperatorProcess(proxy.url, tmp_path, log_level="debug")
        procs.append(op)
        op.wait_ready()
        wait_for(lambda: names_of(kubectl, "Node"), timeout=20, what="the first launches")
        proxy.cut()
        time.sleep(6.0)
        proxy.restore()

        def controller_lines() -> list[dict[str, Any]]:
            return [
                line
                for line in op.lines()
                if line["logger"] == "karpy.operator" and line["msg"].startswith("controller ")
            ]

        def recovered() -> bool:
            lines = controller_lines()
            warned = {line["msg"].split(":")[0] for line in lines if line["level"] == "warning"}
            back = {line["msg"].split(" works again")[0] for line in lines if " works again" in line["msg"]}
            return bool(warned) and warned <= back

        poll(recovered, timeout=40, interval=0.2, what="every controller that warned working again")
        wait_for(lambda: len(names_of(kubectl, "Node")) == 15, timeout=30, what="every claim launched")
        assert op.terminate() < 5.0
    finally:
        proxy.stop()
    controller = controller_lines()
    warned = [line["msg"].split(":")[0] for line in controller if line["level"] == "warning"]
    assert "controller nodeclaim.lifecycle" in warned and len(warned) == len(set(warned)), warned
    assert all("; retrying in " in line["msg"] for line in controller if line["level"] == "warning")
    assert not [line for line in controller if "error" in line]  # no traceback
    repeats = [
        line["msg"] for line in controller if line["level"] == "debug" and "failed again" in line["msg"]
    ]
    assert any(msg.startswith("controller nodeclaim.lifecycle failed again") for msg in repeats), repeats


def _run(fn: Any, *, clock: Any = None) -> Any:
    return guard.guarded("demo", fn, clock=clock or time.monotonic)


def test_guarded_warns_once_per_outage_and_keeps_tracebacks_for_bugs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy.operator")
    now = [0.0]
    outcome: list[BaseException | None] = []

    def fn() -> float | None:
        exc = outcome.pop(0)
        if exc is not None:
            raise exc
        return 5.0

    run = _run(fn, clock=lambda: now[0])
    down = kerrors.Unavailable("GET /api/v1/nodes/n1: ClientConnectorError: cannot connect")
    outcome[:] = [down, kerrors.Unavailable("PATCH /api/v1/nodes/n2: timeout"), TimeoutError("slow")]
    assert [run(), run(), run()] == [1.0, 2.0, 4.0]  # the backoff goes on
    records = [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records]
    assert records[0] == (
        "WARNING",
        "controller demo: GET /api/v1/nodes/n1: ClientConnectorError: cannot connect; retrying in 1.0 s",
        None,
    )
    assert [level for level, _, info in records[1:]] == ["DEBUG", "DEBUG"]
    assert all(info is None for _, _, info in records)
    now[0] += guard.REPEAT_WARNING_SECONDS
    outcome[:] = [down]
    run()
    assert caplog.records[-1].levelname == "WARNING"  # a long outage is recalled every 5 min
    outcome[:] = [None]
    assert run() == 5.0
    assert caplog.records[-1].getMessage() == "controller demo works again after 4 failed runs"
    caplog.clear()
    outcome[:] = [down]
    run()
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # a new outage: warned again
    caplog.clear()
    outcome[:] = [RuntimeError("a bug"), RuntimeError("a bug")]
    run(), run()
    assert [(r.levelname, r.exc_info is not None) for r in caplog.records] == [("ERROR", True)] * 2


def test_interrupted_passes_through_the_guard() -> None:
    def fn() -> float | None:
        raise kerrors.Interrupted("stopping")

    with pytest.raises(kerrors.Interrupted):
        _run(fn)()


# -- a create answered without metadata.name ---------------------------------------------------


def test_a_create_answer_without_a_name_is_an_error_naming_the_nodepool_not_a_keyerror(
    emu: EmulatorThread, kubectl: KubeClient, pool: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="karpy")
    running = RunningOperator(emu)
    try:
        op = running.op
        wait_for(op.ready, what="caches synced")
        create = op.kube.create

        def nameless(obj: dict[str, Any]) -> dict[str, Any]:
            out = create(obj)
            if obj["kind"] == "NodeClaim":
                out = {**out, "metadata": {k: v for k, v in out["metadata"].items() if k != "name"}}
            return out

        op.kube.create = nameless  # type: ignore[method-assign]
        kubectl.create(pending_pod())
        line = wait_for(
            lambda: [r for r in caplog.records if "no metadata.name" in r.getMessage()],
            what="the error line",
        )[0]
        assert line.levelname == "ERROR" and line.exc_info is None
        assert "NodePool default" in line.getMessage() and "generateName default-" in line.getMessage()
        assert op.metrics.value("karpy_scheduler_unschedulable_pods_count") == 1.0  # left out
        assert not [r for r in caplog.records if "failed; retrying" in r.getMessage()]  # no KeyError
        assert op.healthy()
    finally:
        running.stop()
