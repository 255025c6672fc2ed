"""The kube client's concurrency: ``batch``, at most N in flight, the rate limit,
the Lease's priority, and the operator's lifecycle over a slow API server.

Over real HTTP against the project's emulator; a slowed emulator (every request but the watches and
the Lease held ``delay`` seconds) counts the requests it serves at once. The in-memory server's
``batch`` is checked against the same calls made one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import emulator as emulator_mod
import pytest
from emulator import EmulatorThread
from operator_harness import CATALOG, NODE_CLASS, node_pool
from proxy import FaultProxy

from karpy import operator as operator_mod
from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube import leader, ratelimit
from karpy.adapters.kube.client import KubeClient
from karpy.adapters.memory import MemoryKube
from karpy.api import load as api_load
from karpy.core.disruption import drift
from karpy.model import errors
from karpy.ports import KubeOp, WatchEvent

VOLATILE = ("uid", "resourceVersion", "creationTimestamp", "generation", "name", "namespace")


class Slowed:
    """Holds every request (but watches and Leases) ``delay`` s at the emulator, counting those
    served at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, delay: float) -> None:
        self.delay = delay
        self.now = 0
        self.peak = 0
        self.served = 0
        original = emulator_mod.KarpyEmulator._handle
        slowed = self

        async def handle(emu: Any, request: Any) -> Any:
            if request.params.get("watch") == "true" or "/leases" in str(request.url.path):
                return await original(emu, request)
            slowed.now += 1
            slowed.peak = max(slowed.peak, slowed.now)
            try:
                await asyncio.sleep(slowed.delay)
                return await original(emu, request)
            finally:
                slowed.now -= 1
                slowed.served += 1

        monkeypatch.setattr(emulator_mod.KarpyEmulator, "_handle", handle)


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels)}}


def _claim(prefix: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"generateName": f"{prefix}-", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"requirements": []},
        "status": {"conditions": [{"type": "Launched", "status": "Unknown"}]},
    }


def _rounds(prefix: str, claim_name: str = "") -> list[list[KubeOp]]:
    """Two rounds of independent calls: creates, then reads, patches, deletes. A batch runs its
    calls concurrently, so no two calls of a round may depend on each other's order: the create
    that meets AlreadyExists is in the second round, after the first created the name."""
    p = prefix
    first = [
        KubeOp("create", "Node", body=_node(f"{p}-a", role="a")),
        KubeOp("create", "Node", body=_node(f"{p}-b")),
        KubeOp("create", "Node", body=_node(f"{p}-c")),
        KubeOp("create", "NodeClaim", body=_claim(p)),
    ]
    second = [
        KubeOp("patch", "Node", f"{p}-a", body={"metadata": {"labels": {"x": "1"}}}),
        KubeOp("get", "Node", f"{p}-b"),
        KubeOp("delete", "Node", f"{p}-c"),
        KubeOp("patch", "Node", f"{p}-gone", body={"metadata": {"labels": {"x": "1"}}}),  # NotFound
        KubeOp(
            "patch",
            "NodeClaim",
            claim_name,
            body={"metadata": {"labels": {"y": "2"}}, "status": {"nodeName": "n"}},
        ),
        KubeOp("create", "Node", body=_node(f"{p}-a")),  # AlreadyExists
    ]
    return [first, second]


def _plain(result: Any) -> Any:
    """A result without what differs between two runs (names, versions, times); errors by type."""
    if isinstance(result, errors.KubeError):
        return type(result).__name__
    out = copy.deepcopy(result)
    meta = out.get("metadata") or {}
    for key in (*VOLATILE, "generateName"):
        meta.pop(key, None)
    return out


def _one_by_one(kube: Any, ops: list[KubeOp]) -> list[Any]:
    out: list[Any] = []
    for op in ops:
        try:
            if op.verb == "get":
                out.append(kube.get(op.kind, op.name))
            elif op.verb == "create":
                out.append(kube.create(copy.deepcopy(dict(op.body or {}))))
            elif op.verb == "patch":
                out.append(kube.patch(op.kind, op.name, op.body or {}))
            elif op.verb == "delete":
                kube.delete(op.kind, op.name)
                out.append({})
        except errors.KubeError as exc:
            out.append(exc)
    return out


def _run(kube: Any, prefix: str, *, batched: bool) -> list[list[Any]]:
    first, _ = _rounds(prefix)
    if batched:
        ops = [KubeOp(o.verb, o.kind, o.name, body=copy.deepcopy(dict(o.body or {}))) for o in first]
        one = kube.batch(ops)
    else:
        one = _one_by_one(kube, first)
    claim = one[3]["metadata"]["name"]
    _, second = _rounds(prefix, claim)
    two = kube.batch(second) if batched else _one_by_one(kube, second)
    return [one, two]


def _objects(kube: Any, prefix: str) -> list[Any]:
    found = []
    for kind in ("Node", "NodeClaim"):
        for obj in kube.list(kind):
            if obj["metadata"]["name"].startswith(prefix):
                found.append(_plain(obj))
    return sorted(found, key=repr)


def test_a_batch_answers_and_leaves_the_state_as_the_same_calls_one_by_one(kubectl: KubeClient) -> None:
    """Over HTTP: the same results (each error in its place), the same objects, the echoes in the
    order of the ops."""
    echoed: list[tuple[str, str]] = []
    kubectl.watch(lambda e: echoed.append((e.type, e.obj["metadata"]["name"])))
    one_by_one = _run(kubectl, "seq", batched=False)
    seq_echoes, echoed[:] = list(echoed), []
    batched = _run(kubectl, "bat", batched=True)
    assert [[_plain(r) for r in rnd] for rnd in batched] == [[_plain(r) for r in rnd] for rnd in one_by_one]
    assert [type(r).__name__ for r in batched[1]][3] == "NotFound"
    assert [type(r).__name__ for r in batched[1]][-1] == "AlreadyExists"
    assert _objects(kubectl, "bat") == _objects(kubectl, "seq") != []
    assert [_echo_of(e, "bat") for e in echoed] == [_echo_of(e, "seq") for e in seq_echoes]


def _echo_of(event: tuple[str, str], prefix: str) -> tuple[str, str]:
    """(type, name) with the run's prefix taken off and the generated claim name made one."""
    type_, name = event
    name = name.removeprefix(f"{prefix}-")
    return (type_, name if name in ("a", "b", "c") else "claim")


def test_the_in_memory_batch_is_the_calls_made_in_order() -> None:
    """MemoryKube: the same results, recorded calls, watch events and objects as one by one."""

    class Clock:
        def now(self) -> float:
            return 1_767_225_600.0

    runs = []
    for batched in (False, True):
        kube = MemoryKube(Clock())
        events: list[WatchEvent] = []
        kube.watch(events.append)
        results = _run(kube, "k", batched=batched)
        runs.append((results, list(kube.calls), events, kube.objects("Node") + kube.objects("NodeClaim")))
    (seq, seq_calls, seq_events, seq_objects), (bat, bat_calls, bat_events, bat_objects) = runs
    assert [[r if isinstance(r, dict) else repr(r) for r in rnd] for rnd in bat] == [
        [r if isinstance(r, dict) else repr(r) for r in rnd] for rnd in seq
    ]
    assert bat_calls == seq_calls
    assert bat_events == seq_events
    assert bat_objects == seq_objects


def test_a_failing_op_fails_alone(kubectl: KubeClient) -> None:
    kubectl.create(_node("taken"))
    ops = [
        KubeOp("create", "Node", body=_node("new-1")),
        KubeOp("create", "Node", body=_node("taken")),
        KubeOp("patch", "Node", "missing", body={"metadata": {"labels": {"a": "b"}}}),
        KubeOp("create", "Thing", body={"kind": "Thing", "metadata": {"name": "x"}}),  # unknown kind
        KubeOp("create", "Node", body=_node("new-2")),
    ]
    results = kubectl.batch(ops)
    assert [type(r).__name__ for r in results] == ["dict", "AlreadyExists", "NotFound", "Invalid", "dict"]
    assert {"new-1", "new-2", "taken"} <= {n["metadata"]["name"] for n in kubectl.list("Node")}
    assert "taken" in str(results[1])  # the error names the request


def test_at_most_max_in_flight_requests_reach_the_server_at_once(
    emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = KubeClient(host=emu.url, identity="setup", timeout=5.0).start()
    setup.batch([KubeOp("create", "Node", body=_node(f"n{i:02d}")) for i in range(40)])
    setup.close()
    slowed = Slowed(monkeypatch, delay=0.05)
    client = KubeClient(host=emu.url, identity="op", timeout=5.0, max_in_flight=4, qps=-1).start()
    try:
        began = time.monotonic()
        results = client.batch([KubeOp("get", "Node", f"n{i:02d}") for i in range(40)])
        took = time.monotonic() - began
    finally:
        client.close()
    assert [r["metadata"]["name"] for r in results] == [f"n{i:02d}" for i in range(40)]  # in order
    assert slowed.peak == 4  # concurrent, and never more than 4 at once
    assert client.peak_in_flight == 4
    # 10 rounds of 50 ms; one by one would be 2 s (the peaks above prove the concurrency; this bound
    # only rules out running them one by one, with room for a busy machine)
    assert 0.5 <= took < 1.9, took


def test_the_token_bucket_holds_burst_then_qps_and_a_charge_never_waits() -> None:
    now = [0.0]
    bucket = ratelimit.TokenBucket(qps=10, burst=3, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]  # the burst
    assert [round(bucket.reserve(), 3) for _ in range(3)] == [0.1, 0.2, 0.3]  # then one per 100 ms, in order
    bucket.charge()  # a renewal: taken at once, its cost pushes later callers back
    assert round(bucket.reserve(), 3) == 0.5
    now[0] = 10.0  # idle: refilled to the burst, not beyond
    assert round(bucket.tokens(), 3) == 3.0
    assert ratelimit.TokenBucket(qps=-1, burst=1).reserve() == 0.0  # qps <= 0: no limit


def test_the_rate_limit_bounds_the_requests_per_second_over_http(kubectl: KubeClient) -> None:
    kubectl.create(_node("r"))
    client = KubeClient(host=kubectl._host, identity="limited", timeout=5.0, qps=40, burst=5).start()
    try:
        began = time.monotonic()
        client.batch([KubeOp("get", "Node", "r") for _ in range(25)])
        took = time.monotonic() - began
    finally:
        client.close()
    assert took >= (25 - 5) / 40 * 0.9, took  # 5 at once, then 40 per second
    assert took < 2.0, took
    assert client.limiter.waited > 0


def test_the_lease_is_renewed_on_time_while_a_burst_of_writes_waits_for_the_rate_limit(
    emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client held to 10 requests per second with 80 writes queued (8 s of them): the election
    on the same client renews every ``retry_period`` regardless and never loses the lead."""
    Slowed(monkeypatch, delay=0.02)
    client = KubeClient(host=emu.url, identity="op", timeout=5.0, qps=10, burst=1).start()
    elector = leader.LeaderElector(
        client, identity="op", namespace="default", lease_duration=2.0, renew_deadline=1.5, retry_period=0.25
    )
    client.write_guard = elector.is_leader
    done = threading.Event()
    try:
        elector.start()
        deadline = time.monotonic() + 5
        while not elector.is_leader():
            assert time.monotonic() < deadline, "no leadership"
            time.sleep(0.02)
        results: list[Any] = []

        def burst() -> None:
            with contextlib.suppress(kerrors.Interrupted):  # the test ends it by stopping the client
                results.extend(
                    client.batch([KubeOp("create", "Node", body=_node(f"w{i:02d}")) for i in range(80)])
                )
            done.set()

        threading.Thread(target=burst, daemon=True).start()
        renewals: list[float] = []
        seen = ""
        lost = 0
        began = time.monotonic()
        while time.monotonic() - began < 3.0:
            renew = str((elector.observed or {}).get("spec", {}).get("renewTime") or "")
            if renew != seen:
                seen = renew
                renewals.append(time.monotonic())
            lost += 0 if elector.is_leader() else 1
            time.sleep(0.02)
        assert not done.is_set()  # the writes were still queued behind the limit all along
        assert lost == 0
        gaps = [b - a for a, b in itertools.pairwise(renewals)]
        assert len(renewals) >= 8 and max(gaps) < 1.0, gaps
    finally:
        client.stopping.set()
        done.wait(2)
        client.close()


def test_a_batch_waiting_on_the_server_ends_when_the_client_stops(
    emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    Slowed(monkeypatch, delay=0.5)
    client = KubeClient(host=emu.url, identity="op", timeout=5.0, max_in_flight=2).start()
    try:
        threading.Timer(0.3, client.stopping.set).start()
        began = time.monotonic()
        with pytest.raises(kerrors.Interrupted):
            client.batch([KubeOp("create", "Node", body=_node(f"s{i}")) for i in range(20)])
        assert time.monotonic() - began < 0.8
    finally:
        client.close()


def test_a_replica_that_stops_leading_mid_batch_writes_no_more(
    emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    slowed = Slowed(monkeypatch, delay=0.05)
    client = KubeClient(host=emu.url, identity="op", timeout=5.0, max_in_flight=2).start()
    leading = threading.Event()
    leading.set()
    client.write_guard = leading.is_set
    try:
        threading.Timer(0.2, leading.clear).start()
        results = client.batch([KubeOp("create", "Node", body=_node(f"l{i:02d}")) for i in range(20)])
    finally:
        client.close()
    refused = [r for r in results if isinstance(r, kerrors.NotLeader)]
    assert 0 < len(refused) < 20
    assert slowed.served < 20


# -- the operator's lifecycle over a slow API server ---------------------------------------------


def _claims(count: int) -> list[dict[str, Any]]:
    pool = node_pool()
    hashed = drift.pool_hash(api_load.convert_node_pool(pool))
    return [
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": f"default-{i:03d}",
                "labels": {"karpenter.sh/nodepool": "default"},
                "annotations": {
                    "karpy.sh/managed-by": "karpy",
                    drift.HASH_ANNOTATION: hashed,
                    drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION,
                },
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi", "pods": "1"}},
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            },
        }
        for i in range(count)
    ]


_IDENTITIES = itertools.count()


@pytest.fixture
def slow_api(emu: EmulatorThread) -> Iterator[FaultProxy]:
    """The emulator behind a 20 ms proxy. kmock scans its whole request log for every request it
    serves (its reactions' filters): the log is emptied every 0.2 s so that the emulator's own cost
    stays flat (it would otherwise grow with every request the test makes)."""
    proxy = FaultProxy(emu.url, latency=0.02)
    stop = threading.Event()

    def forget() -> None:
        while not stop.wait(0.2):
            emu.run(emu.server._requests.clear)

    thread = threading.Thread(target=forget, daemon=True)
    thread.start()
    yield proxy
    stop.set()
    thread.join(5)
    proxy.stop()


def _launch_all(emu: EmulatorThread, proxy: FaultProxy, count: int, **overrides: Any) -> float:
    """Seconds from the operator's readiness until ``count`` fresh claims are all Initialized."""
    setup = KubeClient(host=emu.url, identity="setup", timeout=5.0).start()
    setup.batch([KubeOp("create", "NodeClaim", body=c) for c in _claims(count)])
    setup.close()
    config = operator_mod.OperatorConfig(
        host=proxy.url,
        catalog=CATALOG,
        metrics_port=None,
        health_port=None,
        identity=f"op-{next(_IDENTITIES)}",
        disruption=False,
        **overrides,
    )
    op = operator_mod.Operator(config)
    op.start()
    thread = threading.Thread(target=op.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not op.ready():
            assert time.monotonic() < deadline
            time.sleep(0.005)
        began = time.monotonic()
        while True:
            done = sum(1 for c in list(op.cluster.claims.values()) if c.is_true("Initialized"))
            if done >= count:
                return time.monotonic() - began
            assert time.monotonic() - began < 60, f"{done} of {count} initialized"
            time.sleep(0.02)
    finally:
        op.stop()
        thread.join(10)


def test_the_lifecycle_launches_50_claims_over_a_slow_api_server_far_faster_than_one_by_one(
    emu: EmulatorThread, kubectl: KubeClient, slow_api: FaultProxy
) -> None:
    """20 ms per request: a claim takes about 10 requests, one by one (``max_in_flight=1``) a
    quarter of a second; 50 claims launched, registered and initialized concurrently take well
    under 50 times that."""
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    serial = _launch_all(emu, slow_api, 4, kube_client_max_in_flight=1)
    per_claim = serial / 4
    for name in [n["metadata"]["name"] for n in kubectl.list("Node")]:
        kubectl.patch("Node", name, {"metadata": {"finalizers": None}})
        kubectl.delete("Node", name)
    for claim in kubectl.list("NodeClaim"):
        kubectl.patch("NodeClaim", claim["metadata"]["name"], {"metadata": {"finalizers": None}})
        kubectl.delete("NodeClaim", claim["metadata"]["name"])
    concurrent = _launch_all(emu, slow_api, 50)
    print(f"one by one: {per_claim:.3f} s per claim; 50 at once: {concurrent:.2f} s")
    assert per_claim > 0.15  # the latency is there: ~10 requests of >= 20 ms
    assert concurrent < 0.4 * 50 * per_claim, (concurrent, per_claim)


def test_the_rate_limit_flags_and_their_env_reach_the_kube_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--kube-client-qps`` / ``--kube-client-burst`` (env KUBE_CLIENT_QPS / KUBE_CLIENT_BURST, as
    upstream): defaults 200 / 300, the env over the default, the flag over the env."""
    from typer.testing import CliRunner

    from karpy.cli import app

    limits: list[tuple[float, int]] = []

    def refuse(self: operator_mod.Operator) -> None:
        limits.append((self.kube.limiter.qps, self.kube.limiter.burst))
        raise operator_mod.Refused("test: not starting")

    monkeypatch.setattr(operator_mod.Operator, "start", refuse)
    # (the command's JSON log handler would stay on the runner's closed stream for later tests)
    monkeypatch.setattr(operator_mod, "configure_logging", lambda *_args, **_kwargs: None)
    runner = CliRunner()
    base = ["operator", "--metrics-port", "0", "--health-port", "0"]
    assert runner.invoke(app, base, env={}).exit_code == 3
    assert runner.invoke(app, base, env={"KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "60"}).exit_code == 3
    flags = [*base, "--kube-client-qps", "7.5", "--kube-client-burst", "9"]
    assert runner.invoke(app, flags, env={"KUBE_CLIENT_QPS": "50"}).exit_code == 3
    assert limits == [(200.0, 300), (50.0, 60), (7.5, 9)]
