"""``karpy operator --measured-capacity`` against the emulator: measure, keep in a ConfigMap, restart.

The kwok provider writes Nodes with the catalog's allocatable; the test stands in for the
kubelet and reports less memory on the Node's status, as a node whose VM overhead the catalog
underestimated would. The operator measures it, writes the ConfigMap
``karpy-measured-capacity`` in its namespace, and an operator started afterwards (no Node of
that type left) reads it back and no longer offers that type to a pod it would not fit.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from emulator import EmulatorThread
from operator_harness import NODE_CLASS, RunningOperator, node_pool, pending_pod, wait_for
from operator_harness import names as names_of

from karpy import settings as settings_mod
from karpy.adapters.kube.client import KubeClient
from karpy.adapters.kube.measured_store import DATA_KEY, NAME
from karpy.controllers import termination
from karpy.model import errors

NAMESPACE = "karpy-system"
SMALL = "small-instance-type"  # 2 cpu, 2Gi - 10Mi allocatable in the catalog
ON = settings_mod.Settings(features=settings_mod.FeatureGates(measured_capacity=True))


def _configmap(kubectl: KubeClient) -> dict[str, Any] | None:
    try:
        raw = kubectl.get("ConfigMap", NAME, NAMESPACE)
    except errors.NotFound:
        return None
    return dict(json.loads(raw["data"][DATA_KEY]))


def _entry(kubectl: KubeClient) -> dict[str, Any] | None:
    doc = _configmap(kubectl)
    entries = [e for e in (doc or {}).get("entries", []) if e["instanceType"] == SMALL]
    return entries[0] if entries else None


def _start(emu: EmulatorThread, identity: str) -> RunningOperator:
    running = RunningOperator(emu, identity=identity, settings=ON, lease_namespace=NAMESPACE)
    wait_for(running.op.ready, what="caches synced")
    measured = running.op.controllers.measured_capacity
    assert measured is not None and measured.store is not None
    measured.save_interval = 0.2  # (the default waits a minute between writes)
    return running


def test_the_measurement_is_kept_in_a_configmap_and_read_back_after_a_restart(
    emu: EmulatorThread, kubectl: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(termination, "INSTANCE_POLL", 0.3)
    monkeypatch.setattr(termination, "BACKOFF_MIN", 0.2)
    monkeypatch.setattr(termination, "BACKOFF_MAX", 0.5)
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    first = _start(emu, "karpy-0")
    try:
        kubectl.create(pending_pod("web-1"))
        node = wait_for(lambda: names_of(kubectl, "Node"), what="the kwok Node")[0]
        assert kubectl.get("Node", node)["metadata"]["labels"]["node.kubernetes.io/instance-type"] == SMALL
        entry = wait_for(lambda: _entry(kubectl), what="the first measurement written")
        assert entry["identity"] == "KWOKNodeClass"
        assert entry["allocatable"]["memory"] == "2038Mi"  # what the catalog says, as kwok wrote it
        # the kubelet reports less (the catalog underestimated the overhead)
        kubectl.patch(
            "Node",
            node,
            {"status": {"capacity": {"memory": "1800Mi"}, "allocatable": {"memory": "1536Mi"}}},
        )
        entry = wait_for(
            lambda: (e := _entry(kubectl)) is not None and e["allocatable"]["memory"] == "1536Mi" and e,
            what="the lower measurement written",
        )
        assert entry["node"] == node and entry["capacity"]["memory"] == "1800Mi"
        cm = kubectl.get("ConfigMap", NAME, NAMESPACE)
        assert cm["metadata"]["labels"]["app.kubernetes.io/name"] == "karpy"
        # nothing of that type left when the operator stops
        kubectl.delete("Pod", "web-1", "default")
        kubectl.delete("NodeClaim", names_of(kubectl, "NodeClaim")[0])
        wait_for(
            lambda: not names_of(kubectl, "Node") and not names_of(kubectl, "NodeClaim"), what="all gone"
        )
    finally:
        first.stop()

    second = _start(emu, "karpy-1")
    try:
        # fits a small node by the catalog (2038Mi), not by what its Node registered with (1536Mi)
        pod = pending_pod("web-2")
        pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1800Mi"}
        kubectl.create(pod)
        claim = wait_for(lambda: kubectl.list("NodeClaim"), what="a NodeClaim")[0]
        types = next(
            r["values"]
            for r in claim["spec"]["requirements"]
            if r["key"] == "node.kubernetes.io/instance-type"
        )
        assert SMALL not in types and "default-instance-type" in types
        node = wait_for(lambda: names_of(kubectl, "Node"), what="its Node")[0]
        labels = kubectl.get("Node", node)["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "default-instance-type"
        measured = second.op.controllers.measured_capacity
        assert measured is not None
        small = [m for m in measured.entries.values() if m.instance_type == SMALL]
        assert [m.allocatable.get("memory") for m in small] == [1536 * 2**20]  # read from the ConfigMap
    finally:
        second.stop()


def test_without_the_flag_no_configmap_is_written(emu: EmulatorThread, kubectl: KubeClient) -> None:
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    running = RunningOperator(emu, lease_namespace=NAMESPACE)
    try:
        wait_for(running.op.ready, what="caches synced")
        assert running.op.controllers.measured_capacity is None
        kubectl.create(pending_pod("web-1"))
        wait_for(lambda: names_of(kubectl, "Node"), what="the kwok Node")
        wait_for(
            lambda: any(
                c["type"] == "Initialized" and c["status"] == "True"
                for c in (kubectl.list("NodeClaim")[0].get("status") or {}).get("conditions") or []
            ),
            what="the claim initialized",
        )
        operator_calls = [
            r for r in emu.requests() if str(r.headers.get("User-Agent", "")) != "karpy/kubectl"
        ]
        assert operator_calls and not any("/configmaps" in str(r.url.path) for r in operator_calls)
        assert _configmap(kubectl) is None
    finally:
        running.stop()


def test_the_cli_flag_turns_the_setting_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from karpy import cli
    from karpy import operator as operator_mod

    seen: list[operator_mod.OperatorConfig] = []

    class Stub:
        def __init__(self, config: operator_mod.OperatorConfig) -> None:
            seen.append(config)
            raise operator_mod.Refused("stub: not started")

    monkeypatch.setattr(operator_mod, "Operator", Stub)
    runner = CliRunner()
    runner.invoke(cli.app, ["operator", "--measured-capacity"])
    runner.invoke(cli.app, ["operator"])
    assert [c.settings.features.measured_capacity for c in seen] == [True, False]
    assert dataclasses.replace(seen[0].settings, features=settings_mod.FeatureGates()) == seen[1].settings
