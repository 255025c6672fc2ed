"""KubeClient over real HTTP against the extended kmock emulator: CRUD, errors, CAS, binding, eviction."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from emulator import EmulatorThread

from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube.client import KubeClient
from karpy.model import errors


def pod(name: str, *, labels: dict[str, str] | None = None, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "db"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_create_get_list_patch_delete_round_trip(kubectl: KubeClient) -> None:
    created = kubectl.create(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"generateName": "default-"}}
    )
    name = created["metadata"]["name"]
    assert name.startswith("default-") and created["metadata"]["resourceVersion"].isdigit()
    assert kubectl.get("NodeClaim", name)["metadata"]["uid"] == created["metadata"]["uid"]
    assert [c["metadata"]["name"] for c in kubectl.list("NodeClaim")] == [name]
    patched = kubectl.patch(
        "NodeClaim", name, {"metadata": {"labels": {"a": "b"}}, "status": {"nodeName": "n"}}
    )
    assert patched["metadata"]["labels"] == {"a": "b"}
    assert kubectl.get("NodeClaim", name)["status"] == {"nodeName": "n"}
    kubectl.delete("NodeClaim", name)
    with pytest.raises(errors.NotFound):
        kubectl.get("NodeClaim", name)


def test_errors_are_mapped_at_the_edge(kubectl: KubeClient) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    with pytest.raises(errors.AlreadyExists):
        kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    with pytest.raises(errors.NotFound):
        kubectl.patch("Node", "nope", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(errors.Invalid):
        kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {}})
    assert isinstance(kerrors.from_status(410, {"reason": "Expired"}), kerrors.Gone)
    assert isinstance(kerrors.from_status(503, "down"), kerrors.Unavailable)
    assert isinstance(kerrors.from_response(ConnectionResetError("x")), kerrors.Unavailable)


def test_finalizers_hold_deletion_until_removed(kubectl: KubeClient) -> None:
    kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "finalizers": ["f"]}})
    kubectl.delete("Node", "n1")
    assert kubectl.get("Node", "n1")["metadata"]["deletionTimestamp"]
    kubectl.patch("Node", "n1", {"metadata": {"finalizers": None}})
    with pytest.raises(errors.NotFound):
        kubectl.get("Node", "n1")


def test_cas_a_stale_update_answers_conflict(kubectl: KubeClient) -> None:
    first = kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    kubectl.patch("Node", "n1", {"metadata": {"labels": {"x": "1"}}})
    stale = {**first, "metadata": {**first["metadata"], "labels": {"x": "2"}}}
    with pytest.raises(errors.Conflict):
        kubectl.update(stale)
    fresh = kubectl.get("Node", "n1")
    fresh["metadata"]["labels"] = {"x": "3"}
    assert kubectl.update(fresh)["metadata"]["labels"] == {"x": "3"}


def test_without_cas_a_stale_update_silently_wins() -> None:
    """The extension's reason to exist: plain last-writer-wins hides lost updates."""
    emu = EmulatorThread(cas=False)
    client = KubeClient(host=emu.url, timeout=5.0).start()
    try:
        first = client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        client.patch("Node", "n1", {"metadata": {"labels": {"x": "1"}}})
        stale = {**first, "metadata": {**first["metadata"], "labels": {"x": "2"}}}
        client.update(stale)  # no Conflict: the label x=1 written meanwhile is lost
        assert client.get("Node", "n1")["metadata"]["labels"] == {"x": "2"}
    finally:
        client.close()
        emu.stop()


def test_binding_sets_the_node(kubectl: KubeClient) -> None:
    kubectl.create(pod("p1"))
    kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    kubectl.bind("p1", "default", "n1")
    assert kubectl.get("Pod", "p1", "default")["spec"]["nodeName"] == "n1"
    with pytest.raises(errors.Conflict):
        kubectl.bind("p1", "default", "n1")


def test_eviction_answers_429_while_a_pdb_forbids(emu: EmulatorThread, kubectl: KubeClient) -> None:
    kubectl.create(pod("p1"))
    kubectl.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        }
    )
    with pytest.raises(errors.TooManyRequests):
        kubectl.evict("p1", "default")
    assert kubectl.get("Pod", "p1", "default")  # still there
    kubectl.create(pod("p2"))  # now one disruption is allowed
    kubectl.evict("p1", "default")
    with pytest.raises(errors.NotFound):
        kubectl.get("Pod", "p1", "default")
    assert emu.emulator.evictions == [("default", "p1", 429), ("default", "p1", 201)]


def test_a_drain_that_ignores_429_is_caught_by_the_eviction_reaction(kubectl: KubeClient) -> None:
    """The extension's reason to exist: a drain treating 429 as done would think the pod is gone."""
    kubectl.create(pod("p1"))
    kubectl.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}},
        }
    )

    def careless_drain() -> None:
        with contextlib.suppress(errors.TooManyRequests):  # the bug: a refusal treated as done
            kubectl.evict("p1", "default")

    careless_drain()
    pods = [p["metadata"]["name"] for p in kubectl.list("Pod", "default")]
    assert pods == ["p1"], "the PDB-protected pod must survive the careless drain"


def test_writes_are_refused_when_not_leader(kubectl: KubeClient) -> None:
    kubectl.write_guard = lambda: False
    with pytest.raises(kerrors.NotLeader):
        kubectl.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    kubectl.write_guard = None
    assert kubectl.list("Node") == []


def test_a_call_waiting_on_a_slow_answer_is_interrupted_when_the_client_stops() -> None:
    """``stopping`` ends a synchronous call within a poll interval (the operator's SIGTERM path), and a
    call made after it never reaches the server."""
    import threading
    import time

    import pytest

    from karpy.adapters.kube import client as client_mod
    from karpy.adapters.kube import errors as kerrors

    edge = client_mod.Edge("test-edge")
    edge.start()
    try:
        gate = threading.Event()
        started = threading.Event()

        async def slow() -> str:
            import asyncio

            started.set()
            while not gate.is_set():
                await asyncio.sleep(0.01)
            return "late"

        stopping = threading.Event()
        threading.Timer(0.3, stopping.set).start()
        begin = time.monotonic()
        with pytest.raises(kerrors.Interrupted):
            edge.call(slow(), 30.0, interrupt=stopping)
        assert started.is_set() and time.monotonic() - begin < 1.0
        ran = []

        async def never() -> None:
            ran.append(1)

        with pytest.raises(kerrors.Interrupted):
            edge.call(never(), 30.0, interrupt=stopping)
        assert ran == []
        assert edge.call(slow_done(), 5.0) == "ok"  # without an interrupt the edge still answers
        gate.set()
    finally:
        edge.stop()


async def slow_done() -> str:
    return "ok"
