"""Reports of simulation runs: the terminal table, the savings split, and a self-contained HTML page.

Input is the ``--json`` document of ``karpy simulate`` (``{"scenario", "seed", "runs":
{name: figures}}``; figures as :func:`karpy.sim.metrics.summary` makes them, with their
time series). The HTML page embeds its plots as PNG data (matplotlib, Agg backend) and
needs no network: nodes, pending pods, accumulated cost, CPU utilisation and cumulative
disruptions over time, one line per run.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the backend is chosen above, before pyplot loads

__all__ = ["ROWS", "savings_breakdown", "table_rows", "write_html"]

ROWS: list[tuple[str, str]] = [
    ("cost (USD)", "cost_usd"),
    ("pending p50 (s)", "pending_seconds.p50"),
    ("pending p95 (s)", "pending_seconds.p95"),
    ("pending p99 (s)", "pending_seconds.p99"),
    ("pending max (s)", "pending_seconds.max"),
    ("ready p95 (s)", "ready_seconds.p95"),
    ("pods created", "pods_created"),
    ("pods never scheduled", "pods_never_scheduled"),
    ("nodes created", "nodes_created"),
    ("nodes removed", "nodes_removed"),
    ("peak nodes", "peak_nodes"),
    ("evictions", "evictions"),
    ("disruptions", "disruptions"),
    ("cpu utilisation", "utilization.cpu"),
    ("memory utilisation", "utilization.memory"),
    ("scheduler divergence rate", "scheduler_consistency.divergence_rate"),  # karpy runs only
]

_PLOTS: list[tuple[str, str, str]] = [
    ("nodes", "Nodes", "nodes"),
    ("pending", "Pending pods", "pods"),
    ("cost", "Accumulated cost", "USD"),
    ("cpu", "CPU requested / allocatable", "fraction"),
    ("disruptions", "Disruptions (cumulative)", "count"),
]


def _get(figures: Mapping[str, Any], path: str) -> Any:
    value: Any = figures
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "0"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.2f}"
    return str(value)


def table_rows(runs: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """One row per figure, one column per run (the terminal and HTML tables)."""
    names = list(runs)
    return [[label, *(_cell(_get(runs[name], path)) for name in names)] for label, path in ROWS]


def savings_breakdown(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, float] | None:
    """The cost difference to Cluster Autoscaler split by cause, when the ablation runs exist.

    ``packing`` = CA − karpy without spot and consolidation (instance choice and bin packing),
    ``consolidation`` = that − karpy without spot, ``spot`` = that − karpy.
    """
    needed = ("cluster-autoscaler", "karpy-no-spot-no-consolidation", "karpy-no-spot", "karpy")
    if not all(name in runs for name in needed):
        return None
    cost = {name: float(runs[name]["cost_usd"]) for name in needed}
    return {
        "total": round(cost["cluster-autoscaler"] - cost["karpy"], 4),
        "instance_choice_and_packing": round(
            cost["cluster-autoscaler"] - cost["karpy-no-spot-no-consolidation"], 4
        ),
        "consolidation": round(cost["karpy-no-spot-no-consolidation"] - cost["karpy-no-spot"], 4),
        "spot": round(cost["karpy-no-spot"] - cost["karpy"], 4),
    }


def _plot(runs: Mapping[str, Mapping[str, Any]], key: str, title: str, unit: str) -> str:
    fig, ax = plt.subplots(figsize=(9, 3.2), dpi=90)
    for name, figures in runs.items():
        series = figures.get("series") or {}
        t = [x / 3600.0 for x in series.get("t", [])]
        ys = series.get(key, [])
        if t and ys:
            ax.plot(t[: len(ys)], ys, label=name, linewidth=1.4)
    ax.set_title(title)
    ax.set_xlabel("hours since start")
    ax.set_ylabel(unit)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _table_html(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_html(document: Mapping[str, Any], path: Path) -> None:
    """Write a self-contained HTML report (plots embedded; opens offline in a browser)."""
    runs: Mapping[str, Mapping[str, Any]] = document["runs"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>karpy simulation: {html.escape(str(document.get('scenario', '')))}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}</style>",
        "</head><body>",
        f"<h1>Simulation: {html.escape(str(document.get('scenario', '')))}</h1>",
        f"<p>seed {html.escape(str(document.get('seed', '')))}; runs: {html.escape(', '.join(runs))}. "
        "Every figure comes from the run (billing log, bindings, node events).</p>",
        _table_html(["figure", *runs], table_rows(runs)),
    ]
    split = savings_breakdown(runs)
    if split is not None:
        parts.append("<h2>Savings against Cluster Autoscaler, by cause</h2>")
        parts.append(_table_html(["cause", "USD"], [[k, f"{v:.4f}"] for k, v in split.items()]))
    for key, title, unit in _PLOTS:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(
            f"<img alt='{html.escape(title)}' src='data:image/png;base64,{_plot(runs, key, title, unit)}'>"
        )
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
