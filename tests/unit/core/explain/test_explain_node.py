"""``explain_node``: each disruption method's verdict for one node, the blocker behind it and
its detail, computed by the pass ``karpy disrupt`` runs."""

from __future__ import annotations

from typing import Any

import pytest

import builders as b
from karpy.core import disruption
from karpy.core.disruption import drift
from karpy.core.explain.node import (
    BLOCKERS,
    METHODS,
    REASONS,
    MethodVerdict,
    NodeExplanation,
    NodeNotFound,
    explain_node,
    iso,
    reason_class,
    span,
)
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.nodeclass import AMI, EC2NodeClass, EC2NodeClassStatus
from karpy.model.objects import Condition, NodeClassRef

NOW = 1_000_000.0
HOUR = 3600.0
SMALL = b.instance_type("small", cpu="2", memory="2Gi")  # 0.4/h
MEDIUM = b.instance_type("medium", cpu="4", memory="4Gi")  # 0.8/h
LARGE = b.instance_type("large", cpu="8", memory="8Gi")  # 1.6/h
TYPES = [SMALL, MEDIUM, LARGE]
DND = wk.DO_NOT_DISRUPT


def snap(managed: list[Any], pods: list[Any] | None = None, **kwargs: Any) -> Snapshot:
    pools = kwargs.pop("pools", None) or [b.disruption_pool()]
    s: Snapshot = b.managed_snapshot(
        pools=pools, types=TYPES, managed=managed, pods=pods or [], now=NOW, **kwargs
    )
    return s


def pod(name: str, node: str, cpu: str = "1", **kwargs: Any) -> Any:
    return b.running_pod(name, node, cpu=cpu, **kwargs)


def by_method(exp: NodeExplanation) -> dict[str, MethodVerdict]:
    assert tuple(m.method for m in exp.methods) == METHODS
    return {m.method: m for m in exp.methods}


def verdicts(exp: NodeExplanation) -> dict[str, tuple[str, str]]:
    return {m.method: (m.verdict, m.reason) for m in exp.methods}


def old(name: str, **kwargs: Any) -> Any:
    """A node created (and initialized) an hour before NOW."""
    return b.managed_node(name, created=NOW - HOUR, **kwargs)


# --- the node and the pass -----------------------------------------------------------------------


def test_a_node_is_found_by_its_node_claim_name_and_a_missing_one_lists_nearby_names() -> None:
    s = snap([old("node-a"), old("node-b")])
    assert explain_node(s, "node-a-claim").node == "node-a"
    with pytest.raises(NodeNotFound) as caught:
        explain_node(s, "node-c")
    assert caught.value.total == 2
    assert "node-a" in caught.value.nearby and "node-c" in str(caught.value)


def test_the_explanation_carries_the_pass_s_command_and_record_as_karpy_disrupt_prints_them() -> None:
    s = snap([old("empty"), old("busy")], [pod("p", "busy")])
    decision = disruption.compute(s, NOW)
    exp = explain_node(s, "busy")
    assert exp.command == decision.command
    assert exp.pass_reasons == decision.records["busy"].reasons
    assert exp.verdict == decision.records["busy"].verdict == "candidate"
    assert (exp.instance_type, exp.zone, exp.capacity_type, exp.price) == (
        "small",
        b.ZONES[0],
        "on-demand",
        0.4,
    )
    assert exp.pods == ("default/p",) and exp.node_claim == "busy-claim"


def test_now_overrides_the_snapshot_s_time() -> None:
    pool = b.disruption_pool(consolidate_after=2 * HOUR)
    s = snap([old("empty")], pools=[pool])
    assert by_method(explain_node(s, "empty"))["emptiness"].verdict == "blocked"
    later = explain_node(s, "empty", now=NOW + 2 * HOUR)
    assert by_method(later)["emptiness"].verdict == "disrupted" and later.now == NOW + 2 * HOUR


# --- expiration ----------------------------------------------------------------------------------


def test_expired_node_is_disrupted_by_expiration_regardless_of_do_not_disrupt() -> None:
    pool = b.disruption_pool(expire_after=HOUR / 2)
    s = snap([old("old")], [pod("batch", "old", annotations={DND: "true"})], pools=[pool])
    exp = explain_node(s, "old")
    m = by_method(exp)["expiration"]
    assert (m.verdict, m.reason) == ("disrupted", "expired")
    assert m.detail["expiresAt"] == iso(NOW - HOUR / 2) and m.detail["expireAfterFrom"] == "NodePool"
    assert m.action is not None and m.action.decision == "delete" and m.action.nodes == ("old",)
    assert exp.reason == "expired" and exp.summary.startswith("disrupted this pass by expiration")


def test_a_node_not_expired_says_when_it_expires_and_how_long_until_then() -> None:
    pool = b.disruption_pool(expire_after=2 * HOUR)
    m = by_method(explain_node(snap([old("young")], pools=[pool]), "young"))["expiration"]
    assert (m.verdict, m.reason) == ("not-candidate", "not-expired")
    assert m.message == f"not expired: expires at {iso(NOW + HOUR)} (in 1h)"
    assert m.detail["secondsLeft"] == HOUR and m.detail["expireAfterSeconds"] == 2 * HOUR


def test_expire_after_never() -> None:
    pool = b.disruption_pool(expire_after=None)
    m = by_method(explain_node(snap([old("a")], pools=[pool]), "a"))["expiration"]
    assert m.message == "not expired: expireAfter is Never" and m.detail["expiresAt"] is None


# --- emptiness -----------------------------------------------------------------------------------


def test_empty_node_is_deleted_by_emptiness_with_its_price_as_the_saving() -> None:
    exp = explain_node(snap([old("empty")]), "empty")
    m = by_method(exp)["emptiness"]
    assert (m.verdict, m.reason) == ("disrupted", "empty")
    assert m.action is not None and m.action.replacements == ()
    assert m.action.savings == pytest.approx(0.4) and m.action.removed_price == pytest.approx(0.4)
    assert by_method(exp)["single-node consolidation"].reason == "empty"  # left to emptiness


def test_emptiness_blocked_by_consolidate_after_names_when_the_window_ends() -> None:
    pool = b.disruption_pool(consolidate_after=2 * HOUR)
    m = by_method(explain_node(snap([old("empty")], pools=[pool]), "empty"))["emptiness"]
    assert (m.verdict, m.reason) == ("blocked", "consolidate-after")
    window = m.detail["consolidateAfter"]
    assert window == {
        "seconds": 2 * HOUR,
        "since": iso(NOW - HOUR),
        "endsAt": iso(NOW + HOUR),
        "remainingSeconds": HOUR,
    }


def test_emptiness_blocked_by_a_scheduled_budget_names_its_window_and_what_it_leaves() -> None:
    # NOW is 1970-01-12T13:46:40Z: a daily window from 13:00 for 2h is in force
    budget = b.budget("0", schedule="0 13 * * *", duration=2 * HOUR, reasons=["Empty"])
    pool = b.disruption_pool(budgets=[b.budget("100%"), budget])
    m = by_method(explain_node(snap([old("empty")], pools=[pool]), "empty"))["emptiness"]
    assert (m.verdict, m.reason) == ("blocked", "budget")
    assert m.message.startswith("empty, but the Empty budget allows no more (budget[1] nodes=0")
    detail = m.detail["budget"]
    assert isinstance(detail, dict)
    assert (detail["reason"], detail["allowedNow"], detail["nodes"]) == ("Empty", 0, 1)
    rows = {row["index"]: row for row in detail["budgets"]}
    assert rows[0]["schedule"] is None and rows[0]["allows"] == 1 and rows[0]["active"] is True
    assert rows[1]["active"] is True and rows[1]["allows"] == 0
    assert (rows[1]["windowStart"], rows[1]["windowEnd"]) == ("1970-01-12T13:00:00Z", "1970-01-12T15:00:00Z")


def test_a_budget_outside_its_window_names_the_next_one() -> None:
    budget = b.budget("0", schedule="0 20 * * *", duration=HOUR)
    pool = b.disruption_pool(budgets=[budget])
    m = by_method(explain_node(snap([old("empty")], pools=[pool]), "empty"))["emptiness"]
    row = m.detail["budget"]["budgets"][0]  # type: ignore[index]
    assert m.verdict == "disrupted" and row["active"] is False
    assert (row["windowStart"], row["windowEnd"]) == ("1970-01-12T20:00:00Z", "1970-01-12T21:00:00Z")


def test_a_busy_node_is_not_empty() -> None:
    m = by_method(explain_node(snap([old("a")], [pod("p", "a")]), "a"))["emptiness"]
    assert (m.verdict, m.reason) == ("not-candidate", "not-empty")
    assert m.detail["reschedulablePods"] == ["default/p"]


# --- do-not-disrupt, PDBs and the node's own state -----------------------------------------------


def test_do_not_disrupt_pods_block_consolidation_and_drift_and_are_all_named() -> None:
    claim = {wk.DO_NOT_DISRUPT: "x"}  # (not the node annotation)
    drifted = [Condition("Drifted", "True", "AMIDrift")]
    managed = [old("a", claim_conditions=drifted, claim_annotations=claim), old("b")]
    pods = [
        pod("batch", "a", annotations={DND: "true"}),
        pod("report", "a", annotations={DND: "2h"}, started=NOW - HOUR),
        pod("web", "a"),
    ]
    exp = explain_node(snap(managed, pods), "a")
    found = verdicts(exp)
    assert found["drift"] == ("blocked", "do-not-disrupt")
    assert (
        found["multi-node consolidation"]
        == found["single-node consolidation"]
        == ("blocked", "do-not-disrupt")
    )
    m = by_method(exp)["single-node consolidation"]
    assert m.message == "pod default/batch has karpenter.sh/do-not-disrupt=true"
    assert m.detail["doNotDisruptPods"] == [
        {"pod": "default/batch", "value": "true", "until": None},
        {"pod": "default/report", "value": "2h", "until": iso(NOW + HOUR)},
    ]
    assert exp.blockers == ("do-not-disrupt",) and exp.verdict == "blocked"
    assert "blocks drift, multi-node consolidation, single-node consolidation" in exp.summary


def test_a_node_annotated_do_not_disrupt_blocks_emptiness() -> None:
    exp = explain_node(snap([old("a", node_annotations={DND: "true"})]), "a")
    m = by_method(exp)["emptiness"]
    assert (m.verdict, m.reason) == ("blocked", "do-not-disrupt") and m.detail["nodeAnnotated"] is True


def test_a_blocking_pdb_is_named_with_the_pods_it_protects() -> None:
    pods = [pod("ledger-0", "a", labels={"app": "ledger"}), pod("web", "a")]
    pdb = b.pdb("ledger", namespace="default", match_labels={"app": "ledger"}, disruptions_allowed=0)
    exp = explain_node(snap([old("a"), old("b")], pods, pdbs=[pdb]), "a")
    m = by_method(exp)["multi-node consolidation"]
    assert (m.verdict, m.reason) == ("blocked", "pdb")
    assert m.message == "PDB default/ledger allows no disruption of pod default/ledger-0"
    assert m.detail["pdbs"] == [{"pdb": "default/ledger", "pods": ["default/ledger-0"]}]


@pytest.mark.parametrize(
    ("kwargs", "reason", "verdict"),
    [
        ({"managed": [old("a", initialized=False)]}, "not-initialized", "blocked"),
        ({"managed": [old("a")], "nominated": ["a"]}, "nominated", "blocked"),
        ({"managed": [old("a")], "marked_for_deletion": ["a"]}, "deleting", "not-candidate"),
    ],
)
def test_the_node_s_own_state_stops_graceful_methods(
    kwargs: dict[str, Any], reason: str, verdict: str
) -> None:
    managed = kwargs.pop("managed")
    exp = explain_node(snap(managed, [pod("p", "a")], **kwargs), "a")
    assert verdicts(exp)["single-node consolidation"] == (verdict, reason)
    assert exp.state[{"not-initialized": "initialized"}.get(reason, reason)] is (reason != "not-initialized")


def test_a_node_without_a_node_claim_is_not_managed() -> None:
    s = b.managed_snapshot(pools=[b.disruption_pool()], types=TYPES, unmanaged=[b.node("bare")], now=NOW)
    exp = explain_node(s, "bare")
    assert {m.reason for m in exp.methods} == {"not-managed"}
    assert exp.verdict == "not-managed" and exp.node_claim == ""


# --- consolidation -------------------------------------------------------------------------------


def test_when_empty_policy_blocks_consolidation() -> None:
    pool = b.disruption_pool(policy="WhenEmpty")
    exp = explain_node(snap([old("a"), old("b")], [pod("p", "a")], pools=[pool]), "a")
    m = by_method(exp)["single-node consolidation"]
    assert (m.verdict, m.reason) == ("blocked", "policy")
    assert m.detail["consolidationPolicy"] == "WhenEmpty"
    assert m.message == "not consolidatable: consolidationPolicy WhenEmpty"


def test_an_underutilized_budget_of_zero_blocks_both_consolidation_methods() -> None:
    pool = b.disruption_pool(budgets=[b.budget("0", reasons=["Underutilized"]), b.budget("100%")])
    exp = explain_node(snap([old("a"), old("b")], [pod("p", "a")], pools=[pool]), "a")
    found = verdicts(exp)
    assert found["multi-node consolidation"] == found["single-node consolidation"] == ("blocked", "budget")
    assert by_method(exp)["single-node consolidation"].detail["budget"]["allowedNow"] == 0  # type: ignore[index]


def test_single_node_replace_names_the_replacement_and_the_price_difference() -> None:
    managed = [old("big", instance_type="large")]
    exp = explain_node(snap(managed, [pod("p", "big")]), "big", catalog_order=["small", "medium", "large"])
    m = by_method(exp)["single-node consolidation"]
    assert (m.verdict, m.reason) == ("disrupted", "underutilized")
    assert m.action is not None and m.action.decision == "replace"
    [r] = m.action.replacements
    assert (r.instance_type, r.capacity_type) == ("small", "spot") and r.price == pytest.approx(0.4)
    assert "small" in r.instance_types and r.pods == 1
    assert m.action.removed_price == pytest.approx(1.6) and m.action.launched_price == pytest.approx(0.4)
    assert m.action.savings == pytest.approx(1.2)


def test_a_candidate_preempted_by_another_node_says_what_acts_first() -> None:
    s = snap([old("empty"), old("busy")], [pod("p", "busy")], unmanaged=[b.node("dest")])
    exp = explain_node(s, "busy")
    assert (
        exp.command is not None and exp.command.method == "emptiness" and exp.command.candidates == ("empty",)
    )
    m = by_method(exp)["single-node consolidation"]
    assert (m.verdict, m.reason) == ("candidate", "underutilized")
    assert m.detail["preemptedBy"] == {"method": "emptiness", "decision": "delete", "nodes": ["empty"]}
    assert m.action is not None and m.action.nodes == ("busy",) and m.action.decision == "delete"
    assert exp.reason == "underutilized" and exp.blockers == ()
    assert exp.summary.endswith(
        "single-node consolidation would take it, but emptiness acts first (delete empty)"
    )


def test_a_node_outside_the_multi_node_budget_is_blocked_there_and_a_candidate_for_single_node() -> None:
    managed = [old("a"), old("b"), old("c")]
    pods = [pod("pa", "a"), pod("pb", "b"), pod("pc", "c")]
    s = snap(managed, pods, pools=[b.disruption_pool(budgets=[b.budget("1")])])
    cmd = disruption.compute(s, NOW).command
    assert cmd is not None and len(cmd.candidates) == 1
    other = next(n for n in ("a", "b", "c") if n not in cmd.candidates)
    found = verdicts(explain_node(s, other))
    assert found["multi-node consolidation"] == ("blocked", "budget")
    assert found["single-node consolidation"] == ("candidate", "underutilized")


def test_no_cheaper_replacement_is_no_savings_and_names_destinations_inside_their_window() -> None:
    pool = b.disruption_pool(consolidate_after=HOUR / 2)
    managed = [old("a"), b.managed_node("fresh", created=NOW - 60)]
    exp = explain_node(snap(managed, [pod("p", "a", cpu="2")], pools=[pool]), "a")
    m = by_method(exp)["single-node consolidation"]
    assert (m.verdict, m.reason) == ("not-candidate", "no-savings")
    assert m.detail["destinationsExcluded"] == [
        {"node": "fresh", "why": f"inside its consolidateAfter window until {iso(NOW - 60 + HOUR / 2)}"}
    ]


def test_stabilization_window_blocks_consolidation() -> None:
    pool = b.disruption_pool(meta_annotations={"karpy.sh/consolidation-stabilization": "10m"})
    managed = [old("a", claim_overrides={"last_pod_event": NOW - 60}), old("b")]
    exp = explain_node(snap(managed, [pod("p", "a")], pools=[pool]), "a")
    assert verdicts(exp)["single-node consolidation"] == ("blocked", "stabilization")


# --- drift ---------------------------------------------------------------------------------------


def test_nodepool_hash_drift_names_both_hashes() -> None:
    pool = b.disruption_pool()
    stamped = {drift.HASH_ANNOTATION: "123", drift.HASH_VERSION_ANNOTATION: drift.HASH_VERSION}
    exp = explain_node(snap([old("a", claim_annotations=stamped)], [pod("p", "a")], pools=[pool]), "a")
    m = by_method(exp)["drift"]
    assert (m.verdict, m.reason) == ("disrupted", "drifted")
    assert m.detail["drift"] == {
        "kind": "nodepool-hash",
        "nodeClaimHash": "123",
        "nodePoolHash": drift.pool_hash(pool),
        "hashVersion": drift.HASH_VERSION,
    }
    assert m.action is not None and m.action.decision == "replace"


def test_ami_drift_names_the_node_s_image_and_the_amis_its_node_class_resolves() -> None:
    ref = NodeClassRef("karpenter.k8s.aws", "EC2NodeClass", "default")
    cond = Condition("Drifted", "True", "AMIDrift", "drifted: AMIDrift", last_transition=NOW - 60)
    a = old("a", claim_conditions=[cond], claim_overrides={"image_id": "ami-old", "node_class_ref": ref})
    nc = EC2NodeClass("default", status=EC2NodeClassStatus(amis=(AMI("ami-new"),)))
    m = by_method(explain_node(snap([a], [pod("p", "a")]), "a", node_classes=[nc]))["drift"]
    assert m.reason == "drifted" and m.message == "drifted: Drifted condition (AMIDrift)"
    d = m.detail["drift"]
    assert isinstance(d, dict)
    assert (d["kind"], d["field"], d["imageID"], d["nodeClassAMIs"]) == (
        "condition",
        "ami",
        "ami-old",
        ["ami-new"],
    )
    assert d["since"] == iso(NOW - 60)


def test_requirement_drift_names_the_requirement_no_longer_met() -> None:
    pool = b.disruption_pool(requirements=[(wk.ZONE, "In", [b.ZONES[1]])])
    m = by_method(explain_node(snap([old("a")], [pod("p", "a")], pools=[pool]), "a"))["drift"]
    d = m.detail["drift"]
    assert isinstance(d, dict)
    assert m.reason == "drifted" and d["kind"] == "requirements"
    assert d["conflicts"] and all(wk.ZONE in c for c in d["conflicts"])


def test_drift_blocked_by_its_budget() -> None:
    pool = b.disruption_pool(budgets=[b.budget("0", reasons=["Drifted"]), b.budget("100%")])
    a = old("a", claim_conditions=[Condition("Drifted", "True", "AMIDrift")])
    m = by_method(explain_node(snap([a], [pod("p", "a")], pools=[pool]), "a"))["drift"]
    assert (m.verdict, m.reason) == ("blocked", "budget")
    assert m.message.startswith("drift blocked by budget")


def test_not_drifted() -> None:
    m = by_method(explain_node(snap([old("a")]), "a"))["drift"]
    assert (m.verdict, m.reason) == ("not-candidate", "not-drifted") and m.detail["drift"]["kind"] is None  # type: ignore[index]


# --- the vocabulary ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "cls"),
    [
        ("not consolidated: would need a new node, and SpotToSpotConsolidation is disabled", "spot-to-spot"),
        ("not consolidated: would need 2 new nodes", "too-many-nodes"),
        ("not consolidated: saves 5%, below karpy.sh/min-savings 10%", "no-savings"),
        ("pod default/x is selected by several PDBs (default/a, default/b)", "pdb"),
        ("NodePool 'gone' not found", "no-nodepool"),
        ("something new", "other"),
    ],
)
def test_reason_class(message: str, cls: str) -> None:
    assert reason_class(message) == cls


def test_blockers_are_reasons_and_durations_read_well() -> None:
    assert set(BLOCKERS) < set(REASONS) and len(set(REASONS)) == len(REASONS)
    assert (span(0), span(90), span(29 * 86400 + 18 * 3600 + 5)) == ("0s", "1m 30s", "29d 18h")
