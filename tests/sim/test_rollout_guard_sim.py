"""The rollout guard end to end: the simulator's Deployment status, a run on the virtual clock, the operator.

The Deployment stand-in publishes the status the Deployment controller writes, so the cluster
state of a simulation knows when a rollout is in progress. A NodePool annotated
``karpy.sh/rollout-guard`` then keeps consolidation off the nodes holding the rolling pods
until the settle time after the rollout completes; the operator (kwok provider, against the kmock
emulator over HTTP) does the same with a Deployment written by hand.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from emulator import EmulatorThread
from operator_harness import RunningOperator, wait_for

import builders
from karpy.adapters.kube.client import KubeClient
from karpy.adapters.memory import MemoryKube
from karpy.api import encode
from karpy.controllers import consolidation_state, disruption, provisioning
from karpy.core.disruption import rollout
from karpy.model.objects import ROLLOUT_GUARD_ANNOTATION
from karpy.runtime.loop import Loop, LoopClock
from karpy.sim import runner, scenario
from karpy.sim.binder import Binder
from karpy.sim.workloads import Workloads
from karpy.state.cluster import Cluster
from karpy.state.feed import Feed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples/sim"
START = 1_767_225_600.0

# -- the Deployment stand-in's status ----------------------------------------------------------------


def _template(image: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "web"}, "annotations": {"image": image}},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }


def _status(kube: MemoryKube) -> tuple[int, int, int, int, str, str]:
    (raw,) = kube.objects("Deployment")
    st, (cond,) = raw["status"], raw["status"]["conditions"]
    return (
        raw["spec"]["replicas"],
        st["replicas"],
        st["updatedReplicas"],
        st["readyReplicas"],
        cond["reason"],
        cond["lastUpdateTime"],
    )


def test_the_deployment_stand_in_publishes_its_status_as_it_rolls() -> None:
    loop = Loop(start=START)
    clock = LoopClock(loop)
    kube = MemoryKube(clock)
    cluster = Cluster(lambda _pool, _nc: ())
    kube.watch(Feed(cluster))
    binder = Binder(kube, cluster, clock)
    loop.add(binder.name, lambda: binder.reconcile().requeue_after)
    workloads = Workloads(kube, clock, loop=loop, ready_after=5.0)
    kube.create(encode.node(builders.node("n1", allocatable={"cpu": "16", "memory": "64Gi", "pods": "50"})))
    workloads.set_deployment(
        "web", "shop", template=_template("v1"), replicas=2, strategy={"maxSurge": 1, "maxUnavailable": 0}
    )
    loop.run(until=START + 1)
    assert _status(kube)[:5] == (2, 2, 2, 0, "ReplicaSetUpdated")
    (state,) = cluster.snapshot(loop.now).rollouts
    assert rollout.progress(state, loop.now) == "0/2 updated replicas available"
    loop.run(until=START + 10)
    ready_at = max(started.ready for started in workloads.started)  # the last pod turned Ready
    assert _status(kube) == (2, 2, 2, 2, "NewReplicaSetAvailable", encode.time(ready_at))
    (state,) = cluster.snapshot(loop.now).rollouts
    assert rollout.progress(state, loop.now) is None and state.progress_updated == ready_at
    workloads.rollout("web", "shop", template=_template("v2"))
    seen = []
    while loop.now < START + 60:
        loop.step()
        (state,) = cluster.snapshot(loop.now).rollouts
        seen.append((state.updated, state.status_replicas, rollout.progress(state, loop.now)))
    # (updatedReplicas, replicas, in progress): a surge pod, an old pod gone, the second surge, done
    assert list(dict.fromkeys(seen)) == [
        (1, 3, "1/2 updated"),
        (1, 2, "1/2 updated"),
        (2, 3, "1 old replica still running"),
        (2, 2, None),
    ]
    replicas, active, updated, ready, reason, updated_at = _status(kube)
    assert (replicas, active, updated, ready, reason) == (2, 2, 2, 2, "NewReplicaSetAvailable")
    done = encode.time(max(started.ready for started in workloads.started))  # the rollout's last pod
    assert updated_at == done and len(workloads.started) == 4
    workloads.scale("web", "shop", replicas=1)  # a scale-down after completion keeps the condition's time
    loop.run(until=START + 70)
    assert _status(kube) == (1, 1, 1, 1, "NewReplicaSetAvailable", done)
    workloads.delete_deployment("web", "shop")
    assert kube.objects("Deployment") == [] and cluster.rollouts == {}


# -- a run: the production controllers on the virtual clock -----------------------------------------

# A Deployment of 12 one-CPU pods scaled to 4 at 01:00, when it also rolls out one pod at a time
# (maxSurge 1, maxUnavailable 0, 60 s readiness: at least four minutes). The scale-down leaves
# nodes underutilized a minute later, in the middle of the rollout.
ROLLOUT = dt.datetime(2026, 3, 3, 1, 0, tzinfo=dt.UTC).timestamp()
EARLIEST_SETTLED = ROLLOUT + 4 * 60 + 5 * 60  # four 60 s readiness steps, then the 5m settle time


def _run(tmp_path: Path, name: str, annotations: dict[str, str]) -> runner.RunResult:
    raw = builders.simulation(
        name,
        start="2026-03-03T00:30:00Z",
        duration="90m",
        annotations=annotations,
        instance_family="c6i",
        consolidate_after="1m",
        deployment="web",
        namespace="shop",
        requests={"cpu": "1", "memory": "1Gi"},
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        replicas=[("00:00", 12), ("01:00", 4)],
        rollouts=["01:00"],
        pod_startup={"imagePullCold": "30s", "imagePullWarm": "1s", "ready": "60s"},
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return runner.run(scenario.load(path), seed=3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[runner.RunResult, runner.RunResult]:
    tmp = tmp_path_factory.mktemp("rollout-guard")
    return _run(tmp, "plain", {}), _run(tmp, "guarded", {ROLLOUT_GUARD_ANNOTATION: "5m"})


def _evictions(result: runner.RunResult) -> list[float]:
    return [t for t, kind, _, reason in result.events if kind == "Pod" and reason == "Evicted"]


def test_without_the_guard_consolidation_evicts_during_the_rollout(
    runs: tuple[runner.RunResult, runner.RunResult],
) -> None:
    plain, _ = runs
    assert [t for t in _evictions(plain) if ROLLOUT <= t < ROLLOUT + 4 * 60]


def test_with_the_guard_consolidation_waits_for_the_settle_time_and_evicts_less(
    runs: tuple[runner.RunResult, runner.RunResult],
) -> None:
    plain, guarded = runs
    evicted = _evictions(guarded)
    assert evicted and min(evicted) >= EARLIEST_SETTLED
    assert guarded.figures["disruptions"].get("underutilized", 0) >= 1  # consolidation resumed
    assert len(evicted) < len(_evictions(plain))
    assert guarded.figures["evictions"] == len(evicted)


def test_the_shipped_twin_only_turns_the_guard_on() -> None:
    twin = scenario.load(EXAMPLES / "payments-rollouts-guard.yaml")
    base = scenario.load(EXAMPLES / "payments-rollouts.yaml")
    assert not twin.deployments
    (pool,), (plain,) = twin.node_pools, base.node_pools
    assert pool["metadata"]["annotations"] == {ROLLOUT_GUARD_ANNOTATION: "5m"}
    assert {**pool, "metadata": {"name": pool["metadata"]["name"]}} == plain
    assert twin.node_classes == base.node_classes


# -- the operator: the kwok provider against the kmock emulator over HTTP ---------------------------


def _pool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "guarded", "annotations": {ROLLOUT_GUARD_ANNOTATION: "3s"}},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {
                            "key": "node.kubernetes.io/instance-type",
                            "operator": "In",
                            "values": ["default-instance-type"],
                        },
                    ],
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "0s",
                "budgets": [{"nodes": "100%"}],
            },
        },
    }


def _web_pod(name: str, cpu: str, node: str = "") -> dict[str, Any]:
    """A pod of the Deployment ``web`` (its ReplicaSet ``web-abc12``): pending, or on ``node``."""
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": "web", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
        ]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "web", "pod-template-hash": "abc12"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc12",
                    "uid": "rs-1",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _running(kubectl: KubeClient, name: str) -> None:
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    kubectl.patch("Pod", name, {"status": status}, namespace="default")


def _deployment_status(*, updated: int, reason: str, at: float) -> dict[str, Any]:
    condition = {
        "type": "Progressing",
        "status": "True",
        "reason": reason,
        "lastUpdateTime": encode.time(at),
        "lastTransitionTime": encode.time(at),
    }
    return {
        "observedGeneration": 1,
        "replicas": 2,
        "updatedReplicas": updated,
        "readyReplicas": 2,
        "availableReplicas": 2,
        "conditions": [condition],
    }


def _live_claims(kubectl: KubeClient) -> list[str]:
    return sorted(
        c["metadata"]["name"] for c in kubectl.list("NodeClaim") if not c["metadata"].get("deletionTimestamp")
    )


def test_the_operator_keeps_the_node_while_the_deployment_rolls_and_consolidates_after_the_settle_time(
    emu: EmulatorThread, kubectl: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real-time passes shortened so the story fits in seconds (the controllers are unchanged).
    monkeypatch.setattr(disruption, "PASS_SECONDS", 0.3)
    monkeypatch.setattr(disruption, "VALIDATION_SECONDS", 0.3)
    monkeypatch.setattr(consolidation_state, "STALE_SECONDS", 0.5)
    monkeypatch.setattr(provisioning, "nomination_ttl", lambda _batch_max: 1.0)  # nodes nominated 1 s
    kubectl.create(
        {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}
    )
    kubectl.create(_pool())
    kubectl.create(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "web"}]},
                },
            },
        }
    )
    start = time.time()
    kubectl.patch(
        "Deployment",
        "web",
        {"status": _deployment_status(updated=1, reason="ReplicaSetUpdated", at=start)},
        namespace="default",
    )
    running = RunningOperator(emu)
    try:
        wait_for(running.op.ready, timeout=30, what="caches synced")
        # two 3-CPU pods: one 4-CPU node each
        for name in ("web-abc12-1", "web-abc12-2"):
            kubectl.create(_web_pod(name, "3"))
        nodes = wait_for(
            lambda: (
                sorted(n["metadata"]["name"] for n in kubectl.list("Node"))
                if len(kubectl.list("Node")) == 2
                else None
            ),
            timeout=30,
            what="two Nodes",
        )
        kubectl.bind("web-abc12-1", "default", nodes[0])
        _running(kubectl, "web-abc12-1")
        # the second pod replaced by a small one on the other node: that node's pod now fits beside
        # the first, and the first pod beside it: consolidation would delete one of the two nodes
        kubectl.delete("Pod", "web-abc12-2", namespace="default")
        kubectl.create(_web_pod("web-abc12-3", "500m", nodes[1]))
        _running(kubectl, "web-abc12-3")
        claims = wait_for(
            lambda: _live_claims(kubectl) if len(_live_claims(kubectl)) == 2 else None, what="two claims"
        )
        time.sleep(5.0)  # many passes while the rollout is in progress, the nominations long over
        assert _live_claims(kubectl) == claims
        done = time.time()
        kubectl.patch(
            "Deployment",
            "web",
            {"status": _deployment_status(updated=2, reason="NewReplicaSetAvailable", at=done)},
            namespace="default",
        )
        time.sleep(1.0)  # within the 3 s settle time (the condition's time has whole seconds)
        assert _live_claims(kubectl) == claims
        wait_for(lambda: len(_live_claims(kubectl)) == 1, timeout=30, what="one node consolidated")
        assert time.time() - done >= 2.0
    finally:
        running.stop()
