"""Seed features measured on their own scenarios: each run with and without the feature.

Run by hand (never by CI), from the repository root:

    KARPY_PURE=1 .venv/bin/python benchmarks/seed_features.py                  # every section, seed 1
    KARPY_PURE=1 .venv/bin/python benchmarks/seed_features.py --seeds 1 2 3    # one table per seed
    KARPY_PURE=1 .venv/bin/python benchmarks/seed_features.py --only usable-price --json out.json

A section is a :class:`Feature`: a simulator scenario (the feature off, as upstream) and a twin
file whose NodePools/NodeClasses turn it on (``karpy simulate --compare-with``'s variant: the
same trace, the same seed). Both run through :func:`karpy.sim.runner.run`, and the goal figures
are printed side by side with the change: node count (peak and node-hours), the cost per day,
pending p95. A feature states its goal as a check over the two runs; the script exits 1 when a
goal is missed. Headroom, the rollout guard and measured capacity are not built yet: their
sections (:data:`NOT_BUILT`) say so and print no figures. To add a section, append a
:class:`Feature` to :data:`FEATURES` (and drop its :data:`NOT_BUILT` entry).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from karpy.sim import runner
from karpy.sim import scenario as scenario_mod

ROOT = Path(__file__).resolve().parent.parent
DAY = 86400.0

Figures = dict[str, float]


@dataclass(frozen=True)
class Feature:
    """One seed feature: its scenario, the twin that turns it on, and its goal."""

    name: str
    what: str
    scenario: Path
    twin: Path
    goal: str  # the goal in words, printed under the table
    met: Callable[[Figures, Figures], bool]  # (off, on) -> goal met


def _fewer_nodes_no_extra_cost(off: Figures, on: Figures) -> bool:
    """At least 20% fewer nodes (peak and node-hours) at no extra cost per day."""
    return (
        on["peak_nodes"] <= 0.8 * off["peak_nodes"]
        and on["node_hours"] <= 0.8 * off["node_hours"]
        and on["cost_per_day"] <= off["cost_per_day"]
    )


FEATURES: list[Feature] = [
    Feature(
        name="usable-price",
        what="DaemonSet-aware instance sizing (NodePool annotation karpy.sh/sizing: usable-price)",
        scenario=ROOT / "examples/sim/daemonset-heavy.yaml",
        twin=ROOT / "examples/sim/daemonset-heavy-usable-price.yaml",
        goal="-20% nodes (peak and node-hours) at no extra cost per day",
        met=_fewer_nodes_no_extra_cost,
    ),
]

# Seed features with no implementation yet: listed (name, what, goal) so that the output says so
# instead of printing numbers for them. Move one to FEATURES once it has a scenario and a twin.
NOT_BUILT: list[tuple[str, str, str]] = [
    (
        "headroom",
        "headroom without placeholder pods (hospital scenario, spikes at 08:00 and lunch)",
        "time-to-Ready p95 at the spikes <= 15 s at <= +5% daily cost",
    ),
    (
        "rollout-guard",
        "no consolidation of nodes holding pods of a rollout in progress (payments scenario)",
        "business-hours consolidation evictions -80% at <= +3% cost",
    ),
    (
        "measured-capacity",
        "measured allocatable replaces the catalog estimate per instance type and AMI",
        "pods that would not fit and failed launches avoided, shown in the report",
    ),
]

# (label, key in Figures, format)
ROWS: list[tuple[str, str, str]] = [
    ("peak nodes", "peak_nodes", "{:.0f}"),
    ("node-hours", "node_hours", "{:.1f}"),
    ("nodes created", "nodes_created", "{:.0f}"),
    ("cost per day (USD)", "cost_per_day", "{:.2f}"),
    ("pending p95 (s)", "pending_p95", "{:.1f}"),
    ("cpu utilisation", "cpu_utilisation", "{:.0%}"),
    ("memory utilisation", "memory_utilisation", "{:.0%}"),
    ("pods never bound (deleted pending)", "pods_never_scheduled", "{:.0f}"),
    ("pods pending at the end", "pods_pending_at_end", "{:.0f}"),
]


def goal_figures(result: runner.RunResult) -> Figures:
    """The figures a seed feature is judged on, from one run."""
    r = result.figures
    seconds = max(result.end - result.start, 1.0)
    return {
        "peak_nodes": float(r["peak_nodes"]),
        "node_hours": float(r["node_hours"]),
        "nodes_created": float(r["nodes_created"]),
        "cost_per_day": float(r["cost_usd"]) * DAY / seconds,
        "pending_p95": float(r["pending_seconds"]["p95"] or 0.0),
        "cpu_utilisation": float(r["utilization"]["cpu"]),
        "memory_utilisation": float(r["utilization"]["memory"]),
        "pods_never_scheduled": float(r["pods_never_scheduled"] - r["pods_pending_at_end"]),
        "pods_pending_at_end": float(r["pods_pending_at_end"]),
    }


def measure(feature: Feature, seed: int, until: float | None) -> tuple[Figures, Figures]:
    """(off, on): the scenario as it is and with the twin's NodePools, same trace and seed."""
    base = scenario_mod.load(feature.scenario)
    twin = base.with_karpy_config(scenario_mod.load(feature.twin))
    off = runner.run(base, seed=seed, until=until)
    on = runner.run(twin, seed=seed, until=until)
    return goal_figures(off), goal_figures(on)


def _change(before: float, after: float) -> str:
    if before == 0:
        return "-" if after == 0 else "new"
    return f"{(after - before) / before:+.0%}"


def table(feature: Feature, seed: int, off: Figures, on: Figures) -> str:
    """The section as a Markdown table (paste-able into docs/seed-features.md)."""
    lines = [
        f"### {feature.name} (seed {seed}): {feature.what}",
        "",
        f"| figure | without | with {feature.name} | change |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, key, fmt in ROWS:
        lines.append(
            f"| {label} | {fmt.format(off[key])} | {fmt.format(on[key])} | {_change(off[key], on[key])} |"
        )
    verdict = "met" if feature.met(off, on) else "MISSED"
    lines += ["", f"Goal: {feature.goal}: **{verdict}**", ""]
    return "\n".join(lines)


def not_built(name: str, what: str, goal: str) -> str:
    """The section of a seed feature not built yet: what it is and its goal, no figures."""
    return "\n".join([f"### {name}: {what}", "", f"Not built yet: no figures (goal: {goal}).", ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="seeds to run (default 1)")
    parser.add_argument("--only", action="append", default=[], help="run only this section (repeatable)")
    parser.add_argument("--until", type=float, default=None, help="simulate this many seconds instead")
    parser.add_argument("--json", type=Path, default=None, help="write every figure as JSON")
    args = parser.parse_args(argv)
    chosen = [f for f in FEATURES if not args.only or f.name in args.only]
    unknown = set(args.only) - {f.name for f in FEATURES} - {name for name, _, _ in NOT_BUILT}
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    missed = 0
    for feature in chosen:
        for seed in args.seeds:
            off, on = measure(feature, seed, args.until)
            print(table(feature, seed, off, on), flush=True)
            out.setdefault(feature.name, {})[str(seed)] = {"without": off, "with": on}
            missed += not feature.met(off, on)
    for name, what, goal in NOT_BUILT:
        if not args.only or name in args.only:
            print(not_built(name, what, goal), flush=True)
            out[name] = "not built"
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
