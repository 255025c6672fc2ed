"""``explain_pod`` on every pod a conformance scenario expects unscheduled.

Each scheduling scenario whose ``expect.pods`` has a pod with ``scheduled: false`` is about one
rule; the mapping below names it, and the explanation of each such pod must be unschedulable (or
invalid) for that rule: the class of its telling reason, and a NodePool rejection of that class.
A new unschedulable scenario without a mapping entry fails the test until one is added.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy import conformance
from karpy.core import scheduling
from karpy.core.explain.pod import explain_pod
from karpy.core.explain.reasons import CLASSES

HERE = Path(__file__).resolve().parent

# scenario name -> the reason class it is about
EXPECTED: dict[str, str] = {
    "core-005-hostname-node-selector-unschedulable": "validation",
    "core-009-required-in-undefined-key": "requirements",
    "core-015-required-doesnotexist-defined-key": "requirements",
    "core-019-required-final-term-not-relaxed": "requirements",
    "core-024-too-much-cpu-unschedulable": "resources",
    "core-026-nodepool-arch-excludes-ios": "requirements",
    "core-028-two-extended-resources-no-single-type": "resources",
    "core-043-daemonset-host-port-blocks": "host-port",
    "core-049-limits-cpu-exceeded": "nodepool-limit",
    "core-052-tolerations-match-nodepool-taint": "taint",
    "core-068-minvalues-lt-unsatisfied": "min-values",
    "core-069-minvalues-too-few-types": "min-values",
    "core-070-minvalues-zone-strict": "min-values",
    "topo-001-unknown-topology-key": "topology-spread",
    "topo-040-self-affinity-constrained-zones-existing": "pod-affinity",
    "topo-045-anti-affinity-zone": "pod-anti-affinity",
    "topo-048-anti-affinity-zone-inverse": "pod-anti-affinity",
    "topo-049-anti-affinity-zone-schrodinger": "pod-anti-affinity",
    "topo-050-anti-affinity-zone-inverse-existing": "pod-anti-affinity",
    "topo-053-affinity-nonexistent-pod": "pod-affinity",
    "topo-054-affinity-zone-unconstrained-target": "pod-affinity",
    "topo-058-affinity-namespace-no-match": "pod-affinity",
}


def _unscheduled() -> dict[str, tuple[Path, list[str]]]:
    """Scenario name -> (its file, the pods it expects unscheduled), for scheduling scenarios."""
    found: dict[str, tuple[Path, list[str]]] = {}
    for path in sorted(HERE.glob("*.yaml")):
        scenario = conformance.scenario_snapshot(path)
        if scenario.kind != "scheduling":
            continue
        pods = scenario.expect.get("pods") or {}
        names = [n for n, want in pods.items() if isinstance(want, dict) and want.get("scheduled") is False]
        if names:
            found[scenario.name] = (path, names)
    return found


UNSCHEDULED = _unscheduled()


def test_every_unschedulable_scenario_has_an_expected_reason() -> None:
    assert sorted(UNSCHEDULED) == sorted(EXPECTED)
    assert set(EXPECTED.values()) <= set(CLASSES) - {"other"}


@pytest.mark.parametrize("name", sorted(UNSCHEDULED))
def test_explanation_names_the_scenario_s_reason(name: str) -> None:
    path, pods = UNSCHEDULED[name]
    scenario = conformance.scenario_snapshot(path)
    order = [it.name for it in scenario.catalog.instance_types]
    want = EXPECTED.get(name)
    assert want is not None, f"{name}: add the reason class it is about to EXPECTED"
    planned = {e.pod.name: e.reasons for e in scheduling.solve(scenario.snapshot).errors}
    for pod in pods:
        exp = explain_pod(scenario.snapshot, pod, catalog_order=order)
        # the reasons karpy plan prints for the pod, every one of them
        assert planned[pod].items() <= exp.reasons.items()
        if want == "validation":
            assert exp.status == "invalid", (pod, exp.summary)
            assert exp.reason == "validation"
            assert exp.suggestion
            continue
        assert exp.status == "unschedulable", (pod, exp.summary)
        assert exp.reason == want, (pod, exp.reason, exp.message)
        rejected = [v for v in exp.node_pools if v.verdict == "rejected"]
        assert want in {v.reason for v in rejected}, (pod, [(v.name, v.reason) for v in rejected])
        for verdict in rejected:
            # the solver's own sentence, as karpy plan prints it, explained with a suggestion
            assert exp.reasons[f"nodepool/{verdict.name}"] == verdict.message
            assert verdict.suggestion, (pod, verdict.message)
            assert verdict.detail, (pod, verdict.message)
