"""``karpy snapshot`` -> ``karpy plan -f DIR`` plans what the kwok operator then does on that cluster.

One cluster on the Kubernetes emulator: a KWOKNodeClass, two NodePools (``default``, on-demand;
``batch``, spot and tainted), an existing Ready Node with a running pod, and pending pods: five
1500m web pods, one of them pinned to a zone, two batch pods that tolerate the taint and select
their pool, and a small pod that fits the existing Node. The folder ``karpy snapshot`` writes
from it is planned with ``karpy plan -f DIR -o json``; then the operator (kwok provider, the same
catalog) starts against the same emulator. Checked: the operator creates as many NodeClaims as
the plan, and for each planned claim one with the same NodePool, instance-type options (the
``node.kubernetes.io/instance-type`` requirement), requirements, resource requests, launched
instance type, zone, capacity type and labels, and the same pods nominated to it (its
``Nominated`` events); the pod the plan puts on the existing Node is nominated to that Node.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from emulator import EmulatorThread
from operator_harness import (
    CATALOG,
    NODE_CLASS,
    RunningOperator,
    kubeconfig_file,
    node_pool,
    pending_pod,
    wait_for,
)
from typer.testing import CliRunner

from karpy import cli, planning
from karpy.adapters.kube.client import KubeClient
from karpy.api import load as api_load
from karpy.controllers import claims as claims_mod

runner = CliRunner()
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
_NOMINATED = re.compile(r"^Pod should schedule on: (node|nodeclaim)/(.+)$")
# labels the kwok provider adds to a launched claim, and the one a plan's node has in their place
_PROVIDER_LABELS = ("karpenter.kwok.sh/kwoknodeclass", "kwok.x-k8s.io/node")
_PLAN_ONLY_LABELS = ("kubernetes.io/hostname",)


def _batch_pool() -> dict[str, Any]:
    pool = node_pool("batch")
    template = pool["spec"]["template"]
    template["metadata"] = {"labels": {"team": "batch"}}
    template["spec"]["requirements"][0]["values"] = ["spot"]
    template["spec"]["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
    return pool


def _batch_pod(name: str) -> dict[str, Any]:
    pod = pending_pod(name, app="batch", cpu="1")
    pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "batch"}]
    pod["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "batch"}
    return pod


def _existing_node() -> dict[str, Any]:
    capacity = {"cpu": "2", "memory": "4Gi", "pods": "10"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "existing",
            "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _objects() -> list[dict[str, Any]]:
    busy = pending_pod("busy", app="busy", cpu="1")
    busy["spec"]["nodeName"] = "existing"
    busy["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pinned = pending_pod("web-4", cpu="1500m")
    pinned["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "test-zone-2"}
    return [
        NODE_CLASS,
        node_pool(),
        _batch_pool(),
        _existing_node(),
        busy,
        *(pending_pod(f"web-{i}", cpu="1500m") for i in range(4)),
        pinned,
        _batch_pod("batch-0"),
        _batch_pod("batch-1"),
        pending_pod("tiny", app="tiny", cpu="250m"),
    ]


@pytest.fixture
def cluster(emu: EmulatorThread, kubectl: KubeClient) -> Iterator[KubeClient]:
    for obj in _objects():
        kubectl.create(copy.deepcopy(obj))
    yield kubectl


def _snapshot(emu: EmulatorThread, tmp_path: Path) -> Path:
    folder = tmp_path / "snap"
    config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
    result = runner.invoke(
        cli.app, ["snapshot", "--kubeconfig", str(config), "--context", "emu", "-o", str(folder)]
    )
    assert result.exit_code == 0, result.output
    return folder


def _plan(folder: Path) -> dict[str, Any]:
    result = runner.invoke(cli.app, ["plan", "-f", str(folder), "--catalog", CATALOG, "-o", "json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _planned_specs(folder: Path) -> dict[frozenset[str], dict[str, Any]]:
    """The NodeClaim spec the operator's claim writer makes of each planned claim, by its pods."""
    loaded = api_load.load_paths([folder])
    result = planning.make_plan(loaded, catalog_spec=CATALOG)
    pools = {pool.name: pool for pool in loaded.node_pools}
    out: dict[frozenset[str], dict[str, Any]] = {}
    for launched in result.launched:
        claim = launched.claim
        raw = claims_mod.new_claim_object(claim, pools[claim.node_pool], reason="provisioned")
        out[frozenset(p.key for p in claim.pods)] = raw["spec"]
    return out


def _nominations(kubectl: KubeClient) -> dict[str, set[tuple[str, str]]]:
    """Pod key -> the targets (kind, name) of its ``Nominated`` events."""
    out: dict[str, set[tuple[str, str]]] = {}
    for event in kubectl.list("Event", "default"):
        found = _NOMINATED.match(event.get("note") or "")
        if event.get("reason") == "Nominated" and found:
            pod = f"default/{event['regarding']['name']}"
            out.setdefault(pod, set()).add((found.group(1), found.group(2)))
    return out


def _launched(kubectl: KubeClient) -> int:
    """NodeClaims the operator created and launched (an instance type chosen, a providerID)."""
    return sum(
        1
        for c in kubectl.list("NodeClaim")
        if (c.get("status") or {}).get("providerID") and INSTANCE_TYPE in c["metadata"].get("labels", {})
    )


def _requirements(spec: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    return {r["key"]: (r["operator"], sorted(r.get("values") or [])) for r in spec["requirements"]}


def test_the_plan_of_a_snapshot_is_what_the_operator_creates(
    emu: EmulatorThread, cluster: KubeClient, tmp_path: Path
) -> None:
    folder = _snapshot(emu, tmp_path)
    plan = _plan(folder)
    assert plan["summary"]["unschedulablePods"] == 0
    planned = {frozenset(c["pods"]): c for c in plan["nodeClaims"]}
    assert len(planned) == plan["summary"]["newNodeClaims"] >= 2
    assert {c["nodePool"] for c in planned.values()} == {"default", "batch"}
    on_existing = sorted(pod for pod, target in plan["bindings"].items() if target == "existing")
    assert on_existing == ["default/tiny"]
    pending = sorted(plan["bindings"])
    specs = _planned_specs(folder)
    assert set(specs) == set(planned)

    operator = RunningOperator(emu)
    try:
        wait_for(operator.op.ready, what="caches synced")
        wait_for(
            lambda: _launched(cluster) >= len(planned) and set(_nominations(cluster)) >= set(pending),
            timeout=20.0,
            what="the operator's NodeClaims launched and its nominations",
        )
        made = {c["metadata"]["name"]: c for c in cluster.list("NodeClaim")}
        nominations = _nominations(cluster)
    finally:
        operator.stop()

    assert len(made) == len(planned)
    assert all(len(targets) == 1 for targets in nominations.values()), nominations
    target = {pod: next(iter(targets)) for pod, targets in nominations.items()}
    assert {pod for pod, t in target.items() if t == ("node", "existing")} == set(on_existing)
    pods_of: dict[str, set[str]] = {}
    for pod, (kind, name) in target.items():
        if kind == "nodeclaim":
            pods_of.setdefault(name, set()).add(pod)
    assert set(pods_of) == set(made)
    for name, pods in sorted(pods_of.items()):
        claim, spec = made[name], made[name]["spec"]
        expected = planned.get(frozenset(pods))
        assert expected is not None, f"{name} holds {sorted(pods)}, which no planned claim does"
        labels = claim["metadata"]["labels"]
        assert labels["karpenter.sh/nodepool"] == expected["nodePool"]
        assert _requirements(spec)[INSTANCE_TYPE] == ("In", sorted(expected["instanceTypeOptions"]))
        assert spec == specs[frozenset(pods)]
        assert spec["resources"]["requests"] == expected["requests"]
        launched = (
            labels[INSTANCE_TYPE],
            labels["topology.kubernetes.io/zone"],
            labels["karpenter.sh/capacity-type"],
        )
        assert launched == (expected["instanceType"], expected["zone"], expected["capacityType"])
        kept = {k: v for k, v in labels.items() if k not in _PROVIDER_LABELS}
        assert kept == {k: v for k, v in expected["labels"].items() if k not in _PLAN_ONLY_LABELS}
    batch = [made[n] for n, pods in pods_of.items() if pods == {"default/batch-0", "default/batch-1"}]
    assert len(batch) == 1 and batch[0]["spec"]["taints"] == [
        {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    ]
    assert batch[0]["metadata"]["labels"]["team"] == "batch"
