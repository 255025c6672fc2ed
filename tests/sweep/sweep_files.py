"""Sweep files the sweep tests share, written into a test's folder next to a copy of the small scenario."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SMALL = ROOT / "examples" / "sim" / "small.yaml"


def six_runs(folder: Path, *, broken: bool = False, seeds: str = "[1, 2]") -> Path:
    """A sweep of the small scenario for 20 minutes: 3 consolidateAfter x 2 seeds = 6 runs; with
    ``broken``, a second scenario whose catalog file is not YAML (found at load, read only when a
    run starts: each of its runs fails at run time)."""
    shutil.copy(SMALL, folder / "small.yaml")
    scenarios = ["small.yaml"]
    if broken:
        text = SMALL.read_text().replace("name: small\n", "name: small-broken\n")
        text = text.replace("catalog: aws:us-east-1", "catalog: broken-catalog.yaml")
        (folder / "small-broken.yaml").write_text(text)
        (folder / "broken-catalog.yaml").write_text("not: [a catalog\n")
        scenarios.append("small-broken.yaml")
    path = folder / "sweep.yaml"
    path.write_text(
        "kind: Sweep\n"
        "name: six\n"
        f"scenarios: {scenarios}\n"
        f"seeds: {seeds}\n"
        "until: 20m\n"
        "grid:\n"
        "  consolidateAfter: [30s, 5m, 30m]\n"
    )
    return path
