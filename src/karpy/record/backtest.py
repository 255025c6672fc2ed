"""``karpy backtest``: replay a recorded trace through the autoscaler that ran, and compare.

:func:`run` takes a scenario with a ``recorded`` block (``karpy record``'s trace), runs it once
(:func:`karpy.sim.runner.run`) as karpy with its NodePools and NodeClasses when the recording saw
NodeClaims (Karpenter ran), else as the Cluster Autoscaler model with the recorded node groups
(``baseline.clusterAutoscaler``), and measures the recorded run the same way
(:func:`karpy.sim.recorded.figures`, priced with the run's catalog). :func:`document` is the
``BacktestResult``: both runs' figures (their ``series`` for the report's plots) and one
:data:`ROWS` comparison per figure, simulated minus recorded and in percent of recorded
(node-hours, cost, peak nodes, pending p95 when recorded, launches per hour). Same trace and seed
-> identical document. Used by :mod:`karpy.cli.backtest_cmd`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy.api import common, encode
from karpy.model import errors
from karpy.sim import recorded as recorded_mod
from karpy.sim import runner
from karpy.sim.scenario import Scenario

__all__ = ["ROWS", "Backtest", "comparison", "document", "run"]

# (key in the comparison, label, path in a run's figures, decimals shown)
ROWS: tuple[tuple[str, str, str, int], ...] = (
    ("node_hours", "node-hours", "node_hours", 2),
    ("cost_usd", "cost (USD)", "cost_usd", 2),
    ("peak_nodes", "peak nodes", "peak_nodes", 0),
    ("pending_p95_seconds", "pending p95 (s)", "pending_seconds.p95", 1),
    ("launches_per_hour", "launches per hour", "churn_per_hour.created", 2),
)


@dataclass
class Backtest:
    scenario: Scenario
    seed: int
    mode: str  # karpy | cluster-autoscaler
    simulated: runner.RunResult
    recorded: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def run(scenario: Scenario, *, seed: int, progress: runner.Progress | None = None) -> Backtest:
    """Replay ``scenario`` (a recorded trace) and measure the recording; raises InputError for a
    scenario without ``recorded`` (or a Cluster Autoscaler one without node groups)."""
    recorded = scenario.recorded
    if recorded is None:
        raise errors.InputError(f"{scenario.file}: recorded: required (a trace written by karpy record)")
    mode = runner.KARPY if recorded.autoscaler == recorded_mod.KARPENTER else runner.CLUSTER_AUTOSCALER
    if mode == runner.CLUSTER_AUTOSCALER and scenario.baseline is None:
        raise errors.InputError(
            f"{scenario.file}: baseline.clusterAutoscaler: required to replay a Cluster Autoscaler recording"
        )
    simulated = runner.run(scenario, seed=seed, mode=mode, progress=progress)
    catalog = runner.base_catalog(scenario)
    prices = {
        (it.name, o.zone, o.capacity_type): o.price for it in catalog.instance_types for o in it.offerings
    }
    warnings = [
        f"{scenario.file}: recorded.nodes: {n.name}: no {n.capacity_type} offering of {n.instance_type} in "
        f"{n.zone or '(no zone)'} in the catalog {scenario.catalog}: priced at 0"
        for n in recorded.nodes
        if (n.instance_type, n.zone, n.capacity_type) not in prices
    ]
    figures = recorded_mod.figures(
        recorded,
        start=scenario.start,
        end=simulated.end,
        price=lambda it, zone, capacity: prices.get((it, zone, capacity)),
    )
    return Backtest(scenario, seed, mode, simulated, figures, warnings + list(simulated.warnings))


def _get(figures: Mapping[str, Any], path: str) -> float | None:
    value: Any = figures
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return None if value is None else float(value)


def comparison(simulated: Mapping[str, Any], recorded: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per figure of :data:`ROWS`: both values, their difference and its percent of recorded."""
    rows = []
    for key, label, path, digits in ROWS:
        ours, theirs = _get(simulated, path), _get(recorded, path)
        delta = None if ours is None or theirs is None else round(ours - theirs, 4)
        percent = None if delta is None or not theirs else round(100.0 * delta / theirs, 2)
        rows.append(
            {
                "figure": key,
                "label": label,
                "simulated": ours,
                "recorded": theirs,
                "delta": delta,
                "percent": percent,
                "digits": digits,
            }
        )
    return rows


def document(result: Backtest) -> dict[str, Any]:
    """The ``BacktestResult`` (no wall-clock figure: reproducible for a trace and seed)."""
    recorded = result.scenario.recorded
    assert recorded is not None
    simulated = result.simulated.to_dict()
    return {
        "apiVersion": common.KARPY_API_VERSION,
        "kind": "BacktestResult",
        "scenario": result.scenario.name,
        "seed": result.seed,
        "start": encode.time(result.scenario.start),
        "end": encode.time(result.simulated.end),
        "autoscaler": result.mode,
        "recording": {
            "source": recorded.source,
            "server": recorded.server,
            "interrupted": recorded.interrupted,
        },
        "comparison": comparison(simulated, result.recorded),
        "runs": {"simulated": simulated, "recorded": result.recorded},
    }
