"""One disruption pass (karpy.core.disruption.compute): methods, their order, guards and records."""

from __future__ import annotations

from typing import Any

import pytest

import builders as b
from karpy import settings as settings_mod
from karpy.core.disruption import (
    DRIFTED,
    EMPTINESS,
    EMPTY,
    EXPIRED,
    MULTI_NODE,
    SINGLE_NODE,
    UNDERUTILIZED,
    Decision,
    Memo,
    compute,
    consolidation,
)
from karpy.core.disruption import candidates as cand
from karpy.core.disruption.pdbs import Limits
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.objects import Condition

NOW = 1_000_000.0
MINUTE = 60.0
SMALL = b.instance_type("small", cpu="2", memory="2Gi")  # 0.4/h
MEDIUM = b.instance_type("medium", cpu="4", memory="4Gi")  # 0.8/h
LARGE = b.instance_type("large", cpu="8", memory="8Gi")  # 1.6/h
TYPES = [SMALL, MEDIUM, LARGE]
DND = wk.DO_NOT_DISRUPT
STABILIZATION = "karpy.sh/consolidation-stabilization"
SPOT_TO_SPOT = settings_mod.Settings(features=settings_mod.FeatureGates(spot_to_spot_consolidation=True))


def snap(
    managed: list,
    pods: list | None = None,
    *,
    pools: list | None = None,
    types: Any = None,
    now: float = NOW,
    **kwargs: Any,
) -> Snapshot:
    return b.managed_snapshot(
        pools=pools or [b.disruption_pool()],
        types=TYPES if types is None else types,
        managed=managed,
        pods=pods or [],
        now=now,
        **kwargs,
    )


def decide(managed: list, pods: list | None = None, **kwargs: Any) -> Decision:
    s = snap(managed, pods, **kwargs)
    return compute(s, s.now)


def graceful(s: Snapshot) -> list:
    found, _ = cand.build_all(
        s.nodes,
        pools={p.name: p for p in s.node_pools},
        instance_types={name: {it.name: it for it in its} for name, its in s.instance_types.items()},
        limits=Limits(s.pdbs, s.pods),
        now=s.now,
        disruption_class=cand.GRACEFUL,
    )
    return found


def notes(decision: Decision, node: str) -> str:
    return " | ".join(decision.records[node].reasons)


def pod(name: str, node: str, cpu: str = "1", **kwargs: Any) -> Any:
    return b.running_pod(name, node, cpu=cpu, **kwargs)


def option_names(decision: Decision) -> list[str]:
    assert decision.command is not None
    [replacement] = decision.command.replacements
    return [it.name for it in replacement.instance_types]


# -- expiration ---------------------------------------------------------------------------------------


def test_expired_reported_first_regardless_of_budgets_pdbs_and_do_not_disrupt() -> None:
    pool = b.disruption_pool(expire_after=3600.0, budgets=[b.budget("0")])
    managed = [
        b.managed_node("old-dnd", created=NOW - 7200),
        b.managed_node("old-pdb", created=NOW - 7200, node_annotations={DND: "true"}),
        b.managed_node("young-empty", created=NOW - 60),
        b.managed_node("old-deleting", created=NOW - 7200, claim_overrides={"deleting": True}),
    ]
    pods = [
        pod("batch", "old-dnd", annotations={DND: "true"}),
        pod("ledger", "old-pdb", labels={"app": "ledger"}),
    ]
    pdb = b.pdb("ledger", match_labels={"app": "ledger"}, disruptions_allowed=0)
    d = decide(managed, pods, pools=[pool], pdbs=[pdb])
    assert d.command is not None
    assert d.command.reason == EXPIRED
    assert d.command.candidates == ("old-dnd", "old-pdb")
    assert d.command.replacements == ()
    assert d.records["old-dnd"].verdict == "disrupted"
    assert d.records["young-empty"].verdict != "disrupted"


def test_expiration_wins_over_emptiness() -> None:
    pool = b.disruption_pool(expire_after=3600.0)
    managed = [b.managed_node("old", created=NOW - 7200), b.managed_node("empty", created=NOW - 60)]
    d = decide(managed, [pod("a", "old")], pools=[pool])
    assert d.command is not None and d.command.reason == EXPIRED
    assert d.command.candidates == ("old",)


def test_claim_expire_after_overrides_the_pool() -> None:
    pool = b.disruption_pool(expire_after=None)
    managed = [
        b.managed_node("short", created=NOW - 7200, claim_overrides={"expire_after": 3600.0}),
        b.managed_node("never", created=NOW - 10**7),
    ]
    d = decide(managed, [pod("a", "short"), pod("b", "never")], pools=[pool])
    assert d.command is not None and d.command.reason == EXPIRED
    assert d.command.candidates == ("short",)


def test_not_yet_expired_is_not_reported() -> None:
    pool = b.disruption_pool(expire_after=3600.0, consolidate_after=None)
    d = decide([b.managed_node("n1", created=NOW - 3599)], [pod("a", "n1")], pools=[pool])
    assert d.command is None


# -- emptiness ----------------------------------------------------------------------------------------


def test_emptiness_deletes_every_empty_node_in_one_command() -> None:
    managed = [b.managed_node(n, instance_type=LARGE) for n in ("e1", "e2", "e3", "busy")]
    pods = [pod("a", "busy", cpu="7"), pod("agent", "e2", cpu="0", owner_kind="DaemonSet")]
    d = decide(managed, pods)
    assert d.command is not None
    assert (d.command.reason, d.command.method, d.command.decision) == (EMPTY, "emptiness", "delete")
    assert d.command.candidates == ("e1", "e2", "e3")


@pytest.mark.parametrize(("nodes", "expected"), [("2", 2), ("50%", 2), ("25%", 1), ("1", 1)])
def test_emptiness_is_capped_by_the_empty_budget(nodes: str, expected: int) -> None:
    pool = b.disruption_pool(budgets=[b.budget(nodes)])
    managed = [b.managed_node(n) for n in ("e1", "e2", "e3", "busy")]
    d = decide(managed, [pod("a", "busy", cpu="3")], pools=[pool])
    assert d.command is not None and d.command.reason == EMPTY
    assert d.command.candidates == ("e1", "e2", "e3")[:expected]
    assert "Empty budget" in notes(d, "e3")


def test_emptiness_budget_zero_leaves_empty_nodes_and_says_so() -> None:
    pool = b.disruption_pool(budgets=[b.budget("0", reasons=[EMPTY]), b.budget("100%")])
    d = decide([b.managed_node("e1"), b.managed_node("busy")], [pod("a", "busy", cpu="3")], pools=[pool])
    assert d.command is None or "e1" not in d.command.candidates
    assert "budget[0]" in notes(d, "e1")


def test_emptiness_budgets_are_per_pool() -> None:
    pools = [
        b.disruption_pool("a", budgets=[b.budget("1")]),
        b.disruption_pool("b", budgets=[b.budget("100%")]),
    ]
    managed = [b.managed_node(n, pool="a") for n in ("a1", "a2")]
    managed += [b.managed_node(n, pool="b") for n in ("b1", "b2")]
    d = decide(managed, pools=pools)
    assert d.command is not None
    assert d.command.candidates == ("a1", "b1", "b2")


# -- drift --------------------------------------------------------------------------------------------


def drifted(name: str, since: float, **kwargs: Any) -> tuple:
    cond = Condition("Drifted", "True", reason="NodePoolDrifted", last_transition=since)
    return b.managed_node(name, instance_type=LARGE, claim_conditions=(cond,), **kwargs)


NO_CONSOLIDATION = b.disruption_pool(consolidate_after=None)


def test_drift_takes_empty_drifted_nodes_first() -> None:
    managed = [drifted("d-old", 50.0), drifted("d-new", 100.0), drifted("d-empty", 200.0)]
    d = decide(managed, [pod("a", "d-old"), pod("b", "d-new")], pools=[NO_CONSOLIDATION])
    assert d.command is not None
    assert (d.command.reason, d.command.method) == (DRIFTED, "drift")
    assert d.command.candidates == ("d-empty",)
    assert d.command.replacements == ()


def test_drift_then_oldest_drifted_node() -> None:
    managed = [drifted("d-new", 100.0), drifted("d-old", 50.0), b.managed_node("fine", instance_type=LARGE)]
    d = decide(managed, [pod("a", "d-old"), pod("b", "d-new")], pools=[NO_CONSOLIDATION])
    assert d.command is not None and d.command.reason == DRIFTED
    assert d.command.candidates == ("d-old",)
    assert "drifted" in notes(d, "d-new")


def test_drift_replacement_launches_what_the_pods_need() -> None:
    d = decide([drifted("d1", 50.0)], [pod("a", "d1", cpu="3")], pools=[NO_CONSOLIDATION])
    assert d.command is not None and d.command.reason == DRIFTED
    [replacement] = d.command.replacements
    assert [p.name for p in replacement.pods] == ["a"]


def test_drift_budget_zero_blocks_and_says_so() -> None:
    pool = b.disruption_pool(consolidate_after=None, budgets=[b.budget("0", reasons=[DRIFTED])])
    d = decide([drifted("d1", 50.0)], [pod("a", "d1")], pools=[pool])
    assert d.command is None
    assert "budget" in notes(d, "d1")


def test_drift_respects_do_not_disrupt_without_termination_grace_period() -> None:
    d = decide([drifted("d1", 50.0)], [pod("a", "d1", annotations={DND: "true"})], pools=[NO_CONSOLIDATION])
    assert d.command is None
    assert d.records["d1"].verdict == "blocked"


def test_drift_with_termination_grace_period_takes_a_blocked_node() -> None:
    managed = [drifted("d1", 50.0, claim_overrides={"termination_grace_period": 3600.0})]
    d = decide(managed, [pod("a", "d1", annotations={DND: "true"})], pools=[NO_CONSOLIDATION])
    assert d.command is not None and d.command.reason == DRIFTED
    assert d.command.candidates == ("d1",)


def test_emptiness_runs_before_drift() -> None:
    managed = [drifted("d1", 50.0), b.managed_node("e1")]
    d = decide(managed, [pod("a", "d1")])
    assert d.command is not None and d.command.reason == EMPTY
    assert d.command.candidates == ("e1",)


# -- consolidation: delete, replace, no-op ------------------------------------------------------------


def test_consolidation_deletes_when_pods_fit_elsewhere() -> None:
    fixed = b.node("fixed", allocatable={"cpu": "8", "memory": "8Gi", "pods": "20"})
    d = decide([b.managed_node("n1", instance_type=LARGE)], [pod("a", "n1")], unmanaged=[fixed])
    assert d.command is not None
    assert (d.command.reason, d.command.decision) == (UNDERUTILIZED, "delete")
    assert d.command.candidates == ("n1",)
    assert d.command.savings_per_hour == pytest.approx(1.6)


def test_consolidation_replaces_with_one_cheaper_node() -> None:
    d = decide([b.managed_node("n1", instance_type=LARGE)], [pod("a", "n1")])
    assert d.command is not None
    assert (d.command.reason, d.command.decision, d.command.method) == (
        UNDERUTILIZED,
        "replace",
        "single-node consolidation",
    )
    assert set(option_names(d)) <= {"small", "medium"}
    assert "small" in option_names(d)
    assert d.command.savings_per_hour == pytest.approx(1.2)
    [replacement] = d.command.replacements
    assert [p.name for p in replacement.pods] == ["a"]


def test_on_demand_replacement_is_pinned_to_spot_when_the_pool_allows_both() -> None:
    d = decide([b.managed_node("n1", instance_type=LARGE, capacity_type="on-demand")], [pod("a", "n1")])
    assert d.command is not None
    [replacement] = d.command.replacements
    ct = replacement.requirements.get(wk.CAPACITY_TYPE)
    assert ct is not None and ct.has("spot") and not ct.has("on-demand")


def test_consolidation_no_op_when_not_cheaper() -> None:
    d = decide([b.managed_node("n1", instance_type=SMALL)], [pod("a", "n1", cpu="1500m")])
    assert d.command is None
    assert d.records["n1"].verdict == "candidate"
    assert "no replacement is cheaper" in notes(d, "n1")


def test_consolidation_that_needs_two_new_nodes_is_no_command() -> None:
    web = {"app": "web"}
    anti = [b.anti_affinity_term(web)]
    managed = [b.managed_node(n, instance_type=SMALL) for n in ("n1", "n2")]
    pods = [pod(f"web-{n}", n, labels=web, anti_affinity=anti) for n in ("n1", "n2")]
    s = snap(managed, pods)
    command, why = consolidation.compute(s, graceful(s), method="test")
    assert command is None
    assert why == "would need more than one new node"
    assert compute(s, NOW).command is None


def test_consolidation_strands_nothing() -> None:
    # n1's pod needs 7 cpu: only a large fits, and no type is cheaper than the large it is on.
    d = decide([b.managed_node("n1", instance_type=LARGE)], [pod("a", "n1", cpu="7")])
    assert d.command is None


def test_pod_that_fits_nowhere_blocks_the_delete() -> None:
    s = snap([b.managed_node("n1", instance_type=LARGE)], [pod("a", "n1", cpu="7")], types=[SMALL])
    command, why = consolidation.compute(s, graceful(s), method="test")
    assert command is None
    assert "would not all fit" in why


# -- multi-node -----------------------------------------------------------------------------------------


def test_multi_node_merges_three_into_one() -> None:
    managed = [b.managed_node(n, instance_type=LARGE) for n in ("n1", "n2", "n3")]
    d = decide(managed, [pod(f"p-{n}", n) for n in ("n1", "n2", "n3")])
    assert d.command is not None
    assert d.command.method == "multi-node consolidation"
    assert d.command.candidates == ("n1", "n2", "n3")
    assert option_names(d) == ["medium"]  # large is filtered out: not cheaper than a large removed
    assert d.command.savings_per_hour == pytest.approx(3 * 1.6 - 0.8)
    [replacement] = d.command.replacements
    assert sorted(p.name for p in replacement.pods) == ["p-n1", "p-n2", "p-n3"]


def test_multi_node_deletes_when_everything_fits_on_a_kept_node() -> None:
    managed = [b.managed_node(n, instance_type=LARGE) for n in ("n1", "n2", "keep")]
    pods = [pod("a", "n1"), pod("b", "n2"), pod("k", "keep", annotations={DND: "true"})]
    d = decide(managed, pods)
    assert d.command is not None
    assert d.command.candidates == ("n1", "n2")
    assert d.command.decision == "delete"


def test_multi_node_is_capped_by_the_underutilized_budget_in_savings_order() -> None:
    pool = b.disruption_pool(budgets=[b.budget("2", reasons=[UNDERUTILIZED])])
    managed = [
        b.managed_node("a-small", instance_type=SMALL),
        b.managed_node("z1", instance_type=LARGE),
        b.managed_node("z2", instance_type=LARGE),
    ]
    d = decide(managed, [pod(f"p-{n}", n) for n in ("a-small", "z1", "z2")], pools=[pool])
    assert d.command is not None and d.command.reason == UNDERUTILIZED
    assert d.command.candidates == ("z1", "z2")  # highest savings ratio first, not by name
    assert "budget" in notes(d, "a-small")


# -- spot-to-spot -------------------------------------------------------------------------------------


BIG = b.instance_type("big", cpu="8", memory="8Gi", price=2.0)


def cheap_types(count: int) -> list:
    return [b.instance_type(f"c{i:02d}", cpu="2", memory="2Gi", price=0.05 * (i + 1)) for i in range(count)]


def spot_node(name: str = "s1") -> tuple:
    return b.managed_node(name, instance_type=BIG, capacity_type="spot")


def test_spot_to_spot_disabled_by_default() -> None:
    d = decide([spot_node()], [pod("a", "s1")], types=[BIG, *cheap_types(20)])
    assert d.command is None
    assert "SpotToSpotConsolidation is disabled" in notes(d, "s1")


def test_spot_to_spot_enabled_launches_from_the_15_cheapest() -> None:
    d = decide([spot_node()], [pod("a", "s1")], types=[BIG, *cheap_types(20)], settings=SPOT_TO_SPOT)
    assert d.command is not None and d.command.decision == "replace"
    assert option_names(d) == [f"c{i:02d}" for i in range(15)]
    [replacement] = d.command.replacements
    ct = replacement.requirements.get(wk.CAPACITY_TYPE)
    assert ct is not None and ct.has("spot") and not ct.has("on-demand")


def test_spot_to_spot_needs_15_cheaper_options() -> None:
    d = decide([spot_node()], [pod("a", "s1")], types=[BIG, *cheap_types(14)], settings=SPOT_TO_SPOT)
    assert d.command is None
    assert "needs 15 cheaper spot options, found 14" in notes(d, "s1")


def test_spot_to_spot_delete_needs_no_gate() -> None:
    fixed = b.node("fixed", allocatable={"cpu": "8", "memory": "8Gi", "pods": "20"})
    d = decide([spot_node()], [pod("a", "s1")], types=[BIG], unmanaged=[fixed])
    assert d.command is not None and d.command.decision == "delete"


def test_multi_node_spot_to_spot_has_no_15_rule() -> None:
    managed = [spot_node("s1"), spot_node("s2")]
    d = decide(managed, [pod("a", "s1"), pod("b", "s2")], types=[BIG, *cheap_types(3)], settings=SPOT_TO_SPOT)
    assert d.command is not None
    assert d.command.method == "multi-node consolidation"
    assert d.command.candidates == ("s1", "s2")
    assert len(d.command.replacements) == 1


# -- consolidateAfter, policy ---------------------------------------------------------------------------


def test_consolidate_after_not_elapsed_blocks_emptiness_and_consolidation() -> None:
    pool = b.disruption_pool(consolidate_after=600.0)
    managed = [
        b.managed_node("n1", instance_type=LARGE, created=NOW - 300),
        b.managed_node("e1", created=NOW - 300),
    ]
    d = decide(managed, [pod("a", "n1")], pools=[pool])
    assert d.command is None
    assert "consolidateAfter has not elapsed" in notes(d, "n1")
    assert "consolidateAfter has not elapsed" in notes(d, "e1")


def test_consolidate_after_counts_from_the_last_pod_event() -> None:
    pool = b.disruption_pool(consolidate_after=600.0)
    recent = b.managed_node("n1", instance_type=LARGE, claim_overrides={"last_pod_event": NOW - 60})
    assert decide([recent], [pod("a", "n1")], pools=[pool]).command is None
    quiet = b.managed_node("n1", instance_type=LARGE, claim_overrides={"last_pod_event": NOW - 700})
    d = decide([quiet], [pod("a", "n1")], pools=[pool])
    assert d.command is not None and d.command.reason == UNDERUTILIZED


def test_consolidate_after_never_turns_off_emptiness_and_consolidation() -> None:
    managed = [b.managed_node("n1", instance_type=LARGE), b.managed_node("e1")]
    d = decide(managed, [pod("a", "n1")], pools=[NO_CONSOLIDATION])
    assert d.command is None
    assert "Never" in notes(d, "e1") and "Never" in notes(d, "n1")


def test_when_empty_policy_removes_empty_nodes_only() -> None:
    pool = b.disruption_pool(policy="WhenEmpty")
    managed = [b.managed_node("n1", instance_type=LARGE), b.managed_node("e1")]
    d = decide(managed, [pod("a", "n1")], pools=[pool])
    assert d.command is not None and d.command.reason == EMPTY
    assert d.command.candidates == ("e1",)
    d = decide([b.managed_node("n1", instance_type=LARGE)], [pod("a", "n1")], pools=[pool])
    assert d.command is None
    assert "consolidationPolicy WhenEmpty" in notes(d, "n1")


# -- the karpy churn guard ------------------------------------------------------------------------------


def guarded(**annotations: str) -> Any:
    return b.disruption_pool(meta_annotations=annotations)


def churn_nodes(event_age: float, *, busy_pool: str = "default") -> list:
    return [
        b.managed_node("n1", instance_type=LARGE),
        b.managed_node(
            "busy", pool=busy_pool, instance_type=SMALL, claim_overrides={"last_pod_event": NOW - event_age}
        ),
    ]


def churn_pods() -> list:
    return [pod("a", "n1"), pod("k", "busy", cpu="1500m", annotations={DND: "true"})]


def test_stabilization_skips_underutilized_after_a_recent_pod_event_in_the_pool() -> None:
    pool = guarded(**{STABILIZATION: "10m"})
    d = decide(churn_nodes(5 * MINUTE), churn_pods(), pools=[pool])
    assert d.command is None
    assert STABILIZATION in notes(d, "n1")


def test_stabilization_window_elapsed_allows_consolidation() -> None:
    pool = guarded(**{STABILIZATION: "10m"})
    d = decide(churn_nodes(15 * MINUTE), churn_pods(), pools=[pool])
    assert d.command is not None and d.command.reason == UNDERUTILIZED
    assert d.command.candidates == ("n1",)


def test_stabilization_is_off_by_default() -> None:
    d = decide(churn_nodes(5 * MINUTE), churn_pods())
    assert d.command is not None and d.command.reason == UNDERUTILIZED


def test_stabilization_ignores_pod_events_of_other_pools() -> None:
    pools = [guarded(**{STABILIZATION: "10m"}), b.disruption_pool("other")]
    d = decide(churn_nodes(5 * MINUTE, busy_pool="other"), churn_pods(), pools=pools)
    assert d.command is not None and d.command.candidates == ("n1",)


def test_stabilization_does_not_stop_emptiness() -> None:
    pool = guarded(**{STABILIZATION: "10m"})
    d = decide([*churn_nodes(MINUTE), b.managed_node("e1")], churn_pods(), pools=[pool])
    assert d.command is not None and d.command.reason == EMPTY
    assert d.command.candidates == ("e1",)


PRICEY = b.instance_type("pricey", cpu="4", memory="4Gi", price=1.0)
SLIGHTLY = b.instance_type("slightly", cpu="2", memory="2Gi", price=0.7)


@pytest.mark.parametrize(("floor", "replaced"), [(None, True), ("20%", True), ("50%", False), ("0.5", False)])
def test_min_savings_refuses_small_replacements(floor: str | None, replaced: bool) -> None:
    pool = guarded(**({} if floor is None else {"karpy.sh/min-savings": floor}))
    d = decide(
        [b.managed_node("n1", instance_type=PRICEY)], [pod("a", "n1")], pools=[pool], types=[PRICEY, SLIGHTLY]
    )
    if replaced:
        assert d.command is not None and d.command.decision == "replace"
        assert d.command.savings_per_hour == pytest.approx(0.3)
    else:
        assert d.command is None
        assert "below karpy.sh/min-savings" in notes(d, "n1")


def test_min_savings_does_not_refuse_a_delete() -> None:
    pool = guarded(**{"karpy.sh/min-savings": "50%"})
    fixed = b.node("fixed", allocatable={"cpu": "8", "memory": "8Gi", "pods": "20"})
    d = decide(
        [b.managed_node("n1", instance_type=PRICEY)],
        [pod("a", "n1")],
        pools=[pool],
        types=[PRICEY, SLIGHTLY],
        unmanaged=[fixed],
    )
    assert d.command is not None and d.command.decision == "delete"


# -- Balanced -------------------------------------------------------------------------------------------


def test_balanced_rejects_a_low_savings_high_disruption_move() -> None:
    balanced = b.disruption_pool(policy="Balanced")
    args = ([b.managed_node("n1", instance_type=PRICEY)], [pod("a", "n1")])
    d = decide(*args, pools=[balanced], types=[PRICEY, SLIGHTLY])
    assert d.command is None
    assert "Balanced score 0.30 < 0.50" in notes(d, "n1")
    d = decide(*args, types=[PRICEY, SLIGHTLY])  # WhenEmptyOrUnderutilized takes the same move
    assert d.command is not None and d.command.decision == "replace"


def test_balanced_accepts_a_high_savings_move() -> None:
    cheap = b.instance_type("cheap", cpu="2", memory="2Gi", price=0.2)
    d = decide(
        [b.managed_node("n1", instance_type=PRICEY)],
        [pod("a", "n1")],
        pools=[b.disruption_pool(policy="Balanced")],
        types=[PRICEY, cheap],
    )
    assert d.command is not None and d.command.decision == "replace"
    assert d.command.savings_per_hour == pytest.approx(0.8)


# -- records --------------------------------------------------------------------------------------------


def test_every_node_has_a_record_and_blocked_nodes_name_why() -> None:
    pools = [b.disruption_pool(), b.disruption_pool("frozen", budgets=[b.budget("0")])]
    managed = [
        b.managed_node("empty", instance_type=SMALL),
        b.managed_node("frozen-empty", pool="frozen"),
        b.managed_node("pdb", instance_type=LARGE),
        b.managed_node("dnd-pod", instance_type=LARGE),
        b.managed_node("dnd-node", instance_type=LARGE, node_annotations={DND: "true"}),
        b.managed_node("booting", initialized=False),
        b.managed_node("leaving", claim_overrides={"deleting": True}),
    ]
    pods = [
        pod("ledger", "pdb", labels={"app": "ledger"}),
        pod("batch", "dnd-pod", annotations={DND: "true"}),
        pod("x", "dnd-node"),
    ]
    pdb = b.pdb("ledger", namespace="default", match_labels={"app": "ledger"}, min_available=1)
    s = snap(managed, pods, pools=pools, pdbs=[pdb], unmanaged=[b.node("byo")])
    d = compute(s, NOW)
    assert set(d.records) == {n.name for n in s.nodes}
    assert d.command is not None and d.command.candidates == ("empty",)
    verdicts = {name: r.verdict for name, r in d.records.items()}
    assert verdicts == {
        "empty": "disrupted",
        "frozen-empty": "candidate",
        "pdb": "blocked",
        "dnd-pod": "blocked",
        "dnd-node": "blocked",
        "booting": "blocked",
        "leaving": "blocked",
        "byo": "not-managed",
    }
    assert "PDB default/ledger" in notes(d, "pdb")
    assert "default/batch" in notes(d, "dnd-pod") and DND in notes(d, "dnd-pod")
    assert "node annotated" in notes(d, "dnd-node")
    assert "budget" in notes(d, "frozen-empty")
    assert "not initialized" in notes(d, "booting")
    assert "already being deleted" in notes(d, "leaving")
    assert all(r.reasons for r in d.records.values())
    assert {r.node_pool for name, r in d.records.items() if name != "byo"} == {"default", "frozen"}


def test_budgets_of_the_pass_are_reported() -> None:
    pool = b.disruption_pool(budgets=[b.budget("1")])
    d = decide([b.managed_node("e1"), b.managed_node("e2")], pools=[pool])
    assert d.budgets == {"default": {EMPTY: 1}}


def test_compute_is_deterministic() -> None:
    managed = [b.managed_node(n, instance_type=LARGE) for n in ("n1", "n2", "n3")]
    s = snap(managed, [pod(f"p-{n}", n) for n in ("n1", "n2", "n3")])
    assert compute(s, NOW) == compute(s, NOW)


def test_compute_uses_its_now_argument_in_the_consolidation_simulation() -> None:
    # compute(snapshot, now) must decide at `now`: whether a node is still inside its
    # consolidateAfter window (so pods may not be moved onto it) has to be judged at `now` too,
    # not at `snapshot.now`.
    pool = b.disruption_pool(consolidate_after=300.0)
    managed = [b.managed_node("n1", instance_type=LARGE), b.managed_node("keep", instance_type=LARGE)]
    pods = [pod("a", "n1"), pod("k", "keep", annotations={DND: "true"})]
    at_now = compute(snap(managed, pods, pools=[pool], now=NOW), NOW)
    stale = compute(snap(managed, pods, pools=[pool], now=0.0), NOW)
    assert at_now.command is not None and at_now.command.decision == "delete"
    assert stale.command == at_now.command


# -- settled methods and skipping (upstream's markConsolidated / IsConsolidated) ---------------------

CONSOLIDATION = {MULTI_NODE, SINGLE_NODE}


def test_consolidation_methods_that_found_nothing_are_settled() -> None:
    # one busy node: too few for multi-node, no cheaper type for single-node
    d = decide([b.managed_node("busy")], [pod("a", "busy", cpu="3")])
    assert d.command is None and d.settled == CONSOLIDATION  # emptiness had no candidate


def test_a_method_without_any_candidate_is_never_settled() -> None:
    pool = b.disruption_pool(consolidate_after=None)  # Never: no candidate for any method
    d = decide([b.managed_node("busy")], [pod("a", "busy", cpu="3")], pools=[pool])
    assert d.command is None and d.settled == frozenset()


def test_a_budget_holding_a_candidate_back_keeps_the_method_unsettled() -> None:
    pool = b.disruption_pool(budgets=[b.budget("0", reasons=[UNDERUTILIZED]), b.budget("100%")])
    d = decide([b.managed_node("busy")], [pod("a", "busy", cpu="3")], pools=[pool])
    assert d.command is None and d.settled == frozenset()
    # multi-node's budget cut: more candidates than the budget allows
    pool = b.disruption_pool(budgets=[b.budget("1")])
    managed = [b.managed_node(n) for n in ("n1", "n2")]
    pods = [pod("a", "n1", cpu="3"), pod("b", "n2", cpu="3")]
    d = decide(managed, pods, pools=[pool])
    assert d.command is None and d.settled == {SINGLE_NODE}


def test_an_empty_candidate_is_chosen_or_held_back_so_emptiness_never_settles() -> None:
    d = decide([b.managed_node("empty")])
    assert d.command is not None and d.command.method == EMPTINESS and d.settled == frozenset()
    pool = b.disruption_pool(budgets=[b.budget("0", reasons=[EMPTY]), b.budget("100%")])
    d = decide([b.managed_node("empty")], pools=[pool])
    assert EMPTINESS not in d.settled
    assert d.settled == CONSOLIDATION  # an empty node is their candidate too, left to emptiness


def test_skipped_methods_do_not_run() -> None:
    managed = [b.managed_node(n, instance_type=LARGE) for n in ("a", "b")]
    pods = [pod("x", "a", cpu="1"), pod("y", "b", cpu="1")]
    assert decide(managed, pods).command is not None  # multi-node deletes both for one small node
    s = snap(managed, pods)
    d = compute(s, s.now, skip=frozenset({MULTI_NODE}))
    assert d.command is not None and d.command.method == SINGLE_NODE
    d = compute(s, s.now, skip=frozenset(CONSOLIDATION))
    assert d.command is None and d.settled == frozenset()
    assert "not consolidated" not in notes(d, "a")


def test_the_memo_keeps_a_pass_per_skip() -> None:
    managed = [b.managed_node(n, instance_type=LARGE) for n in ("a", "b")]
    s = snap(managed, [pod("x", "a", cpu="1"), pod("y", "b", cpu="1")])
    memo = Memo()
    first = compute(s, s.now, memo=memo)
    skipped = compute(s, s.now, memo=memo, skip=frozenset(CONSOLIDATION))
    assert first.command is not None and skipped.command is None
    assert compute(s, s.now, memo=memo, skip=frozenset(CONSOLIDATION)) is skipped
