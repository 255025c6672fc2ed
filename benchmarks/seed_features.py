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
goal is missed. Headroom (:func:`headroom_runs`) is judged on pods created in its spike windows
(:data:`SPIKES`) and against the scenario's Cluster Autoscaler baseline too: it runs karpy without
and with the twin and the baseline, same trace and seed, and reads per-pod latencies from the
runner's kube-scheduler and workload stand-ins (:func:`_recording`). A feature with no
implementation yet would be listed in :data:`NOT_BUILT`. A feature that is a karpy setting rather
than a NodePool's (measured capacity) has no twin file: its ``variant`` turns it on in the scenario.
To add a section, append a :class:`Feature` to :data:`FEATURES` (and drop its :data:`NOT_BUILT` entry).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from karpy.sim import metrics as sim_metrics
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
    twin: Path | None  # None: ``variant`` turns the feature on
    goal: str  # the goal in words, printed under the table
    met: Callable[[Figures, Figures], bool]  # (off, on) -> goal met
    variant: Callable[[scenario_mod.Scenario], scenario_mod.Scenario] | None = None
    rows: tuple[tuple[str, str, str], ...] = ()  # more rows, after ROWS
    extra: Callable[[runner.RunResult], Figures] | None = None  # the figures of ``rows`` not in goal_figures
    until: float | None = None  # simulate this long (default: the scenario's duration; --until wins)


def _fewer_nodes_no_extra_cost(off: Figures, on: Figures) -> bool:
    """At least 20% fewer nodes (peak and node-hours) at no extra cost per day."""
    return (
        on["peak_nodes"] <= 0.8 * off["peak_nodes"]
        and on["node_hours"] <= 0.8 * off["node_hours"]
        and on["cost_per_day"] <= off["cost_per_day"]
    )


def _measured_capacity_avoids_misfits(off: Figures, on: Figures) -> bool:
    """Pods that do not fit their new node and the launches made for them -80%, at <= +1% cost."""
    return (
        on["pods_not_fitting"] <= 0.2 * off["pods_not_fitting"]
        and on["relaunches"] <= 0.2 * off["relaunches"]
        and on["nodes_created"] <= off["nodes_created"]
        and on["cost_per_day"] <= 1.01 * off["cost_per_day"]
    )


CONSOLIDATION_REASONS = frozenset({"empty", "underutilized"})
BUSINESS_HOURS = (8, 18)  # 08:00-18:00 UTC of every day of the trace


def consolidation_evictions(result: runner.RunResult) -> Figures:
    """Pods evicted by consolidation, during business hours and in all, from the run's event log.

    The termination controller posts one ``Evicted`` event per pod it evicts, whatever drained the
    node; the counts are consolidation's when consolidation (``empty``, ``underutilized``) is the
    run's only disruption reason (no drift, expiration or spot interruption), and NaN otherwise
    (the log does not say which disruption drained a node)."""
    moments = [t for t, kind, _, reason in result.events if kind == "Pod" and reason == "Evicted"]
    business = [t for t in moments if BUSINESS_HOURS[0] <= (t % DAY) // 3600 < BUSINESS_HOURS[1]]
    attributable = set(result.figures["disruptions"]) <= CONSOLIDATION_REASONS
    nan = float("nan")
    return {
        "business_evictions": float(len(business)) if attributable else nan,
        "consolidation_evictions": float(len(moments)) if attributable else nan,
        "consolidations": float(sum(result.figures["disruptions"].get(r, 0) for r in CONSOLIDATION_REASONS)),
    }


def _fewer_business_evictions(off: Figures, on: Figures) -> bool:
    """Consolidation evictions in business hours -80%, at <= +3% cost per day."""
    return (
        on["business_evictions"] <= 0.2 * off["business_evictions"]
        and on["cost_per_day"] <= 1.03 * off["cost_per_day"]
    )


ROLLOUT_ROWS = (
    ("consolidation evictions 08:00-18:00 UTC", "business_evictions", "{:.0f}"),
    ("consolidation evictions, all day", "consolidation_evictions", "{:.0f}"),
    ("nodes consolidated (empty + underutilized)", "consolidations", "{:.0f}"),
)

# the measured-capacity block of a run's figures (karpy.sim.misfits)
MEASURED_ROWS = (
    ("nodes registered below their NodeClaim's estimate", "nodes_below_estimate", "{:.0f}"),
    ("pods that did not fit their new node", "pods_not_fitting", "{:.0f}"),
    ("launches for those pods", "relaunches", "{:.0f}"),
    ("in-flight NodeClaims corrected", "claims_corrected", "{:.0f}"),
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
    Feature(
        name="measured-capacity",
        what="measured allocatable replaces the catalog estimate (setting measuredCapacity)",
        scenario=ROOT / "examples/sim/hospital-memory-misestimate.yaml",
        twin=None,
        goal="pods that do not fit their new node and their launches -80%, no more launches, <= +1% cost",
        met=_measured_capacity_avoids_misfits,
        variant=lambda sc: dataclasses.replace(sc, measured_capacity=True),
        rows=MEASURED_ROWS,
    ),
    Feature(
        name="rollout-guard",
        what="no consolidation of nodes holding pods of a rollout in progress (karpy.sh/rollout-guard: 5m)",
        scenario=ROOT / "examples/sim/payments-rollouts.yaml",
        twin=ROOT / "examples/sim/payments-rollouts-guard.yaml",
        goal="consolidation evictions in business hours (08:00-18:00 UTC) -80% at <= +3% cost per day",
        met=_fewer_business_evictions,
        rows=ROLLOUT_ROWS,
        extra=consolidation_evictions,
        until=DAY,  # the whole day: the morning deploys, the afternoon ones and the evening scale-down
    ),
]

# Seed features with no implementation yet: listed (name, what, goal) so that the output says so
# instead of printing numbers for them. Move one to FEATURES once it has a scenario and a twin.
NOT_BUILT: list[tuple[str, str, str]] = []

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
        **{key: float((r.get("measured_capacity") or {}).get(key, 0)) for _, key, _ in MEASURED_ROWS},
    }


def measure(feature: Feature, seed: int, until: float | None) -> tuple[Figures, Figures]:
    """(off, on): the scenario as it is and with the twin's NodePools, same trace and seed."""
    base = scenario_mod.load(feature.scenario)
    if feature.twin is not None:
        twin = base.with_karpy_config(scenario_mod.load(feature.twin))
    else:
        assert feature.variant is not None
        twin = feature.variant(base)
    off = runner.run(base, seed=seed, until=until)
    on = runner.run(twin, seed=seed, until=until)
    if feature.extra is not None:
        return goal_figures(off) | feature.extra(off), goal_figures(on) | feature.extra(on)
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
    for label, key, fmt in [*ROWS, *feature.rows]:
        lines.append(
            f"| {label} | {fmt.format(off[key])} | {fmt.format(on[key])} | {_change(off[key], on[key])} |"
        )
    verdict = "met" if feature.met(off, on) else "MISSED"
    lines += ["", f"Goal: {feature.goal}: **{verdict}**", ""]
    return "\n".join(lines)


def not_built(name: str, what: str, goal: str) -> str:
    """The section of a seed feature not built yet: what it is and its goal, no figures."""
    return "\n".join([f"### {name}: {what}", "", f"Not built yet: no figures (goal: {goal}).", ""])


# -- headroom: per-pod latencies at the spikes, and the Cluster Autoscaler baseline ---------------

HEADROOM = "headroom"
HEADROOM_SCENARIO = ROOT / "examples/sim/hospital-booking-spikes.yaml"
HEADROOM_TWIN = ROOT / "examples/sim/hospital-booking-spikes-headroom.yaml"
# (label, key, from hour, to hour): pods created in [from, to) UTC of any day of the run. The 08:00
# spike is the morning ramp (07:30-08:00) and the notifications step (07:45) plus 15 minutes; the
# lunch spike the 12:00-12:15 ramp and the 12:15 step plus 15 minutes.
SPIKES = (
    ("08:00 spike (07:30-08:15)", "morning", 7.5, 8.25),
    ("lunch spike (12:00-12:30)", "lunch", 12.0, 12.5),
)
READY_GOAL = 15.0  # seconds: time-to-Ready p95 at the spikes
COST_GOAL = 1.05  # with headroom at most +5% daily cost
HEADROOM_ROWS: tuple[tuple[str, str, str], ...] = (
    *((f"time-to-Ready p95 (s), {label}", f"ready_p95_{key}", "{:.1f}") for label, key, _, _ in SPIKES),
    *((f"pending p95 (s), {label}", f"pending_p95_{key}", "{:.1f}") for label, key, _, _ in SPIKES),
    *((f"pods Ready within 15 s, {label}", f"ready_15s_{key}", "{:.0%}") for label, key, _, _ in SPIKES),
    *((f"pods created, {label}", f"pods_{key}", "{:.0f}") for label, key, _, _ in SPIKES),
    ("cost per day (USD)", "cost_per_day", "{:.2f}"),
    ("peak nodes", "peak_nodes", "{:.0f}"),
    ("node-hours", "node_hours", "{:.1f}"),
    ("nodes created", "nodes_created", "{:.0f}"),
    ("pending p95 (s), whole day", "pending_p95", "{:.1f}"),
    ("time-to-Ready p95 (s), whole day", "ready_p95", "{:.1f}"),
    ("evictions", "evictions", "{:.0f}"),
    ("pods pending at the end", "pods_pending_at_end", "{:.0f}"),
)


@contextlib.contextmanager
def _recording() -> Iterator[dict[str, Any]]:
    """While open, :func:`karpy.sim.runner.run` keeps its metrics collector, kube-scheduler stand-in
    and workload stand-in in the dict yielded (``collector``, ``binder``, ``workloads``): the run's
    figures hold no per-pod record, and the spike windows need one."""
    made: dict[str, Any] = {}
    kinds = (
        (sim_metrics, "Collector", "collector"),
        (runner.binder_mod, "Binder", "binder"),
        (runner, "Workloads", "workloads"),
    )
    saved = [(module, attr, getattr(module, attr)) for module, attr, _ in kinds]
    for module, attr, key in kinds:
        base = getattr(module, attr)

        def init(self: Any, *a: Any, _base: Any = base, _key: str = key, **k: Any) -> None:
            _base.__init__(self, *a, **k)
            made[_key] = self

        setattr(module, attr, type(attr, (base,), {"__init__": init}))
    try:
        yield made
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)


def spike_figures(result: runner.RunResult, made: dict[str, Any]) -> Figures:
    """Pending (created -> bound) and time-to-Ready (created -> Ready) of the pods created in each of
    :data:`SPIKES` (pause pods and DaemonSet pods left out), with the whole run's figures."""
    skip = made["collector"].low_priority
    out = goal_figures(result)
    out["evictions"] = float(result.figures["evictions"])
    out["ready_p95"] = float(result.figures["ready_seconds"]["p95"] or 0.0)
    for _, key, start, end in SPIKES:

        def inside(created: float, start: float = start, end: float = end) -> bool:
            return start * 3600 <= created % DAY < end * 3600

        pending = [b.latency for b in made["binder"].bindings if b.pod not in skip and inside(b.created)]
        ready = [
            s.ready - s.created for s in made["workloads"].started if s.pod not in skip and inside(s.created)
        ]
        out[f"pending_p95_{key}"] = float(sim_metrics.percentiles(pending)["p95"] or 0.0)
        out[f"ready_p95_{key}"] = float(sim_metrics.percentiles(ready)["p95"] or 0.0)
        out[f"ready_15s_{key}"] = sum(r <= READY_GOAL for r in ready) / len(ready) if ready else 0.0
        out[f"pods_{key}"] = float(len(ready))
    return out


def headroom_runs(seed: int, until: float | None) -> dict[str, Figures]:
    """karpy without and with the headroom twin, and the Cluster Autoscaler baseline (same trace,
    seed and length; the whole day by default)."""
    base = scenario_mod.load(HEADROOM_SCENARIO)
    twin = base.with_karpy_config(scenario_mod.load(HEADROOM_TWIN))
    length = DAY if until is None else until
    out: dict[str, Figures] = {}
    for key, sc, mode in (("without", base, runner.KARPY), ("with", twin, runner.KARPY)):
        with _recording() as made:
            result = runner.run(sc, seed=seed, until=length, mode=mode)
        out[key] = spike_figures(result, made)
    with _recording() as made:
        result = runner.run(base, seed=seed, until=length, mode=runner.CLUSTER_AUTOSCALER)
    out["ca"] = spike_figures(result, made)
    return out


def headroom_goals(figs: dict[str, Figures]) -> list[tuple[str, bool]]:
    """The two goals in words, each met or not."""
    off, on, ca = figs["without"], figs["with"], figs["ca"]
    keys = [key for _, key, _, _ in SPIKES]
    return [
        (
            f"time-to-Ready p95 at the spikes <= {READY_GOAL:.0f} s at <= +5% daily cost",
            all(on[f"ready_p95_{k}"] <= READY_GOAL for k in keys)
            and on["cost_per_day"] <= COST_GOAL * off["cost_per_day"],
        ),
        (
            "pending p95 at the spikes at most the Cluster Autoscaler baseline's, at a lower daily cost",
            all(on[f"pending_p95_{k}"] <= ca[f"pending_p95_{k}"] for k in keys)
            and on["cost_per_day"] < ca["cost_per_day"],
        ),
    ]


def headroom_table(seed: int, figs: dict[str, Figures]) -> str:
    """The headroom section as a Markdown table: karpy without, with, the change, and the baseline."""
    off, on, ca = figs["without"], figs["with"], figs["ca"]
    lines = [
        f"### {HEADROOM} (seed {seed}): headroom without placeholder pods (karpy.sh/headroom, hospital day)",
        "",
        "| figure | karpy | karpy + headroom | change | Cluster Autoscaler (pause pods) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, key, fmt in HEADROOM_ROWS:
        change = _change(off[key], on[key])
        lines.append(
            f"| {label} | {fmt.format(off[key])} | {fmt.format(on[key])} | {change} | {fmt.format(ca[key])} |"
        )
    lines.append("")
    lines += [f"Goal: {goal}: **{'met' if ok else 'MISSED'}**" for goal, ok in headroom_goals(figs)]
    lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="seeds to run (default 1)")
    parser.add_argument("--only", action="append", default=[], help="run only this section (repeatable)")
    parser.add_argument("--until", type=float, default=None, help="simulate this many seconds instead")
    parser.add_argument("--json", type=Path, default=None, help="write every figure as JSON")
    args = parser.parse_args(argv)
    chosen = [f for f in FEATURES if not args.only or f.name in args.only]
    unknown = set(args.only) - {f.name for f in FEATURES} - {name for name, _, _ in NOT_BUILT} - {HEADROOM}
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    missed = 0
    for feature in chosen:
        for seed in args.seeds:
            off, on = measure(feature, seed, args.until if args.until is not None else feature.until)
            print(table(feature, seed, off, on), flush=True)
            out.setdefault(feature.name, {})[str(seed)] = {"without": off, "with": on}
            missed += not feature.met(off, on)
    if not args.only or HEADROOM in args.only:
        for seed in args.seeds:
            figs = headroom_runs(seed, args.until)
            print(headroom_table(seed, figs), flush=True)
            out.setdefault(HEADROOM, {})[str(seed)] = figs
            missed += not all(ok for _, ok in headroom_goals(figs))
    for name, what, goal in NOT_BUILT:
        if not args.only or name in args.only:
            print(not_built(name, what, goal), flush=True)
            out[name] = "not built"
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
