"""The fault suite: the API server unreachable for 10 s while the operator works.

The operator (:class:`operator_harness.RunningOperator`, in a thread) reaches the emulator only
through a :class:`proxy.FaultProxy`; the test, standing in for kubectl and the users, talks to
the emulator directly. While a drain is under way (a PodDisruptionBudget refusing the eviction,
so the termination controller calls the API every half second) the proxy is cut for 10 s and a
pod is created; another one right after the restore. Then: every watch works again, both pods
get a NodeClaim of their own within 10 s of the restore, the cut was logged as at most one
warning line per failing component (no tracebacks), and ``/healthz`` answered 200 throughout.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from emulator import EmulatorThread
from fault_harness import http_status
from operator_harness import NODE_CLASS, RunningOperator, node_pool, pending_pod, wait_for
from proxy import FaultProxy

from karpy.adapters.kube.client import KubeClient
from karpy.controllers import termination

CUT = 10.0  # seconds the API server is unreachable
SERVED_WITHIN = 10.0  # seconds after the restore by which the new pods have their NodeClaims
BOUND = 90.0  # the whole test


def spread_pod(name: str) -> dict[str, Any]:
    """A pending pod that repels every other pod of its app per hostname: a NodeClaim of its own."""
    pod = pending_pod(name, app="spread", cpu="100m")
    term = {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}
    pod["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return pod


def health(port: int) -> int | None:
    return http_status(f"http://127.0.0.1:{port}/healthz")


class Recorder(logging.Handler):
    """Every karpy log record (the operator's, the edge's, the controllers')."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._mutex = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._mutex:
            self.records.append(record)

    def between(self, start: float, end: float, level: int = logging.WARNING) -> list[logging.LogRecord]:
        with self._mutex:
            return [r for r in self.records if start <= r.created <= end and r.levelno >= level]


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    handler = Recorder()
    logger = logging.getLogger("karpy")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


class Watcher(threading.Thread):
    """Polls /healthz and the NodeClaims (first-seen times) until stopped."""

    def __init__(self, health_port: int, kubectl: KubeClient) -> None:
        super().__init__(name="fault-watcher", daemon=True)
        self.health_port = health_port
        self.kubectl = kubectl
        self.statuses: collections.Counter[int | None] = collections.Counter()
        self.first_seen: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.statuses[health(self.health_port)] += 1
            try:
                for claim in self.kubectl.list("NodeClaim"):
                    self.first_seen.setdefault(claim["metadata"]["name"], time.monotonic())
            except Exception:  # the emulator is never cut: this does not happen
                self.statuses[-1] += 1
            self.done.wait(0.1)


def nominated_claims(kubectl: KubeClient, pod: str) -> set[str]:
    """The NodeClaims the operator's Nominated events name for ``pod``."""
    out = set()
    for event in kubectl.list("Event", "default"):
        if event.get("reason") == "Nominated" and event["regarding"]["name"] == pod:
            target = str(event.get("note") or "").rpartition(" ")[2]
            if target.startswith("nodeclaim/"):
                out.add(target.removeprefix("nodeclaim/"))
    return out


def component(record: logging.LogRecord) -> str:
    """Who logged a warning: ``watch Pod``, ``controller termination``, ``events``, ``kwok`` ..."""
    words = record.getMessage().split()
    first = words[0].rstrip(":")
    if first in ("watch", "controller") and len(words) > 1:
        return f"{first} {words[1].rstrip(':')}"
    return f"{record.name} {first}"


def test_a_10s_cut_watches_reconnect_new_pods_are_served_and_the_outage_is_a_few_lines(
    emu: EmulatorThread,
    kubectl: KubeClient,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    began = time.monotonic()
    monkeypatch.setattr(termination, "BACKOFF_MIN", 0.2)  # the refused eviction retried every 0.5 s
    monkeypatch.setattr(termination, "BACKOFF_MAX", 0.5)
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    proxy = FaultProxy(emu.url)
    running = RunningOperator(proxy)  # the operator's only way to the API server
    watcher: Watcher | None = None
    try:
        op = running.op
        assert op.health_port is not None
        wait_for(op.ready, what="caches synced")
        watcher = Watcher(op.health_port, kubectl)
        watcher.start()

        # work under way: a drain held by a PodDisruptionBudget (an eviction retried)
        kubectl.create(spread_pod("held"))
        claim = wait_for(lambda: nominated_claims(kubectl, "held"), what="the first NodeClaim").pop()
        node = wait_for(
            lambda: kubectl.get("NodeClaim", claim).get("status", {}).get("nodeName"), what="its Node"
        )
        wait_for(
            lambda: (
                "karpenter.sh/termination" in (kubectl.get("Node", node)["metadata"].get("finalizers") or [])
            ),
            what="the Node registered",
        )
        kubectl.bind("held", "default", node)
        kubectl.patch("Pod", "held", {"status": {"phase": "Running"}}, namespace="default")
        kubectl.create(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "spread", "namespace": "default"},
                "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "spread"}}},
            }
        )
        wait_for(lambda: "default/spread" in op.cluster.pdbs, what="the PDB seen")
        kubectl.delete("NodeClaim", claim)
        wait_for(lambda: ("default", "held", 429) in emu.emulator.evictions, what="a refused eviction")
        before = {c["metadata"]["name"] for c in kubectl.list("NodeClaim")}

        cut_at = time.time()
        proxy.cut()
        kubectl.create(spread_pod("during"))  # the operator cannot see it yet
        time.sleep(CUT)
        assert health(op.health_port) == 200
        proxy.restore()
        restored, restored_wall = time.monotonic(), time.time()
        kubectl.create(spread_pod("after"))

        wait_for(
            lambda: all(w.healthy for w in op.watchers) and not op.unsynced(),
            timeout=SERVED_WITHIN,
            what="every watch working again",
        )
        served = wait_for(
            lambda: all(nominated_claims(kubectl, p) - before for p in ("during", "after")),
            timeout=25.0,  # the Nominated events may wait out the event queue's backoff
            what="the new pods nominated to new NodeClaims",
        )
        assert served
        claims = {p: (nominated_claims(kubectl, p) - before) for p in ("during", "after")}
        assert claims["during"].isdisjoint(claims["after"])  # a NodeClaim each (anti-affinity)
        for pod, names in claims.items():
            when = min(watcher.first_seen[n] for n in names)
            assert when - restored <= SERVED_WITHIN, f"{pod}: its NodeClaim {when - restored:.1f} s after"

        # the outage in the log: at most one warning line per failing component, no traceback
        lines = recorder.between(cut_at, restored_wall + 1.0)
        assert lines, "the cut was not noticed"
        assert [r.getMessage() for r in lines if r.exc_info] == []
        per = collections.Counter(component(r) for r in lines)
        repeated = {who: n for who, n in per.items() if n > 1}
        assert repeated == {}, "warned more than once:\n" + "\n".join(
            r.getMessage() for r in lines if component(r) in repeated
        )
        assert any(who.startswith("controller termination") for who in per), per  # the drain failed
        assert len(lines) <= len(op.watchers) + len(op.loop.tasks) + 2  # (+ the events, kwok)
        watcher.done.set()
        watcher.join(5)
        assert set(watcher.statuses) == {200}, watcher.statuses  # /healthz: 200 all along
        assert time.monotonic() - began < BOUND
    finally:
        if watcher is not None:
            watcher.done.set()
        running.stop()
        proxy.stop()
