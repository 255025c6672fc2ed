"""``karpy operator --shadow`` against the emulator over real HTTP, beside a stand-in Karpenter.

The test plays the installed Karpenter (its Deployment, its NodeClaims and Nodes, the bindings
kube-scheduler makes) with its own client. The shadow must start where the acting operator
refuses, decide, post its Events, count what the stand-in did, and send the API server no write
but Events and its Lease: every write request is counted at the emulator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from emulator import EmulatorThread
from operator_harness import (
    CATALOG,
    NODE_CLASS,
    RunningOperator,
    http_get,
    kubeconfig_file,
    node_pool,
    pending_pod,
    wait_for,
)
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from karpy import cli
from karpy.adapters.kube.client import RESOURCES, KubeClient, ReadOnly, path_kind
from karpy.api import encode
from karpy.model import labels as wk
from karpy.model.objects import Condition, Node, NodeClaim, NodeClassRef
from karpy.operator import runner

pytestmark = pytest.mark.usefixtures("restore_logging")
KWOK = NodeClassRef("karpenter.kwok.sh", "KWOKNodeClass", "default")
CAPACITY = {  # of the catalog's types the test's nodes have
    "small-instance-type": {"cpu": "2", "memory": "2Gi", "pods": "5"},
    "arm-instance-type": {"cpu": "16", "memory": "128Gi", "pods": "5"},
}
KARPENTER_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "karpenter", "namespace": "kube-system"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "karpenter"}},
        "template": {
            "metadata": {"labels": {"app": "karpenter"}},
            "spec": {"containers": [{"name": "controller", "image": "karpenter"}]},
        },
    },
}


def karpenters(
    name: str, *, instance_type: str, conditions: tuple[Condition, ...] = ()
) -> list[dict[str, Any]]:
    """A NodeClaim as Karpenter writes it (no karpy annotation) and its registered Node."""
    shared = {
        wk.NODEPOOL: "default",
        wk.INSTANCE_TYPE: instance_type,
        wk.ZONE: "test-zone-1",
        wk.CAPACITY_TYPE: "on-demand",
    }
    claim = NodeClaim(
        name=f"{name}-claim",
        node_pool="default",
        labels=shared,
        node_class_ref=KWOK,
        provider_id=f"aws:///test-zone-1/{name}",
        node_name=name,
        conditions=(
            Condition("Launched", "True"),
            Condition("Registered", "True"),
            Condition("Initialized", "True"),
            *conditions,
        ),
    )
    raw_claim = encode.node_claim(claim)
    capacity = CAPACITY[instance_type]
    raw_claim["status"]["capacity"] = raw_claim["status"]["allocatable"] = capacity
    node = Node(
        name, labels={**shared, wk.HOSTNAME: name, wk.INITIALIZED: "true"}, provider_id=claim.provider_id
    )
    raw_node = encode.node(node)
    raw_node["status"] = {**raw_node.get("status", {}), "capacity": capacity, "allocatable": capacity}
    return [raw_claim, raw_node]


def samples(
    metrics_port: int, prefix: str = "karpy_shadow_"
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    _status, text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(prefix) and not s.name.endswith("_created")
    }


def events_about(kubectl: KubeClient, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kubectl.list("Event") if e["regarding"]["name"] == name and e["reason"] == reason]


def test_shadow_beside_karpenter_decides_compares_and_writes_only_events_and_its_lease(
    emu: EmulatorThread, kubectl: KubeClient, tmp_path: Path
) -> None:
    kubectl.create(NODE_CLASS)
    kubectl.create(node_pool())
    kubectl.create(KARPENTER_DEPLOYMENT)
    drifted = Condition("Drifted", "True", "NodeClassDrift")
    for obj in karpenters("old", instance_type="small-instance-type", conditions=(drifted,)):
        kubectl.create(obj)
    with pytest.raises(runner.Refused, match="another controller manages NodeClaims"):
        RunningOperator(emu)  # the acting mode still refuses
    running = RunningOperator(
        emu, shadow=True, leader_elect=True, lease_name=runner.SHADOW_LEASE_NAME, retry_period=0.2
    )
    op = running.op
    try:
        wait_for(op.ready, what="caches synced")
        wait_for(lambda: op.is_leader(), what="the shadow leads")
        # karpy would remove the drifted node at once (drift needs no validation)
        event = wait_for(
            lambda: events_about(kubectl, "old", "ShadowWouldDisrupt"), what="ShadowWouldDisrupt"
        )[0]
        assert event["regarding"]["kind"] == "Node" and event["reportingController"] == "karpy-shadow"
        assert event["note"] == (
            "karpy would disrupt this node: drift (drifted): delete old (shadow mode: not disrupted)"
        )
        config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
        live = ["--kubeconfig", str(config), "--context", "emu", "--catalog", CATALOG, "-o", "json"]
        explained = CliRunner().invoke(cli.app, ["explain", "node", "old", *live])
        assert explained.exit_code == 0, explained.stderr
        doc = json.loads(explained.stdout)
        assert doc["verdict"] == "disrupted" and doc["summary"].startswith("disrupted this pass by drift")
        # a pending pod: karpy's launch, the Event on the pod, and `karpy explain` saying the same
        kubectl.create(pending_pod("web-1", cpu="3"))  # more than the drifted node has
        event = wait_for(
            lambda: events_about(kubectl, "web-1", "ShadowWouldLaunch"), what="ShadowWouldLaunch"
        )[0]
        (decision,) = op.shadow.launches
        assert decision.pods == ("default/web-1",) and decision.instance_type in event["note"]
        explained = CliRunner().invoke(cli.app, ["explain", "pod", "default/web-1", *live])
        assert explained.exit_code == 0, explained.stderr
        doc = json.loads(explained.stdout)
        assert doc["status"] == "new-nodeclaim" and doc["nodeClaim"]["instanceType"] == decision.instance_type
        assert [(e["reason"], e["controller"]) for e in doc["events"]] == [
            ("ShadowWouldLaunch", "karpy-shadow")
        ]
        # Karpenter acts: a node of another type for the pod, and the drifted one removed
        for obj in karpenters("theirs", instance_type="arm-instance-type"):
            kubectl.create(obj)
        kubectl.bind("web-1", "default", "theirs")
        reason = Condition("DisruptionReason", "True", "Drifted")
        raw = kubectl.get("NodeClaim", "old-claim")
        conditions = [*raw["status"]["conditions"], encode.condition(reason)]
        kubectl.patch("NodeClaim", "old-claim", {"status": {"conditions": conditions}})
        kubectl.delete("NodeClaim", "old-claim")
        kubectl.delete("Node", "old")
        assert op.metrics_port is not None
        expected = {
            (
                "karpy_shadow_launches_total",
                (("instance_type", decision.instance_type), ("nodepool", "default")),
            ): 1,
            ("karpy_shadow_installed_launches_total", (("instance_type", "arm-instance-type"),)): 1,
            ("karpy_shadow_disruptions_total", (("reason", "drifted"),)): 1,
            ("karpy_shadow_installed_disruptions_total", (("reason", "drifted"),)): 1,
            ("karpy_shadow_disruptions_agreed_total", (("reason", "drifted"),)): 1,
            ("karpy_shadow_pods_matched_total", (("result", "other_type"),)): 1,
        }
        found = wait_for(
            lambda: (
                (s := samples(op.metrics_port or 0)) and all(s.get(k) == v for k, v in expected.items()) and s
            ),
            what="the shadow metrics",
        )
        assert found[("karpy_shadow_launch_agreement_ratio", ())] == 0.0
        # the client refuses every other write before it reaches the server
        with pytest.raises(
            ReadOnly, match=r"refused create NodeClaim \(POST /apis/karpenter.sh/v1/nodeclaims\)"
        ):
            op.kube.create({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "x"}})
        with pytest.raises(ReadOnly, match=r"refused create Pod/eviction"):
            op.kube.evict("web-1", "default")
        with pytest.raises(ReadOnly, match=r"refused delete Node"):
            op.kube.delete("Node", "theirs")
    finally:
        running.stop()
    mine = [
        (method, path_kind(path)) for method, path, agent in emu.emulator.writes if agent == "karpy/karpy-0"
    ]
    assert {kind for _, kind in mine} == {"Event", "Lease"}, (
        mine
    )  # posted Events, took and released the Lease
    assert kubectl.get("NodeClaim", "theirs-claim")["metadata"]["name"] == "theirs-claim"


def test_shadow_over_the_stock_emulator_does_not_crash_and_writes_nothing_else() -> None:
    """kmock's stock emulator (no Namespace list, no resourceVersions): shadow decides all the same."""
    stock = EmulatorThread(stock=True)
    kubectl = KubeClient(host=stock.url, identity="kubectl", timeout=5.0).start()
    try:
        kubectl.create(NODE_CLASS)
        kubectl.create(node_pool())
        running = RunningOperator(stock, shadow=True)
        try:
            kubectl.create(pending_pod("web-1", cpu="1"))
            op = running.op
            wait_for(lambda: op.shadow.launches, timeout=15, what="a would-launch decision")
            wait_for(
                lambda: [e for e in kubectl.list("Event") if e["reason"] == "ShadowWouldLaunch"],
                what="its Event",
            )
            assert op.healthy() and kubectl.list("NodeClaim") == [] and kubectl.list("Node") == []
        finally:
            running.stop()
        writes = {
            (r.method.value, path_kind(str(r.url.path)))
            for r in stock.requests()
            if r.method.value != "GET" and r.headers.get("User-Agent") == "karpy/karpy-0"
        }
        assert writes == {("POST", "Event")}
    finally:
        kubectl.close()
        stock.stop()


def test_shadow_refuses_without_the_karpenter_crds_and_needs_no_aws_cluster_name(tmp_path: Path) -> None:
    """Beside Cluster Autoscaler the CRDs must be installed first: exit 3 naming the missing one."""
    emu = EmulatorThread(kinds=tuple(k for k in RESOURCES if k not in ("NodePool", "NodeClaim")))
    try:
        config = kubeconfig_file(tmp_path / "kubeconfig", emu.url)
        config.write_text(config.read_text().replace("current-context: other", "current-context: emu"))
        args = ["operator", "--shadow", "--provider", "aws", "--kubeconfig", str(config)]
        result = CliRunner().invoke(cli.app, args)
        refused = CliRunner().invoke(cli.app, [*args, "--measured-capacity"])
    finally:
        emu.stop()
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith(
        "error: refusing to start: the karpenter.sh/v1 NodePool CRD is not installed"
    )
    assert refused.exit_code == 2
    assert refused.stderr == "error: --measured-capacity writes a ConfigMap; --shadow writes nothing\n"
