"""The operator against kmock's STOCK ``KubernetesEmulator``.

The stock emulator is not :class:`emulator.KarpyEmulator`: ``GET /api/v1/namespaces`` answers 500
(``ValueError('not enough values to unpack ...')``, its router cannot parse the path), it ignores
``generateName`` (the object is stored without a name), sets no ``creationTimestamp`` and has no
resourceVersions (``"..."``). Over it Namespace is an optional cache (the failure is one warning
line, provisioning does not wait for it), and the kube client names generateName objects itself
and stamps ``creationTimestamp``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from emulator import EmulatorThread
from operator_harness import NODE_CLASS, RunningOperator, http_get, node_pool, pending_pod, wait_for
from prometheus_client.parser import text_string_to_metric_families

from karpy.adapters.kube import errors as kerrors
from karpy.adapters.kube.client import RESOURCES, KubeClient
from karpy.controllers import claims

BOUND = 20.0  # seconds from the operator's start to every assertion below


@pytest.fixture
def stock() -> Iterator[EmulatorThread]:
    thread = EmulatorThread(stock=True)
    yield thread
    thread.stop()


@pytest.fixture
def stock_kubectl(stock: EmulatorThread) -> Iterator[KubeClient]:
    client = KubeClient(host=stock.url, identity="kubectl", timeout=5.0).start()
    yield client
    client.close()


def _cache_gauge(metrics_port: int) -> dict[str, float]:
    _status, text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "karpy_cache_synced"
        for sample in family.samples
    }


def test_the_stock_emulator_still_lacks_what_karpy_copes_with(
    stock: EmulatorThread, stock_kubectl: KubeClient
) -> None:
    """The premises of this file: if a kmock upgrade fixes one, the tests here say so."""
    with pytest.raises(kerrors.Unavailable, match=r"GET /api/v1/namespaces: HTTP 500: ValueError"):
        stock_kubectl.list("Namespace")
    path = RESOURCES["NodeClaim"].path()
    raw = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"generateName": "raw-"}}
    stored = stock_kubectl.edge.call(stock_kubectl.request("POST", path, body=raw), 5)
    assert "name" not in stored["metadata"] and "creationTimestamp" not in stored["metadata"]
    assert (
        stock_kubectl.edge.call(stock_kubectl.request("GET", path), 5)["metadata"]["resourceVersion"] == "..."
    )


def test_create_names_generate_name_objects_itself_and_stamps_their_creation(
    stock: EmulatorThread, stock_kubectl: KubeClient
) -> None:
    body = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"generateName": "default-"}}
    first, second = stock_kubectl.create(body), stock_kubectl.create(body)
    names = [first["metadata"]["name"], second["metadata"]["name"]]
    assert names[0] != names[1]
    assert all(n.startswith("default-") and len(n) == len("default-") + 5 for n in names)
    assert sorted(c["metadata"]["name"] for c in stock_kubectl.list("NodeClaim")) == sorted(names)
    assert first["metadata"]["creationTimestamp"].endswith("Z")
    assert body["metadata"] == {"generateName": "default-"}  # the caller's object is not changed


def test_the_operator_provisions_over_stock_kmock_with_namespace_optional(
    stock: EmulatorThread, stock_kubectl: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="karpy")
    stock_kubectl.create(NODE_CLASS)
    stock_kubectl.create(node_pool())
    deadline = time.monotonic() + BOUND
    running = RunningOperator(stock)
    try:
        op = running.op
        stock_kubectl.create(pending_pod())

        claim = wait_for(
            lambda: stock_kubectl.list("NodeClaim"), timeout=deadline - time.monotonic(), what="a NodeClaim"
        )[0]
        meta = claim["metadata"]
        assert meta["name"].startswith("default-") and meta["labels"]["karpenter.sh/nodepool"] == "default"
        assert meta["annotations"][claims.MANAGED_BY_ANNOTATION] == claims.MANAGED_BY_VALUE
        assert stock_kubectl.get("NodeClaim", meta["name"])["metadata"]["name"] == meta["name"]

        # The claim launches (the kwok Node) and is not deleted as "created at 0" (liveness).
        node = wait_for(
            lambda: stock_kubectl.list("Node"), timeout=deadline - time.monotonic(), what="the kwok Node"
        )[0]
        assert node["spec"]["providerID"] == f"kwok://{node['metadata']['name']}"
        assert [c["metadata"]["name"] for c in stock_kubectl.list("NodeClaim")] == [meta["name"]]
        assert not stock_kubectl.get("NodeClaim", meta["name"])["metadata"].get("deletionTimestamp")

        assert http_get(f"http://127.0.0.1:{op.health_port}/readyz") == (
            200,
            "ok; not synced (optional): Namespace",
        )
        assert op.metrics_port is not None
        gauge = _cache_gauge(op.metrics_port)
        assert gauge["Namespace"] == 0.0 and gauge["Pod"] == 1.0
        assert {k for k, v in gauge.items() if v == 1.0} == {
            "Pod",
            "Node",
            "NodeClaim",
            "NodePool",
            "KWOKNodeClass",
            "EC2NodeClass",
            "DaemonSet",
            "PodDisruptionBudget",
            "Deployment",
            "StatefulSet",
            "PersistentVolumeClaim",
            "PersistentVolume",
            "StorageClass",
            "CSINode",
        }
        assert time.monotonic() < deadline
    finally:
        running.stop()

    watch_records = [
        r for r in caplog.records if r.name == "karpy.kube.watch" and "Namespace" in r.getMessage()
    ]
    warnings = [r for r in watch_records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]  # one line, then debug
    text = warnings[0].getMessage()
    assert "GET /api/v1/namespaces: HTTP 500: ValueError('not enough values to unpack" in text
    assert "retrying in" in text and warnings[0].exc_info is None
    assert any("failed again" in r.getMessage() for r in watch_records if r.levelno == logging.DEBUG)
