"""Drift (karpy.core.disruption.drift): the Drifted condition, the NodePool hash, requirements."""

from __future__ import annotations

from typing import Any

import pytest

import builders as b
from karpy.core.disruption import Memo, drift
from karpy.core.snapshot import StateNode
from karpy.model import labels as wk
from karpy.model.objects import Budget, Condition, Disruption, NodeClassRef
from karpy.model.requirements import Requirement
from karpy.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint

POOL = b.disruption_pool(node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default"))


def state(*, annotations: dict | None = None, conditions: tuple = (), **kwargs: Any) -> StateNode:
    node, claim = b.managed_node("n1", claim_annotations=annotations, claim_conditions=conditions, **kwargs)
    return StateNode(name="n1", node=node, claim=claim)


def stamped(
    pool: Any = POOL, *, hash_value: str | None = None, version: str | None = drift.HASH_VERSION
) -> dict:
    out = {drift.HASH_ANNOTATION: hash_value if hash_value is not None else drift.pool_hash(pool)}
    if version is not None:
        out[drift.HASH_VERSION_ANNOTATION] = version
    return out


# -- the Drifted condition --------------------------------------------------------------------------


def test_drifted_condition_true_is_drifted() -> None:
    cond = Condition("Drifted", "True", reason="NodeClassDrifted", last_transition=50.0)
    why = drift.drift_reason(state(conditions=(cond,)), POOL)
    assert why is not None and "NodeClassDrifted" in why


def test_drifted_condition_false_is_not_drifted() -> None:
    cond = Condition("Drifted", "False")
    assert drift.drift_reason(state(conditions=(cond,), annotations=stamped()), POOL) is None


def test_drifted_since_is_the_condition_time_else_now() -> None:
    cond = Condition("Drifted", "True", last_transition=50.0)
    assert drift.drifted_since(state(conditions=(cond,)), 999.0) == 50.0
    assert drift.drifted_since(state(), 999.0) == 999.0


# -- the NodePool hash ------------------------------------------------------------------------------


def test_matching_karpy_hash_is_not_drifted() -> None:
    assert drift.drift_reason(state(annotations=stamped()), POOL) is None


def test_karpy_hash_mismatch_is_drifted() -> None:
    old = b.replace(POOL, labels={"team": "a"})
    why = drift.drift_reason(state(annotations=stamped(old)), POOL)
    assert why is not None and "hash" in why


@pytest.mark.parametrize("version", ["v3", "v2", "", None])
def test_hash_of_another_version_or_without_version_is_not_drifted(version: str | None) -> None:
    annotations = stamped(hash_value="12345", version=version)
    assert drift.drift_reason(state(annotations=annotations), POOL) is None


def test_claim_without_hash_is_not_drifted() -> None:
    annotations = {drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION}
    assert drift.drift_reason(state(annotations=annotations), POOL) is None
    assert drift.drift_reason(state(), POOL) is None


def test_pool_hash_is_stable() -> None:
    same = b.disruption_pool(node_class_ref=NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default"))
    assert drift.pool_hash(POOL) == drift.pool_hash(same)


@pytest.mark.parametrize(
    "changes",
    [
        {"labels": {"team": "a"}},
        {"annotations": {"example.com/owner": "x"}},
        {"taints": (Taint("dedicated", NO_SCHEDULE, "gpu"),)},
        {"startup_taints": (Taint("init", NO_EXECUTE),)},
        {"node_class_ref": NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "other")},
        {"node_class_ref": None},
        {"expire_after": 24 * 3600.0},
        {"expire_after": None},
        {"termination_grace_period": 600.0},
    ],
)
def test_pool_hash_changes_with_template_fields(changes: dict) -> None:
    assert drift.pool_hash(b.replace(POOL, **changes)) != drift.pool_hash(POOL)


@pytest.mark.parametrize(
    "changes",
    [
        {"requirements": (Requirement.in_(wk.ZONE, "test-zone-1"),)},
        {"disruption": Disruption(budgets=(Budget("0"),))},
        {"disruption": Disruption(consolidation_policy="WhenEmpty", consolidate_after=300.0)},
        {"weight": 50},
        {"limits": {"cpu": 1000}},
        {"meta_annotations": {"karpy.sh/min-savings": "10%"}},
    ],
)
def test_pool_hash_ignores_requirements_budgets_and_other_fields(changes: dict) -> None:
    assert drift.pool_hash(b.replace(POOL, **changes)) == drift.pool_hash(POOL)


def test_pool_hash_treats_taints_as_a_set() -> None:
    one = Taint("a", NO_SCHEDULE, "1")
    two = Taint("b", NO_SCHEDULE, "2")
    assert drift.pool_hash(b.replace(POOL, taints=(one, two))) == drift.pool_hash(
        b.replace(POOL, taints=(two, one))
    )


def test_budget_change_does_not_drift_a_stamped_claim() -> None:
    node = state(annotations=stamped())
    changed = b.replace(POOL, disruption=Disruption(budgets=(Budget("0"),)))
    assert drift.drift_reason(node, changed) is None


# -- requirements -----------------------------------------------------------------------------------


def test_requirement_conflict_with_a_claim_label_is_drifted() -> None:
    node = state(annotations=stamped(), zone="test-zone-1")
    pool = b.replace(POOL, requirements=(Requirement.in_(wk.ZONE, "test-zone-2", "test-zone-3"),))
    why = drift.drift_reason(node, pool)
    assert why is not None and "requirements" in why


def test_requirement_satisfied_by_the_claim_is_not_drifted() -> None:
    node = state(annotations=stamped(), zone="test-zone-1", capacity_type="spot")
    pool = b.replace(
        POOL,
        requirements=(
            Requirement.in_(wk.ZONE, "test-zone-1", "test-zone-2"),
            Requirement.in_(wk.CAPACITY_TYPE, "spot"),
        ),
    )
    assert drift.drift_reason(node, pool) is None


def test_requirement_on_a_key_the_claim_lacks_is_not_drifted() -> None:
    node = state(annotations=stamped())
    pool = b.replace(POOL, requirements=(Requirement.in_("example.com/team", "a"),))
    assert drift.drift_reason(node, pool) is None


def test_capacity_type_requirement_tightened_drifts_spot_nodes() -> None:
    node = state(annotations=stamped(), capacity_type="spot")
    pool = b.replace(POOL, requirements=(Requirement.in_(wk.CAPACITY_TYPE, "on-demand"),))
    assert drift.drift_reason(node, pool) is not None


def test_not_in_requirement_conflict_is_drifted() -> None:
    node = state(annotations=stamped(), instance_type="small")
    pool = b.replace(POOL, requirements=(Requirement.of(wk.INSTANCE_TYPE, "NotIn", ("small",)),))
    assert drift.drift_reason(node, pool) is not None


def test_the_memo_keeps_a_nodes_reason_for_equal_nodepool_values_only() -> None:
    memo = Memo()
    node = state(annotations=stamped(), zone="test-zone-1")
    fits = b.replace(POOL, requirements=(Requirement.in_(wk.ZONE, "test-zone-1", "test-zone-2"),))
    assert memo.drift_reason(node, fits) is None
    moved = b.replace(fits, requirements=(Requirement.in_(wk.ZONE, "test-zone-2"),))
    why = memo.drift_reason(node, moved)  # the same StateNode, other requirements
    assert why is not None and "requirements" in why
    assert memo.drift_reason(node, b.replace(fits)) is None  # another object, equal values
    relabelled = b.replace(fits, labels={"team": "a"})  # the template hash changes
    why = memo.drift_reason(node, relabelled)
    assert why is not None and "hash" in why
    assert memo.drift_reason(node, fits) is None
    tainted = b.replace(fits, taints=(Taint("dedicated", "db", NO_SCHEDULE),))  # the hash alone changes
    why = memo.drift_reason(node, tainted)
    assert why is not None and "hash" in why
    assert Memo().drift_reason(node, moved) == drift.drift_reason(node, moved)  # a memo of its own
