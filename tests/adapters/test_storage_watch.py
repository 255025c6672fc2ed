"""The operator's watches bring PersistentVolumeClaims, PersistentVolumes, StorageClasses and
CSINodes into the cluster state, over real HTTP against the emulator, and a solve on that state
applies them (a bound volume's zone pins the pod's new node)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from emulator import EmulatorThread

import builders as b
from karpy.adapters.kube import watch
from karpy.adapters.kube.client import KubeClient
from karpy.core.scheduling import solve
from karpy.model import labels as wk
from karpy.model.volumes import PodVolume
from karpy.operator.caches import optional_kinds
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

STORAGE = ["PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"]
ZONE_TERM = {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": ["test-zone-3"]}]}


@pytest.fixture
def operator_client(emu: EmulatorThread) -> Iterator[KubeClient]:
    client = KubeClient(host=emu.url, identity="op", timeout=5.0).start()
    yield client
    client.close()


def _until(client: KubeClient, check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client.dispatch()
        if check():
            return
        time.sleep(0.01)
    raise AssertionError("timed out")


def _objects() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-1"},
            "spec": {
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [ZONE_TERM]}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "data",
                "namespace": "shop",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
            },
            "spec": {"storageClassName": "gp3", "volumeName": "pv-1"},
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "node-a"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}}]},
        },
    ]


def test_watched_storage_reaches_the_state_and_pins_the_zone(
    kubectl: KubeClient, operator_client: KubeClient
) -> None:
    assert set(STORAGE) <= optional_kinds("kwok")  # watched, never waited for
    cluster = Cluster(lambda _pool, _nc: (b.instance_type("t"),))
    operator_client.watch(Feed(cluster))
    watch.start_watches(operator_client, STORAGE, read_timeout=30)
    for obj in _objects():
        kubectl.create(obj)
    _until(operator_client, lambda: sum(len(v) for v in cluster.storage.values()) == 4)
    storage = cluster.snapshot(0.0).storage
    assert storage.claims["shop/data"].volume_name == "pv-1"
    assert storage.csi_nodes["node-a"].limits == {"ebs.csi.aws.com": 25}
    pod = b.pod("db-0", namespace="shop", volumes=(PodVolume("v", claim="data"),))
    snapshot = b.replace(cluster.snapshot(0.0), node_pools=(b.node_pool(),), pods=(pod,), unbound=None)
    snapshot = b.replace(snapshot, instance_types={"default": (b.instance_type("t"),)})
    (claim,) = solve(snapshot).new_claims
    assert claim.requirements[wk.ZONE].sorted_values() == ["test-zone-3"]
    kubectl.delete("PersistentVolumeClaim", "data", "shop")
    _until(operator_client, lambda: not cluster.snapshot(0.0).storage.claims)
