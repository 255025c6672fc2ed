"""The rollout guard (``karpy.sh/rollout-guard``): no consolidation of nodes holding pods of a
rollout in progress, nor for the pool's settle time after it completes; pure, over a snapshot."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import builders as b
from karpy.core.disruption import (
    DRIFTED,
    EMPTY,
    UNDERUTILIZED,
    Decision,
    Memo,
    compute,
    horizon,
    rollout,
    validate,
)
from karpy.core.explain.node import explain_node
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.objects import (
    ROLLOUT_GUARD_ANNOTATION,
    Condition,
    OwnerRef,
    Pod,
    Rollout,
    rollout_guard_settle,
)

NOW = 1_000_000.0
MINUTE = 60.0
SMALL = b.instance_type("small", cpu="2", memory="2Gi")
LARGE = b.instance_type("large", cpu="8", memory="8Gi")
TYPES = [SMALL, LARGE]
IN_PROGRESS = (
    "not consolidatable: rollout of Deployment default/web in progress (2/4 updated); "
    "consolidation resumes 5m after it completes"
)


def web_pod(name: str, node: str, *, cpu: str = "1", started: float = NOW - 3600) -> Pod:
    """A pod of the Deployment ``web``: owned by its ReplicaSet ``web-abc12``."""
    return b.pod(
        name,
        cpu=cpu,
        node_name=node,
        labels={"app": "web", "pod-template-hash": "abc12"},
        owners=[OwnerRef("ReplicaSet", "web-abc12", "apps/v1", True)],
        started=started,
        ready=True,
    )


def deployment(**fields: Any) -> Rollout:
    """The Deployment ``web`` (4 replicas), complete an hour ago unless ``fields`` say otherwise."""
    base: dict[str, Any] = dict(
        replicas=4,
        status_replicas=4,
        updated=4,
        available=4,
        progress_status="True",
        progress_reason=rollout.NEW_RS_AVAILABLE,
        progress_updated=NOW - 3600,
    )
    base.update(fields)
    return Rollout("Deployment", "default", "web", **base)


RUNNING = deployment(
    status_replicas=5, updated=2, available=4, progress_reason="ReplicaSetUpdated", progress_updated=NOW - 30
)


def pool(settle: str | None = "5m", name: str = "default") -> Any:
    annotations = {} if settle is None else {ROLLOUT_GUARD_ANNOTATION: settle}
    return b.disruption_pool(name, meta_annotations=annotations)


def snap(
    *,
    rollouts: tuple[Rollout, ...] = (RUNNING,),
    pools: list[Any] | None = None,
    now: float = NOW,
    extra: list[Any] | None = None,
    n1: dict[str, Any] | None = None,
) -> Snapshot:
    """``n1`` (large) holds one pod of ``web``; ``n2`` (small) has room for it and is held by a
    do-not-disrupt pod: consolidation's only move is to delete ``n1``."""
    managed = [
        b.managed_node("n1", instance_type=LARGE, **(n1 or {})),
        b.managed_node("n2", instance_type=SMALL),
        *(extra or []),
    ]
    pods = [
        web_pod("web-abc12-1", "n1"),
        b.running_pod("keep", "n2", cpu="500m", annotations={wk.DO_NOT_DISRUPT: "true"}),
    ]
    return b.managed_snapshot(
        pools=pools or [pool()], types=TYPES, managed=managed, pods=pods, now=now, rollouts=rollouts
    )


def decide(s: Snapshot) -> Decision:
    return compute(s, s.now)


def notes(d: Decision, node: str) -> list[str]:
    return list(d.records[node].reasons)


# -- the annotation and the rollout states --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "settle"),
    [
        ("5m", 300.0),
        ("true", 300.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("0s", 0.0),
        (None, None),
        ("", None),
        ("5 m", None),
        ("five", None),
        ("-5m", None),
        ("false", None),
        ("1d", None),
    ],
)
def test_the_annotation_is_true_or_a_settle_duration(value: str | None, settle: float | None) -> None:
    assert rollout_guard_settle(value) == settle


def test_a_pod_belongs_to_the_deployment_of_its_replicaset_or_to_its_statefulset() -> None:
    assert rollout.owner(web_pod("web-abc12-1", "n1")) == ("Deployment", "default", "web")
    stateful = b.pod("db-0", namespace="data", owners=[OwnerRef("StatefulSet", "db", controller=True)])
    assert rollout.owner(stateful) == ("StatefulSet", "data", "db")
    unhashed = b.pod("x", owners=[OwnerRef("ReplicaSet", "web-abc12", controller=True)])
    assert rollout.owner(unhashed) is None  # no pod-template-hash: not a Deployment's ReplicaSet
    other = b.pod("x", labels={"pod-template-hash": "zz"}, owners=[OwnerRef("ReplicaSet", "web-abc12")])
    assert rollout.owner(other) is None
    assert rollout.owner(b.pod("job-1", owners=[OwnerRef("Job", "job", controller=True)])) is None
    assert rollout.owner(b.pod("bare")) is None


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),
        ({"updated": 2, "progress_reason": "ReplicaSetUpdated", "progress_updated": NOW - 60}, "2/4 updated"),
        ({"status_replicas": 5}, "1 old replica still running"),
        ({"status_replicas": 6}, "2 old replicas still running"),
        ({"available": 3}, "3/4 updated replicas available"),
        ({"generation": 3, "observed_generation": 2}, "its new spec not yet observed"),
        (
            {"progress_reason": "ReplicaSetUpdated", "progress_updated": NOW - 60},
            "Progressing: ReplicaSetUpdated",
        ),
        # stalled: the progress deadline has passed, or the controller says so; paused
        ({"updated": 2, "progress_reason": "ReplicaSetUpdated", "progress_updated": NOW - 601}, None),
        ({"updated": 2, "progress_status": "False", "progress_reason": "ProgressDeadlineExceeded"}, None),
        ({"updated": 2, "paused": True}, None),
        # no condition at all (a status written without one): the counts decide
        (
            {"updated": 2, "progress_status": "", "progress_reason": "", "progress_updated": None},
            "2/4 updated",
        ),
    ],
)
def test_when_a_deployment_is_in_progress(fields: dict[str, Any], expected: str | None) -> None:
    assert rollout.progress(deployment(**fields), NOW) == expected


def test_when_a_statefulset_is_in_progress() -> None:
    done = Rollout(
        "StatefulSet", "data", "db", replicas=3, updated=3, current_revision="r2", update_revision="r2"
    )
    assert rollout.progress(done, NOW) is None
    assert rollout.progress(dataclasses.replace(done, updated=1), NOW) == "1/3 updated"
    moving = dataclasses.replace(done, current_revision="r1")
    assert rollout.progress(moving, NOW) == "revision r2 not yet current"


# -- the pass ---------------------------------------------------------------------------------------


def test_without_the_annotation_consolidation_ignores_rollouts() -> None:
    d = decide(snap(pools=[pool(None)]))
    assert d.command is not None and d.command.reason == UNDERUTILIZED
    assert d.command.candidates == ("n1",)


def test_a_rollout_in_progress_keeps_its_nodes_from_consolidation() -> None:
    d = decide(snap())
    assert d.command is None
    assert IN_PROGRESS in notes(d, "n1")
    assert d.records["n1"].verdict == "candidate"  # still a candidate of drift and emptiness


def test_an_invalid_value_leaves_the_guard_off() -> None:
    d = decide(snap(pools=[pool("soon")]))
    assert d.command is not None and d.command.candidates == ("n1",)


def test_the_guard_holds_for_the_settle_time_after_the_rollout_completes() -> None:
    done = deployment(progress_updated=NOW - 2 * MINUTE)
    d = decide(snap(rollouts=(done,)))
    assert d.command is None
    assert (
        "not consolidatable: rollout of Deployment default/web completed at 1970-01-12T13:44:40Z; "
        "consolidation resumes at 1970-01-12T13:49:40Z (5m settle time)"
    ) in notes(d, "n1")
    later = decide(snap(rollouts=(done,), now=NOW + 3 * MINUTE))
    assert later.command is not None and later.command.candidates == ("n1",)
    assert horizon.next_change(snap(rollouts=(done,)), NOW) == NOW + 3 * MINUTE


def test_a_zero_settle_time_guards_only_while_in_progress() -> None:
    assert decide(snap(pools=[pool("0s")])).command is None
    done = deployment(progress_updated=NOW - 1)
    assert decide(snap(rollouts=(done,), pools=[pool("0s")])).command is not None


def test_a_stalled_rollout_no_longer_guards_and_its_deadline_is_a_change() -> None:
    stalling = dataclasses.replace(RUNNING, progress_updated=NOW - 590)
    assert decide(snap(rollouts=(stalling,))).command is None
    assert horizon.next_change(snap(rollouts=(stalling,)), NOW) == NOW + 10
    assert decide(snap(rollouts=(stalling,), now=NOW + 10)).command is not None


def test_a_statefulset_settles_from_its_pods_last_start() -> None:
    db = Rollout(
        "StatefulSet", "default", "db", replicas=1, updated=1, current_revision="r2", update_revision="r2"
    )
    stateful = b.pod(
        "db-0",
        cpu="1",
        node_name="n1",
        owners=[OwnerRef("StatefulSet", "db", controller=True)],
        started=NOW - 60,
    )
    s = snap(rollouts=(db,))
    s = dataclasses.replace(
        s,
        pods=(*s.pods, stateful),
        nodes=tuple(
            dataclasses.replace(n, pods=(*n.pods, stateful)) if n.name == "n1" else n for n in s.nodes
        ),
    )
    d = decide(s)
    assert d.command is None
    assert any("rollout of StatefulSet default/db completed at" in note for note in notes(d, "n1"))
    assert horizon.next_change(s, NOW) == NOW + 240


def test_the_guard_applies_to_its_own_pools_only() -> None:
    pools = [pool(None), pool("5m", name="guarded")]
    d = decide(snap(pools=pools))
    assert d.command is not None and d.command.candidates == ("n1",)


def test_an_empty_node_still_goes_and_drift_still_replaces() -> None:
    d = decide(snap(extra=[b.managed_node("empty")]))
    assert d.command is not None and d.command.reason == EMPTY and d.command.candidates == ("empty",)
    drifted = Condition("Drifted", "True", reason="NodePoolDrifted", last_transition=NOW - 60)
    d = decide(snap(n1={"claim_conditions": [drifted]}))
    assert d.command is not None and d.command.reason == DRIFTED and d.command.candidates == ("n1",)


def test_a_command_found_before_a_rollout_starts_is_rejected_at_validation() -> None:
    before = decide(snap(rollouts=(deployment(),)))
    assert before.command is not None and before.command.candidates == ("n1",)
    assert validate(snap(rollouts=(deployment(),)), before.command) is None
    assert validate(snap(), before.command) == "churn"


def test_a_memo_does_not_keep_a_guarded_decision_past_the_settle_time() -> None:
    done = deployment(progress_updated=NOW - 2 * MINUTE)
    s = snap(rollouts=(done,))
    memo = Memo()
    assert compute(s, NOW, memo=memo).command is None
    assert compute(s, NOW + MINUTE, memo=memo).command is None
    assert compute(s, NOW + 3 * MINUTE, memo=memo).command is not None
    moving = dataclasses.replace(s, rollouts=(RUNNING,))  # the same objects but the rollout's
    assert compute(moving, NOW + 3 * MINUTE, memo=memo).command is None


def test_explain_node_names_the_rollout_guard() -> None:
    exp = explain_node(snap(), "n1")
    assert exp.reason == "rollout-guard" and "rollout-guard" in exp.blockers
    single = next(m for m in exp.methods if m.method == "single-node consolidation")
    assert single.verdict == "blocked" and single.message == IN_PROGRESS
    assert IN_PROGRESS in exp.pass_reasons
    emptiness = next(m for m in exp.methods if m.method == "emptiness")
    assert emptiness.reason != "rollout-guard"
