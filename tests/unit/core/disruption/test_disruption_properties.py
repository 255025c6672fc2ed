"""Hypothesis properties of one disruption pass (``karpy.core.disruption.compute``).

Random small clusters: a generated catalog (2-4 types), one or two NodePools (policy,
consolidateAfter elapsed or not, budgets as counts or percents, some scoped to reasons,
some scheduled and active or inactive), 2-6 managed nodes (some drifted, some with a
terminationGracePeriod, a few uninitialized or annotated do-not-disrupt), bound pods with
requests, owners (ReplicaSet, DaemonSet, none), do-not-disrupt annotations (``true`` or a
duration that may have expired) and PDBs allowing 0 or 1 disruption, and sometimes an
unmanaged node with room. For graceful commands (Empty, Underutilized, Drifted without
terminationGracePeriod) no disrupted node holds an active do-not-disrupt pod or a PDB-blocked
pod; no command exceeds a pool's active budget for its reason; every reschedulable pod of
the disrupted nodes has a place (re-simulated on the snapshot minus the disrupted nodes) and
the number of new NodeClaims equals the command's replacements; the decision is
deterministic.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import builders as b
from karpy import settings as settings_mod
from karpy.core.disruption import DRIFTED, EMPTY, EXPIRED, UNDERUTILIZED, Candidate, compute, consolidation
from karpy.core.disruption import candidates as cand
from karpy.core.disruption.pdbs import Limits
from karpy.core.snapshot import Snapshot
from karpy.model import labels as wk
from karpy.model.objects import Condition, NodePool

NOW = 1_000_000.0  # 1970-01-12T13:46:40Z
HOUR = 3600.0
APPS = ("a", "b", "c")
CAPACITY_TYPES = ("spot", "on-demand")
SIZES = (("2", "2Gi"), ("4", "4Gi"), ("8", "8Gi"))
ALWAYS = ("@daily", 48 * HOUR)  # overlapping windows: active at every instant
NEVER_NOW = ("0 0 1 1 *", HOUR)  # 1 January 00:00-01:00: inactive at NOW
BIG = b.instance_type("big", cpu="8", memory="8Gi")  # 1.6/h
TINY = b.instance_type("tiny", cpu="4", memory="4Gi", price=0.2)

PROPERTY_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Scenario:
    snapshot: Snapshot

    @property
    def pools(self) -> dict[str, NodePool]:
        return {p.name: p for p in self.snapshot.node_pools}


@st.composite
def budgets_(draw: st.DrawFn) -> Any:
    nodes = draw(st.sampled_from(["100%", "2", "50%", "1", "0", "3", "34%", "0%"]))
    reasons = draw(st.sampled_from([(), (), (EMPTY,), (UNDERUTILIZED,), (DRIFTED,), (EMPTY, UNDERUTILIZED)]))
    window = draw(st.sampled_from([None, None, ALWAYS, NEVER_NOW]))
    if window is None:
        return b.budget(nodes, reasons=reasons)
    return b.budget(nodes, schedule=window[0], duration=window[1], reasons=reasons)


@st.composite
def scenarios(draw: st.DrawFn, focus: str = "mixed") -> Scenario:
    # "consolidation" and "replace" scenarios have no drift and no empty nodes, so Underutilized
    # gets exercised; "replace" puts every node on a big type next to a much cheaper small one.
    busy = focus != "mixed"
    types = []
    for i in range(draw(st.integers(2, 4))):
        cpu, memory = draw(st.sampled_from(SIZES))
        factor = draw(st.sampled_from([0.8, 1.0, 1.25]))
        types.append(
            b.instance_type(f"t{i}", cpu=cpu, memory=memory, price=b.default_price(cpu, memory) * factor)
        )
    if focus == "replace":
        types += [BIG, TINY]
    pools = []
    for i in range(draw(st.integers(1, 2))):
        pools.append(
            b.disruption_pool(
                f"p{i}",
                policy=draw(
                    st.sampled_from(
                        ["WhenEmptyOrUnderutilized", "Balanced"] + ([] if busy else ["WhenEmpty"])
                    )
                ),
                consolidate_after=draw(st.sampled_from([0.0, 600.0])),
                budgets=draw(st.lists(budgets_(), min_size=1, max_size=2)),
            )
        )
    managed = []
    pods = []
    for i in range(draw(st.integers(2, 3) if focus == "replace" else st.integers(2, 6))):
        name = f"n{i}"
        it = BIG if focus == "replace" else draw(st.sampled_from(types))
        initialized = draw(st.integers(0, 9)) < 9
        conditions = ()
        if not busy and draw(st.integers(0, 4)) == 4:
            since = draw(st.sampled_from([10.0, 20.0, 30.0]))
            conditions = (Condition("Drifted", "True", reason="NodePoolDrifted", last_transition=since),)
        claim_overrides: dict[str, Any] = {
            "last_pod_event": draw(st.sampled_from([None, NOW - 60, NOW - HOUR])),
        }
        if draw(st.integers(0, 4)) == 4:
            claim_overrides["termination_grace_period"] = 600.0
        node_annotations = {wk.DO_NOT_DISRUPT: "true"} if draw(st.integers(0, 7)) == 7 else {}
        managed.append(
            b.managed_node(
                name,
                pool=draw(st.sampled_from([p.name for p in pools])),
                instance_type=it,
                zone=draw(st.sampled_from(b.ZONES)),
                capacity_type=draw(
                    st.sampled_from(CAPACITY_TYPES[::-1] if focus == "replace" else CAPACITY_TYPES)
                ),
                initialized=initialized,
                claim_conditions=conditions,
                claim_overrides=claim_overrides,
                node_annotations=node_annotations,
            )
        )
        if not initialized:
            continue
        free = int(it.allocatable.get("cpu") * 1000)
        counts = {"mixed": [1, 2, 3, 0], "consolidation": [1, 2, 3], "replace": [3]}[focus]
        for j in range(draw(st.sampled_from(counts))):
            milli = draw(
                st.sampled_from([2000, 1500, 1000] if focus == "replace" else [500, 1000, 1500, 250])
            )
            if milli > free:
                break
            free -= milli
            dnd = draw(st.sampled_from([None, None, None, None, None, None, "true", "5m"]))
            pods.append(
                b.running_pod(
                    f"{name}-pod{j}",
                    name,
                    cpu=f"{milli}m",
                    memory="128Mi",
                    labels={"app": draw(st.sampled_from(APPS))},
                    owner_kind=draw(
                        st.sampled_from(["ReplicaSet", "ReplicaSet", None] + ([] if busy else ["DaemonSet"]))
                    ),
                    annotations={} if dnd is None else {wk.DO_NOT_DISRUPT: dnd},
                    started=draw(st.sampled_from([NOW - 60, NOW - HOUR])),
                )
            )
    pdbs = []
    for app in APPS[:2]:
        allowed = draw(st.sampled_from([None, 0, 1]))
        if allowed is not None:
            pdbs.append(b.pdb(f"pdb-{app}", match_labels={"app": app}, disruptions_allowed=allowed))
    unmanaged = []
    if focus != "replace" and draw(st.integers(0, 2)) == 2:
        unmanaged.append(b.node("spare", allocatable={"cpu": "4", "memory": "4Gi", "pods": "10"}))
    spot_to_spot = draw(st.booleans())
    snap = b.managed_snapshot(
        pools=pools,
        types=types,
        managed=managed,
        unmanaged=unmanaged,
        pods=pods,
        pdbs=pdbs,
        now=NOW,
        settings=settings_mod.Settings(
            features=settings_mod.FeatureGates(spot_to_spot_consolidation=spot_to_spot)
        ),
    )
    return Scenario(snap)


# -- oracles ----------------------------------------------------------------------------------------


def oracle_budget(snapshot: Snapshot, pool: NodePool, reason: str) -> int:
    """The smallest active budget for ``reason`` (no node of these scenarios is disrupting)."""
    total = sum(
        1 for n in snapshot.nodes if n.claim is not None and n.node_pool == pool.name and n.initialized
    )
    best = total
    for budget in pool.disruption.budgets:
        if budget.reasons and reason not in budget.reasons:
            continue
        if budget.schedule == NEVER_NOW[0]:
            continue
        text = budget.nodes
        count = math.ceil(int(text[:-1]) * total / 100) if text.endswith("%") else int(text)
        best = min(best, count)
    return best


def candidate_objects(snapshot: Snapshot, names: tuple[str, ...], disruption_class: str) -> list[Candidate]:
    found, why = cand.build_all(
        snapshot.nodes,
        pools={p.name: p for p in snapshot.node_pools},
        instance_types={name: {it.name: it for it in its} for name, its in snapshot.instance_types.items()},
        limits=Limits(snapshot.pdbs, snapshot.pods),
        now=NOW,
        disruption_class=disruption_class,
    )
    by_name = {c.name: c for c in found}
    missing = [n for n in names if n not in by_name]
    assert not missing, f"disrupted non-candidates {missing}: {[why.get(n) for n in missing]}"
    return [by_name[n] for n in names]


# -- properties -------------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(scenarios("mixed"))
def test_properties_of_mixed_clusters(scenario: Scenario) -> None:
    check(scenario)


@PROPERTY_SETTINGS
@given(scenarios("consolidation"))
def test_properties_of_busy_clusters(scenario: Scenario) -> None:
    check(scenario)


@PROPERTY_SETTINGS
@given(scenarios("replace"))
def test_properties_of_clusters_on_oversized_nodes(scenario: Scenario) -> None:
    check(scenario)


def check(scenario: Scenario) -> None:
    snap = scenario.snapshot
    decision = compute(snap, NOW)

    # determinism
    again = compute(snap, NOW)
    assert again.command == decision.command
    assert again.records == decision.records

    # a record for every node; "disrupted" exactly for the command's nodes
    assert set(decision.records) == {n.name for n in snap.nodes}
    chosen = set(decision.command.candidates) if decision.command is not None else set()
    assert {n for n, r in decision.records.items() if r.verdict == "disrupted"} == chosen
    assert all(r.reasons for r in decision.records.values())

    command = decision.command
    if command is None:
        return
    assert command.reason != EXPIRED  # nothing in these scenarios has reached expireAfter
    assert len(set(command.candidates)) == len(command.candidates)
    by_name = {n.name: n for n in snap.nodes}

    # budgets: never more nodes of a pool than its active budget allows for the reason
    per_pool = Counter(by_name[n].node_pool for n in command.candidates)
    for pool_name, count in per_pool.items():
        assert count <= oracle_budget(snap, scenario.pools[pool_name], command.reason), (pool_name, count)

    with_tgp = any(by_name[n].claim.termination_grace_period is not None for n in command.candidates)
    graceful = command.reason in (EMPTY, UNDERUTILIZED) or (command.reason == DRIFTED and not with_tgp)
    disruption_class = cand.GRACEFUL if graceful else cand.EVENTUAL
    chosen_objects = candidate_objects(snap, command.candidates, disruption_class)

    if graceful:
        limits = Limits(snap.pdbs, snap.pods)
        for name in command.candidates:
            node = by_name[name]
            assert node.node is not None and node.node.annotations.get(wk.DO_NOT_DISRUPT) != "true"
            for pod in node.pods:
                assert not cand.do_not_disrupt_active(pod, NOW), (name, pod.key)
                if cand.reschedulable(pod):
                    assert limits.blocking(pod) is None, (name, pod.key)

    moved = [p for c in chosen_objects for p in c.reschedulable]
    if command.reason == EMPTY:
        assert moved == [] and command.replacements == ()
        return

    sim = consolidation.simulate(snap, chosen_objects, consolidation=command.reason == UNDERUTILIZED)
    assert sim.stranded == (), sim.stranded
    placement = sim.results.placement()
    for pod in moved:
        target = placement.get(pod.key)
        assert target is not None and target not in chosen, (pod.key, target)
    assert len(sim.results.new_claims) == len(command.replacements)

    if command.reason == UNDERUTILIZED:
        assert len(command.replacements) <= 1
        price = sum(c.price or 0.0 for c in chosen_objects)
        assert command.savings_per_hour is not None and command.savings_per_hour > 0
        for replacement in command.replacements:
            assert replacement.instance_types
            for it in replacement.instance_types:
                assert consolidation.worst_launch_price(it, replacement.requirements) < price
