"""``karpy operator --strict``: a NodePool or NodeClass with a field karpy does not know fails
validation like one with a bad value: the watch feed reports it and keeps it out of the state,
and the operator writes ``ValidationSucceeded=False`` on it (kmock's emulator keeps unknown fields,
as an API server does under a CRD that preserves them); without ``--strict`` it is used as today.
Other kinds are never refused for a field."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

from karpy.adapters.memory import MemoryKube
from karpy.controllers.nodepool_status import failed_validation_conditions
from karpy.runtime.loop import Loop, LoopClock
from karpy.state.cluster import Cluster
from karpy.state.feed import STRICT_KINDS, Feed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "adapters"))

from emulator import EmulatorThread
from operator_harness import NODE_CLASS, RunningOperator, node_pool, pending_pod, wait_for

from karpy.adapters.kube.client import KubeClient

TYPO = "unknown field; did you mean consolidateAfter?"


def typo_pool(name: str) -> dict[str, Any]:
    pool = node_pool(name)
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfer": "Never"}
    return pool


def world(*, strict: bool) -> tuple[MemoryKube, Cluster, list[str]]:
    kube = MemoryKube(LoopClock(Loop(start=1_767_225_600.0)))
    cluster = Cluster(lambda _pool, _nc: ())
    problems: list[str] = []
    kube.watch(Feed(cluster, on_problem=lambda text, _event: problems.append(text), strict=strict))
    return kube, cluster, problems


def test_strict_keeps_a_nodepool_with_an_unknown_field_out_of_the_state() -> None:
    kube, cluster, problems = world(strict=True)
    kube.create(copy.deepcopy(NODE_CLASS))
    kube.create(node_pool("good"))
    kube.create(typo_pool("typo"))
    assert sorted(cluster.node_pools) == ["good"]
    assert problems == [
        f'watch:NodePool: document 0 (NodePool "typo"): spec.disruption.consolidateAfer: {TYPO}'
    ]
    fixed = kube.get("NodePool", "typo")
    fixed["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
    kube.update(fixed)
    assert sorted(cluster.node_pools) == ["good", "typo"]  # fixed: validated and used
    kube.patch("NodePool", "good", {"spec": {"wieght": 5}})
    assert sorted(cluster.node_pools) == ["typo"]  # made invalid: dropped, as a bad value would be
    assert problems[-1].endswith("spec.wieght: unknown field; did you mean weight?")


def test_strict_checks_node_classes_but_never_pods() -> None:
    kube, cluster, problems = world(strict=True)
    node_class = copy.deepcopy(NODE_CLASS)
    node_class["spec"] = {"nodeRegistrationDlay": "1s"}
    kube.create(node_class)
    pod = pending_pod()
    pod["spec"]["nodeSelecter"] = {"disk": "ssd"}
    kube.create(pod)
    assert cluster.node_classes == {} and len(problems) == 1
    assert "spec.nodeRegistrationDlay: unknown field; did you mean nodeRegistrationDelay?" in problems[0]
    assert [p.key for p in cluster.pods.values()] == ["default/web-1"]  # a pod is never refused
    assert {"NodePool", "EC2NodeClass", "KWOKNodeClass"} == STRICT_KINDS


def test_without_strict_the_nodepool_is_used_as_before() -> None:
    kube, cluster, problems = world(strict=False)
    kube.create(typo_pool("typo"))
    assert sorted(cluster.node_pools) == ["typo"] and problems == []


def test_the_problem_becomes_validation_succeeded_false() -> None:
    text = f'watch:NodePool: document 0 (NodePool "typo"): spec.disruption.consolidateAfer: {TYPO}'
    conditions = failed_validation_conditions([], text, generation=2, now=1_767_225_600.0)
    by_type = {c["type"]: c for c in conditions}
    assert (by_type["ValidationSucceeded"]["status"], by_type["ValidationSucceeded"]["reason"]) == (
        "False",
        "FailedValidation",
    )
    assert by_type["ValidationSucceeded"]["message"] == text
    assert by_type["Ready"]["status"] == "False"


def test_the_operator_with_strict_marks_the_nodepool_and_provisions_from_the_valid_one() -> None:
    emu = EmulatorThread()
    kubectl = KubeClient(host=emu.url, identity="kubectl", timeout=5.0).start()
    running: list[RunningOperator] = []
    try:
        kubectl.create(copy.deepcopy(NODE_CLASS))
        kubectl.create(node_pool("default"))
        kubectl.create(typo_pool("typo"))
        running.append(RunningOperator(emu, strict=True))
        op = running[0].op
        wait_for(op.ready, what="caches synced")

        def validation() -> dict[str, Any] | None:
            found = (kubectl.get("NodePool", "typo").get("status") or {}).get("conditions") or []
            return next((c for c in found if c["type"] == "ValidationSucceeded"), None)

        condition = wait_for(validation, what="ValidationSucceeded on the NodePool")
        assert (condition["status"], condition["reason"]) == ("False", "FailedValidation")
        assert condition["message"].endswith(f"spec.disruption.consolidateAfer: {TYPO}")
        kubectl.create(pending_pod())
        wait_for(lambda: kubectl.list("NodeClaim"), what="a NodeClaim")
        pools = {c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in kubectl.list("NodeClaim")}
        assert pools == {"default"}
        assert (kubectl.get("NodePool", "default").get("status") or {}).get("conditions") is not None
    finally:
        for one in running:
            one.stop()
        kubectl.close()
        emu.stop()
