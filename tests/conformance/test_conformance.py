"""Runs every conformance scenario through karpy's engine (one test each): the vendored suite in
this folder and karpy's own in its subfolders (``volumes/``, ``rules/``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from karpy import conformance

HERE = Path(__file__).parent
DISPUTED = conformance.load_disputed(HERE / "disputed.yaml")
SCENARIOS = conformance.scenario_files([HERE])
VENDORED = [p for p in SCENARIOS if p.parent == HERE]
SUBFOLDERS = sorted({p.parent.name for p in SCENARIOS if p.parent != HERE})


def _kind(path: Path) -> str:
    doc = yaml.safe_load(path.read_text())
    return str(doc.get("kind", "scheduling"))


SCHEDULING = [p for p in SCENARIOS if _kind(p) == "scheduling"]
DISRUPTION = [p for p in SCENARIOS if _kind(p) == "disruption"]


def test_the_vendored_suite_is_complete() -> None:
    names = {p.name[:4] for p in VENDORED}
    assert names == {"core", "topo", "disr"}
    assert len([p for p in SCHEDULING if p in VENDORED]) >= 100
    assert len([p for p in DISRUPTION if p in VENDORED]) >= 40


def test_subfolder_scenarios_are_collected() -> None:
    """``scenario_files`` walks the subfolders (never ``catalogs/``): each suite of karpy's own."""
    assert "volumes" in SUBFOLDERS and "catalogs" not in SUBFOLDERS
    volumes = [p for p in SCENARIOS if p.parent.name == "volumes"]
    assert len(volumes) >= 24
    assert all(p.name.startswith("vol-") for p in volumes)


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
