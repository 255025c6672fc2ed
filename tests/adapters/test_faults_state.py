"""Fault suite: the operator's state and readiness when objects turn
invalid, when the API server's state is reset and when a required cache fails, over real HTTP
(karpy's emulator served on a port, the operator in a thread), each test bounded in time."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import pytest
from emulator import EmulatorThread
from operator_harness import NODE_CLASS, RunningOperator, http_get, node_pool, pending_pod, wait_for
from operator_harness import names as names_of

from karpy import operator as operator_mod
from karpy.adapters.kube.client import KubeClient
from karpy.metrics import Metrics

POOL_LABEL = "karpenter.sh/nodepool"


def _pools_of_claims(kubectl: KubeClient) -> list[str]:
    return sorted(c["metadata"]["labels"].get(POOL_LABEL, "") for c in kubectl.list("NodeClaim"))


@pytest.fixture
def operators() -> Any:
    started: list[RunningOperator] = []

    def start(emu: EmulatorThread, **kwargs: Any) -> RunningOperator:
        started.append(RunningOperator(emu, **kwargs))
        return started[-1]

    yield start
    for running in started:
        running.stop()


def test_a_nodepool_made_invalid_then_deleted_never_provisions(
    emu: EmulatorThread, kubectl: KubeClient, operators: Any
) -> None:
    """The issue's story: p1 (the heavier pool, so a stale copy of it would win every pod) is
    valid, made invalid, then deleted; pods created after that are served by the other pool."""
    kubectl.create(NODE_CLASS)
    p1 = node_pool("p1")
    p1["spec"]["weight"] = 50
    kubectl.create(p1)
    kubectl.create(node_pool("other"))
    op = operators(emu).op
    wait_for(op.ready, what="caches synced")
    wait_for(lambda: "p1" in op.cluster.node_pools, what="p1 in the operator's state")

    kubectl.patch("NodePool", "p1", {"spec": {"disruption": {"consolidateAfter": "soon"}}})

    def rejected() -> bool:
        conditions = (kubectl.get("NodePool", "p1").get("status") or {}).get("conditions") or []
        return any(c["type"] == "ValidationSucceeded" and c["status"] == "False" for c in conditions)

    wait_for(rejected, what="the operator saw p1 invalid (ValidationSucceeded=False)")
    kubectl.delete("NodePool", "p1")
    assert names_of(kubectl, "NodePool") == ["other"]

    for i in range(3):
        kubectl.create(pending_pod(f"web-{i}"))
    wait_for(lambda: names_of(kubectl, "NodeClaim"), timeout=15, what="a NodeClaim from the valid pool")
    time.sleep(0.5)  # the other pods' claims, if any, come in the same pass
    pools = _pools_of_claims(kubectl)
    assert pools and set(pools) == {"other"}, pools
    assert "p1" not in op.cluster.node_pools


def test_an_api_server_restarted_empty_is_relisted_and_provisions_again(
    emu: EmulatorThread, kubectl: KubeClient, operators: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The API server comes back with its state reset (an etcd restore) while the operator runs:
    its watches relist, the objects gone arrive as DELETED (the old NodeClaims and Nodes leave its
    state), and the same objects re-created under the same names (with lower resourceVersions)
    provision again."""
    caplog.set_level(logging.INFO, logger="karpy")
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    op = operators(emu).op
    wait_for(op.ready, what="caches synced")
    kubectl.create(pending_pod())
    (old_claim,) = wait_for(lambda: names_of(kubectl, "NodeClaim"), timeout=15, what="a NodeClaim")
    wait_for(lambda: names_of(kubectl, "Node"), timeout=15, what="its kwok Node")
    wait_for(lambda: old_claim in op.cluster.claims and op.cluster.nodes, what="both in the state")

    emu.call(emu.emulator.restart_empty())
    wait_for(
        lambda: not (op.cluster.claims or op.cluster.nodes or op.cluster.pods or op.cluster.node_pools),
        timeout=10,
        what="the old objects gone from the operator's state (relisted: DELETED)",
    )
    assert names_of(kubectl, "NodeClaim") == []
    watchers = {w.kind: w for w in op.watchers}
    assert watchers["NodeClaim"].resets >= 1 and watchers["NodePool"].resets >= 1

    started = time.monotonic()
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    kubectl.create(pending_pod())
    (new_claim,) = wait_for(
        lambda: names_of(kubectl, "NodeClaim"), timeout=15, what="a NodeClaim after the reset"
    )
    assert new_claim != old_claim and time.monotonic() - started < 15
    wait_for(lambda: new_claim in op.cluster.claims, what="the new claim in the state")
    assert old_claim not in op.cluster.claims
    resets = [r.getMessage() for r in caplog.records if "the API server's state was reset" in r.getMessage()]
    assert resets and all(r.startswith("watch ") for r in resets)


def test_readyz_fails_naming_a_required_cache_while_it_is_not_watching(
    emu: EmulatorThread, kubectl: KubeClient, operators: Any
) -> None:
    """Pod's list/watch answers 500: /readyz 503 naming Pod, its gauge 0 (the controllers' gate
    stays open on the last listed state); back to 200 and 1 once it works. A failing optional
    cache (Namespace) never fails /readyz."""
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    op = operators(emu).op
    readyz = f"http://127.0.0.1:{op.health_port}/readyz"
    wait_for(lambda: http_get(readyz) == (200, "ok"), what="ready")

    emu.call(emu.emulator.fail("Pod", 500))
    failing = (503, "not watching (list/watch failing): Pod")
    wait_for(lambda: http_get(readyz) == failing, timeout=5, what="/readyz naming Pod")
    assert op.metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 0.0
    assert op.metrics.value("karpy_cache_synced", {"kind": "Node"}) == 1.0
    assert op.caches.gate_open()  # listed once: the loop's gate does not close on an outage

    emu.run(lambda: emu.emulator.heal("Pod"))
    wait_for(lambda: http_get(readyz) == (200, "ok"), timeout=10, what="/readyz back")
    assert op.metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 1.0

    emu.call(emu.emulator.fail("Namespace", 500))
    wait_for(
        lambda: op.metrics.value("karpy_cache_synced", {"kind": "Namespace"}) == 0.0,
        timeout=5,
        what="the Namespace gauge 0",
    )
    assert http_get(readyz) == (200, "ok")
    emu.run(emu.emulator.heal)


@dataclass
class FakeWatcher:
    kind: str
    synced: bool = True
    healthy: bool = True
    absent: bool = False

    @property
    def path(self) -> str:
        return f"/fake/{self.kind}"


def test_the_gate_names_required_kinds_not_watching_while_the_loop_gate_stays_open() -> None:
    metrics = Metrics()
    gate = operator_mod.CacheGate("kwok", metrics=metrics)
    for kind in sorted(gate.required | gate.optional):
        gate.update(FakeWatcher(kind))  # type: ignore[arg-type]
    assert gate.readiness() == (True, "ok") and gate.gate_open()

    gate.update(FakeWatcher("Pod", healthy=False))  # type: ignore[arg-type]
    gate.update(FakeWatcher("KWOKNodeClass", healthy=False, absent=True))  # type: ignore[arg-type]
    gate.update(FakeWatcher("Namespace", healthy=False))  # type: ignore[arg-type]  # optional
    assert gate.readiness() == (
        False,
        "not watching (list/watch failing): KWOKNodeClass,Pod; not served (HTTP 404): KWOKNodeClass",
    )
    assert gate.not_watching() == ["KWOKNodeClass", "Pod"] and gate.unsynced() == []
    assert gate.gate_open()
    assert metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 0.0

    gate.update(FakeWatcher("Pod"))  # type: ignore[arg-type]
    gate.update(FakeWatcher("KWOKNodeClass"))  # type: ignore[arg-type]
    assert gate.readiness() == (True, "ok")
    assert metrics.value("karpy_cache_synced", {"kind": "Pod"}) == 1.0

    fresh = operator_mod.CacheGate("kwok")
    for kind in sorted(fresh.required - {"Node"}):
        fresh.update(FakeWatcher(kind))  # type: ignore[arg-type]
    fresh.update(FakeWatcher("Pod", healthy=False))  # type: ignore[arg-type]
    assert fresh.readiness() == (
        False,
        "waiting for caches: Node; not watching (list/watch failing): Pod",
    )
    assert not fresh.gate_open()
