"""The merged document of a sweep: per (scenario, configuration, grid point), statistics across seeds.

:func:`document` groups the outcomes in the plan's order and gives, for each figure of
:data:`FIGURES` (read from the runs' figures as :func:`karpy.sim.metrics.summary` makes them),
the per-seed values, their mean and a 95% confidence interval from Student's t distribution
(``mean ± t(0.975, n-1) · s / √n``; ``null`` for one value); a run whose figure is ``null``
(a pending p95 when no pod was bound) is left out of that figure's statistics. Failed runs are
listed with their errors. Nothing depends on the machine or the clock (no wall times, no host
names), keys are sorted when written (:func:`dumps`), numbers rounded: the same sweep gives the
same bytes on local processes and on Ray, fresh or resumed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import karpy
from karpy.sweep.execute import Outcome
from karpy.sweep.expand import Plan, point_label

__all__ = ["COLUMNS", "DIGITS", "FIGURES", "cell", "document", "dumps", "stats"]

DIGITS = 6

# The merged figures a table shows (the CLI's and the report's): label, figure key, digits.
COLUMNS: list[tuple[str, str, int]] = [
    ("cost (USD)", "cost_usd", 2),
    ("pending p95 (s)", "pending_p95_seconds", 1),
    ("ready p95 (s)", "ready_p95_seconds", 1),
    ("evictions", "evictions", 1),
    ("churn (nodes)", "churn_nodes", 1),
]


def cell(figure: Mapping[str, Any], digits: int) -> str:
    """``mean ± half the 95% interval`` of a merged figure (``-`` without a value)."""
    if figure["mean"] is None:
        return "-"
    text = f"{figure['mean']:,.{digits}f}"
    if figure["ci95"] is not None:
        text += f" ± {(figure['ci95'][1] - figure['ci95'][0]) / 2:,.{digits}f}"
    return text


def _at(*path: str) -> Callable[[Mapping[str, Any]], float | None]:
    def get(figures: Mapping[str, Any]) -> float | None:
        value: Any = figures
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
        return None if value is None else float(value)

    return get


def _churn(figures: Mapping[str, Any]) -> float | None:
    created, removed = figures.get("nodes_created"), figures.get("nodes_removed")
    return None if created is None or removed is None else float(created + removed)


# (name in the merged document, how to read it from a run's figures)
FIGURES: list[tuple[str, Callable[[Mapping[str, Any]], float | None]]] = [
    ("cost_usd", _at("cost_usd")),
    ("pending_p95_seconds", _at("pending_seconds", "p95")),
    ("ready_p95_seconds", _at("ready_seconds", "p95")),
    ("evictions", _at("evictions")),
    ("churn_nodes", _churn),  # nodes created + nodes removed
    ("nodes_created", _at("nodes_created")),
    ("nodes_removed", _at("nodes_removed")),
    ("pods_never_scheduled", _at("pods_never_scheduled")),
    ("node_hours", _at("node_hours")),
]


def _t975(dof: int) -> float:
    from scipy import stats as scipy_stats

    return float(scipy_stats.t.ppf(0.975, dof))


def stats(values: Sequence[float | None]) -> dict[str, Any]:
    """``{n, mean, ci95: [low, high] | null, values}`` of the non-null ``values`` (mean null for none)."""
    known = [float(v) for v in values if v is not None]
    n = len(known)
    mean = math.fsum(known) / n if n else None
    interval = None
    if n >= 2 and mean is not None:
        sd = math.sqrt(math.fsum((v - mean) ** 2 for v in known) / (n - 1))
        half = _t975(n - 1) * sd / math.sqrt(n)
        interval = [round(mean - half, DIGITS), round(mean + half, DIGITS)]
    return {
        "n": n,
        "mean": None if mean is None else round(mean, DIGITS),
        "ci95": interval,
        "values": [None if v is None else round(float(v), DIGITS) for v in values],
    }


def _group_key(outcome: Outcome) -> tuple[str, str, str]:
    run = outcome.run
    return (run.scenario, run.configuration, point_label(run.grid))


def _group(members: list[Outcome]) -> dict[str, Any]:
    first = members[0].run
    good = [o for o in members if o.figures is not None]
    return {
        "scenario": first.scenario,
        "configuration": first.configuration,
        "mode": first.mode,
        "grid": dict(first.grid),
        "label": point_label(first.grid),
        "seeds": [o.run.seed for o in good],
        "runs": [o.run.key for o in good],
        "failed": len(members) - len(good),
        "figures": {name: stats([read(o.figures or {}) for o in good]) for name, read in FIGURES},
    }


def document(plan: Plan, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The ``sweep.json`` document."""
    groups: dict[tuple[str, str, str], list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault(_group_key(outcome), []).append(outcome)
    failed = [
        {
            "key": o.run.key,
            "name": o.run.name,
            "description": o.run.description(),
            "error": o.error or "failed",
            "attempts": o.attempts,
        }
        for o in outcomes
        if o.figures is None
    ]
    return {
        "apiVersion": "karpy.dev/v1alpha1",
        "kind": "SweepResult",
        "sweep": plan.sweep.name,
        "karpyVersion": karpy.__version__,
        "parameters": list(plan.parameters),
        "seeds": list(plan.sweep.seeds),
        "until": plan.sweep.until,
        "runs": {"total": len(outcomes), "succeeded": len(outcomes) - len(failed), "failed": len(failed)},
        "groups": [_group(members) for members in groups.values()],
        "failedRuns": failed,
    }


def dumps(doc: Mapping[str, Any]) -> str:
    """The document as written to ``sweep.json`` and by ``-o json`` (sorted keys, a final newline)."""
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
