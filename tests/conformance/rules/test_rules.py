"""The rule scenarios of this folder restate both rule families of issue 32: reschedulability and
emptiness (``rule-0NN``) and pod-affinity namespaces (``rule-1NN``). Each scenario runs through
``tests/conformance/test_conformance.py``, which walks the suite's subfolders."""

from __future__ import annotations

from pathlib import Path

import yaml

from karpy import conformance

HERE = Path(__file__).parent
SCENARIOS = conformance.scenario_files([HERE])


def test_both_rule_families_are_restated() -> None:
    stems = [p.stem for p in SCENARIOS]
    assert sum(s.startswith("rule-0") for s in stems) >= 16  # reschedulability and emptiness
    assert sum(s.startswith("rule-1") for s in stems) >= 8  # pod-affinity namespaces


def test_every_rule_scenario_names_its_upstream_source() -> None:
    for path in SCENARIOS:
        doc = yaml.safe_load(path.read_text())
        assert doc["name"] == path.stem
        assert doc["source"].startswith("pkg/"), path.name
        assert "kubernetes-sigs/karpenter @ 2266468104f36373ed002241afaee2d3bbc26078" in path.read_text()
