"""``explain_node`` on every node a disruption conformance scenario expects to survive its pass.

A disruption scenario says which nodes stay: every node when ``expect.command`` is false, the
``notDisrupted`` list, or, with ``disruptedCount``, the nodes beyond that count (here: the ones
the pass does not take). :data:`EXPECTED` names, per scenario and node (``*``: every surviving
node), the reason class the scenario is about; a blocker class (do-not-disrupt, PDB, budget,
consolidateAfter, not initialized, policy ...) must be named as such: a method blocked for it, and
no method disrupting the node. A new scenario with a surviving node fails the test until it is
mapped. Every node of every scenario is also checked against the pass ``karpy disrupt`` runs:
a method disrupts the node exactly when the pass's command does, and each of the pass's
sentences about the node is the verbatim message of one of its methods.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy import conformance
from karpy.core import disruption
from karpy.core.explain.node import BLOCKERS, REASONS, NodeExplanation, explain_node

HERE = Path(__file__).resolve().parent
ALL = "*"
TAKEN = ("expired", "drifted", "empty", "underutilized")  # a candidate another command preempts

# scenario -> node -> the reason class the scenario expects it to survive for
EXPECTED: dict[str, dict[str, str]] = {
    "disr-005-empty-node-do-not-disrupt-node-annotation": {"node-0": "do-not-disrupt"},
    "disr-006-consolidateafter-recent-pod-event-blocks": {"node-0": "consolidate-after"},
    "disr-008-whenempty-ignores-underutilized-node": {"node-0": "policy"},
    "disr-009-budget-empty-30-percent": {ALL: "budget"},
    "disr-010-budget-empty-zero-percent": {ALL: "budget"},
    "disr-011-budget-empty-50-percent-per-nodepool": {ALL: "budget"},
    "disr-012-budget-multinode-delete-30-percent": {ALL: "budget"},
    "disr-013-budget-schedule-active-window": {ALL: "budget"},
    "disr-017-budget-active-for-all-reasons-zero": {ALL: "budget"},
    "disr-018-consolidation-delete-node-with-fewest-pods": {"node-0": "underutilized"},
    "disr-019-consolidation-pdb-blocks-one-node": {"node-1": "pdb"},
    "disr-020-consolidation-do-not-disrupt-node": {"node-1": "do-not-disrupt"},
    "disr-021-consolidation-do-not-disrupt-pod": {"node-1": "do-not-disrupt"},
    "disr-022-consolidation-do-not-disrupt-pod-with-tgp": {ALL: "do-not-disrupt"},
    "disr-023-consolidation-do-not-disrupt-duration-active": {"node-1": "do-not-disrupt"},
    "disr-024-consolidation-pod-without-owner-evicted": {"node-0": "underutilized"},
    "disr-025-consolidation-uninitialized-destination-blocks": {
        "node-0": "not-initialized",
        "node-1": "no-room",
    },
    "disr-026-consolidation-destination-under-consolidateafter": {
        "node-0": "consolidate-after",
        "node-1": "no-savings",
    },
    "disr-027-consolidation-destination-consolidateafter-never": {"node-dest": "consolidate-after"},
    "disr-028-consolidation-would-strand-pod": {ALL: "no-room"},
    "disr-031-spot-to-spot-disabled": {"node-0": "spot-to-spot"},
    "disr-032-spot-to-spot-needs-15-cheaper-types": {"node-0": "spot-to-spot"},
    "disr-034-replace-blocked-by-pdb": {"node-0": "pdb"},
    "disr-036-no-replace-worst-spot-offering-pricier": {"node-0": "no-savings"},
    "disr-041-ordering-best-savings-ratio-first": {"node-0": "underutilized"},
    "disr-042-topology-replace-keeps-zone": {"node-0": "no-savings", "node-2": "no-savings"},
    "disr-044-drift-delete-pods-fit-elsewhere": {"node-1": "consolidate-after"},
    "disr-045-drift-not-drifted-ignored": {ALL: "not-drifted"},
    "disr-046-drift-do-not-disrupt-pod-blocks": {"node-0": "do-not-disrupt"},
    "disr-047-drift-continue-to-next-candidate": {"node-0": "no-room"},
    "disr-049-drift-earliest-first": {"node-0": "drifted"},
}


def _scenarios() -> dict[str, conformance.Scenario]:
    out = {}
    for path in sorted(HERE.glob("*.yaml")):
        scenario = conformance.scenario_snapshot(path)
        if scenario.kind == "disruption":
            out[scenario.name] = scenario
    return out


SCENARIOS = _scenarios()


def _surviving(scenario: conformance.Scenario) -> list[str]:
    """The nodes the scenario expects its pass to leave (see the module docstring)."""
    expect = scenario.expect
    names = [n.name for n in scenario.snapshot.nodes]
    if expect.get("command") is False:
        return names
    if expect.get("notDisrupted"):
        return list(expect["notDisrupted"])
    if "disruptedCount" in expect and expect["disruptedCount"] < len(names):
        command = disruption.compute(scenario.snapshot, scenario.now).command
        taken = set(command.candidates) if command is not None else set()
        return [n for n in names if n not in taken]
    return []


def _expected(name: str) -> dict[str, str]:
    """Node -> class for every surviving node of the scenario (``*`` spelled out)."""
    wanted = EXPECTED[name]
    return {n: wanted.get(n, wanted.get(ALL, "")) for n in _surviving(SCENARIOS[name])}


def test_every_scenario_with_a_surviving_node_is_mapped() -> None:
    with_survivors = sorted(name for name, s in SCENARIOS.items() if _surviving(s))
    assert with_survivors == sorted(EXPECTED)
    for name, nodes in EXPECTED.items():
        assert set(nodes) - {ALL} <= set(_surviving(SCENARIOS[name])), name
        assert all(_expected(name).values()), (name, "a surviving node has no expected class")
        assert set(nodes.values()) <= set(REASONS) - {"other"}, name
    blocked = [name for name in EXPECTED if set(EXPECTED[name].values()) & BLOCKERS]
    assert len(blocked) == 20  # the scenarios with a node kept by a blocker


def _check(exp: NodeExplanation, want: str) -> None:
    reasons = {m.reason: m for m in exp.methods}
    assert want in reasons, (exp.node, want, [(m.method, m.verdict, m.reason) for m in exp.methods])
    assert all(m.verdict != "disrupted" for m in exp.methods), exp.node
    if want in BLOCKERS:
        assert want in exp.blockers
        assert any(m.verdict == "blocked" and m.reason == want for m in exp.methods)
        assert exp.reason in BLOCKERS and exp.summary.startswith("not disrupted this pass: ")
    elif want in TAKEN:  # the method would take it, but another command goes first
        m = reasons[want]
        assert m.verdict == "candidate" and m.action is not None and "preemptedBy" in m.detail
    else:
        assert any(m.verdict == "not-candidate" and m.reason == want for m in exp.methods)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_explanation_names_why_each_surviving_node_stays(name: str) -> None:
    scenario = SCENARIOS[name]
    for node, want in _expected(name).items():
        _check(explain_node(scenario.snapshot, node), want)


def test_a_destination_that_takes_no_pods_is_named() -> None:
    for name, node, other in (
        ("disr-025-consolidation-uninitialized-destination-blocks", "node-1", "node-0"),
        ("disr-026-consolidation-destination-under-consolidateafter", "node-1", "node-0"),
    ):
        exp = explain_node(SCENARIOS[name].snapshot, node)
        single = next(m for m in exp.methods if m.method == "single-node consolidation")
        excluded = single.detail["destinationsExcluded"]
        assert isinstance(excluded, list) and [d["node"] for d in excluded] == [other], name


def _record_level(note: str, command: disruption.Command | None) -> bool:
    head = "" if command is None else f"{command.reason} ({command.method}): "
    return note.startswith("candidate; ") or bool(head and note.startswith(head))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_node_agrees_with_the_pass_karpy_disrupt_runs(name: str) -> None:
    scenario = SCENARIOS[name]
    decision = disruption.compute(scenario.snapshot, scenario.now)
    command = decision.command
    for state in scenario.snapshot.nodes:
        exp = explain_node(scenario.snapshot, state.name)
        disrupted = [m.method for m in exp.methods if m.verdict == "disrupted"]
        if command is not None and state.name in command.candidates:
            assert disrupted == [command.method], (state.name, disrupted)
        else:
            assert disrupted == [], state.name
        assert exp.verdict == decision.records[state.name].verdict
        messages = {m.message for m in exp.methods}
        drift = next(m for m in exp.methods if m.method == "drift")
        for note in decision.records[state.name].reasons:
            if _record_level(note, command):
                continue
            if note.startswith("drifted: "):
                assert drift.detail["drift"]["kind"] is not None, (state.name, note)  # type: ignore[index]
                continue
            assert note in messages, (state.name, note, messages)
