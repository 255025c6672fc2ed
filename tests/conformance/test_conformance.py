"""Runs every vendored conformance scenario through karpy's engine (one test each)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from karpy import conformance

HERE = Path(__file__).parent
DISPUTED = conformance.load_disputed(HERE / "disputed.yaml")
SCENARIOS = conformance.scenario_files([HERE])


def _kind(path: Path) -> str:
    doc = yaml.safe_load(path.read_text())
    return str(doc.get("kind", "scheduling"))


SCHEDULING = [p for p in SCENARIOS if _kind(p) == "scheduling"]
DISRUPTION = [p for p in SCENARIOS if _kind(p) == "disruption"]


def test_the_vendored_suite_is_complete() -> None:
    names = {p.name[:4] for p in SCENARIOS}
    assert names == {"core", "topo", "disr"}
    assert len(SCHEDULING) >= 100
    assert len(DISRUPTION) >= 40


@pytest.mark.parametrize("path", SCHEDULING + DISRUPTION, ids=lambda p: p.stem)
def test_scenario(path: Path) -> None:
    outcome = conformance.run_scenario(path, disputed=DISPUTED)
    if outcome.status == conformance.DISPUTED:
        entry = DISPUTED[outcome.name]
        assert entry["upstream"] and entry["trace"]
        return
    assert outcome.status == conformance.PASS, outcome.line()


def test_disputed_entries_name_real_scenarios() -> None:
    known = {yaml.safe_load(p.read_text())["name"] for p in SCENARIOS}
    assert set(DISPUTED) <= known
