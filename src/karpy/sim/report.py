"""Reports of simulation runs: the figures table, the savings split, and a self-contained HTML page.

Input is the ``--json`` document of ``karpy simulate`` (``{"scenario", "seed", "start", "end",
"runs": {name: figures}}``; figures as :func:`karpy.sim.metrics.summary` makes them, with their
time series). The HTML page states the simulated window and the seed, has one row per figure
(every figure of the terminal table, formatted as it is there: utilisation in percent) and,
when there is a baseline (Cluster Autoscaler, else another configuration), a column of karpy's
difference to it marked better or worse. Its plots are PNG data embedded in the page
(matplotlib, Agg backend, loaded only when a page is written), so it needs no network: nodes,
pending pods, accumulated cost, CPU and memory utilisation and cumulative disruptions over
time, one line per run, count axes from 0 and legends beside the plot, never over a curve.
Runs with volumes (a ``volumes`` block) add the rows of :data:`VOLUME_ROWS` (:func:`rows_for`).

A ``karpy backtest`` document (``kind: BacktestResult``: runs ``simulated`` and ``recorded``, and
its ``comparison`` rows) gets the same page with the comparison as its table (simulated,
recorded, difference and percent) and the plots both runs have: nodes and accumulated cost, the
simulated and the recorded line on one axis.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = [
    "BACKTEST",
    "BACKTEST_PLOTS",
    "PLOTS",
    "ROWS",
    "VOLUME_ROWS",
    "Row",
    "baseline",
    "delta",
    "figure",
    "rows_for",
    "savings_breakdown",
    "table_rows",
    "write_html",
]

LOWER, HIGHER, NEITHER = "lower", "higher", ""
KARPY = "karpy"
CLUSTER_AUTOSCALER = "cluster-autoscaler"


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: its label, where it is in a run's figures, which way is better, its format."""

    label: str
    path: str
    better: str  # LOWER, HIGHER or NEITHER (no verdict: a count that is neither good nor bad)
    kind: str  # usd | seconds | count | hours | percent | rate | counts (a mapping of counts)
    default: float | None = None  # when the path is absent from figures that exist


ROWS: list[Row] = [
    Row("cost (USD)", "cost_usd", LOWER, "usd"),
    Row("pending p50 (s)", "pending_seconds.p50", LOWER, "seconds"),
    Row("pending p95 (s)", "pending_seconds.p95", LOWER, "seconds"),
    Row("pending p99 (s)", "pending_seconds.p99", LOWER, "seconds"),
    Row("pending max (s)", "pending_seconds.max", LOWER, "seconds"),
    Row("ready p50 (s)", "ready_seconds.p50", LOWER, "seconds"),
    Row("ready p95 (s)", "ready_seconds.p95", LOWER, "seconds"),
    Row("pods created", "pods_created", NEITHER, "count"),
    Row("pods never scheduled", "pods_never_scheduled", LOWER, "count"),
    Row("nodes created", "nodes_created", NEITHER, "count"),
    Row("nodes removed", "nodes_removed", NEITHER, "count"),
    Row("peak nodes", "peak_nodes", NEITHER, "count"),
    Row("node-hours", "node_hours", LOWER, "hours"),
    Row("node-hours (spot)", "node_hours_by_capacity_type.spot", NEITHER, "hours", default=0.0),
    Row("cpu utilisation", "utilization.cpu", HIGHER, "percent"),
    Row("memory utilisation", "utilization.memory", HIGHER, "percent"),
    Row("disruptions", "disruptions", NEITHER, "counts"),
    Row("evictions", "evictions", LOWER, "count"),
    Row("scheduler divergence rate", "scheduler_consistency.divergence_rate", LOWER, "rate"),  # karpy's
]

# what a run whose scenario has claims adds (its ``volumes`` block: docs/simulation.md)
VOLUME_ROWS: list[Row] = [
    Row("volume-pinned pods bound", "volumes.pinned_pods_bound", NEITHER, "count"),
    Row("volume-pinned pending p95 (s)", "volumes.pinned_pending_seconds.p95", LOWER, "seconds"),
    Row("volume-pinned pending max (s)", "volumes.pinned_pending_seconds.max", LOWER, "seconds"),
    Row("pods that waited for their volume's zone", "volumes.pods_waited_for_volume_zone", LOWER, "count"),
    Row("pods that waited for an attach limit", "volumes.pods_waited_for_attach_limit", LOWER, "count"),
    Row("cross-zone bindings", "volumes.cross_zone_bindings", LOWER, "count"),
]

# (series key, title, y-axis label, axis kind): count axes have integer ticks from 0
PLOTS: list[tuple[str, str, str, str]] = [
    ("nodes", "Nodes", "nodes", "count"),
    ("pending", "Pending pods", "pods", "count"),
    ("cost", "Accumulated cost", "USD", "usd"),
    ("cpu", "CPU utilisation (requested / allocatable)", "utilisation", "percent"),
    ("memory", "Memory utilisation (requested / allocatable)", "utilisation", "percent"),
    ("disruptions", "Disruptions (cumulative)", "disruptions", "count"),
]

BACKTEST = "BacktestResult"  # the kind of a karpy backtest document
BACKTEST_PLOTS = [plot for plot in PLOTS if plot[0] in ("nodes", "cost")]  # what a recording has

PODS_CREATED_NOTE = (
    "Pods created counts every pod the workload controllers created, replacements included: a pod "
    "evicted by a disruption (consolidation, drift, a spot interruption) is recreated, so a run that "
    "moves pods more creates more of them for the same workload."
)


def _get(figures: Mapping[str, Any], row: Row) -> Any:
    value: Any = figures
    parts = row.path.split(".")
    for index, part in enumerate(parts):
        if not isinstance(value, Mapping):
            return None
        if part not in value:
            return row.default if index == len(parts) - 1 else None
        value = value[part]
    return value


def _number(value: Any, kind: str) -> str:
    if kind == "percent":
        return f"{value:.0%}"
    if kind == "rate":
        return f"{value:.4f}"
    if kind == "hours":
        return f"{value:,.1f}"
    if kind == "count":
        return f"{value:,}" if isinstance(value, int) else f"{value:,.0f}"
    return f"{value:,.2f}"


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "-"
    return _number(value, kind)


def rows_for(runs: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    """The figures' rows: :data:`ROWS`, and :data:`VOLUME_ROWS` when a run has volumes."""
    return ROWS + VOLUME_ROWS if any("volumes" in r for r in runs.values()) else ROWS


def table_rows(runs: Mapping[str, Mapping[str, Any]]) -> list[list[str]]:
    """One row per figure, one column per run (the HTML table, without its delta column)."""
    return [[row.label, *(_cell(_get(runs[name], row), row.kind) for name in runs)] for row in rows_for(runs)]


def baseline(runs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The run karpy is compared with: Cluster Autoscaler, else another configuration
    (``--compare-with``), else none (an ablation is not a baseline)."""
    if KARPY not in runs:
        return None
    if CLUSTER_AUTOSCALER in runs:
        return CLUSTER_AUTOSCALER
    return next((name for name in runs if name.startswith(KARPY + ":")), None)


def _total(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return float(sum(value.values()))
    return float(value)


def delta(row: Row, ours: Any, theirs: Any) -> tuple[str, str]:
    """(karpy minus the baseline as text, ``better`` / ``worse`` / ``same`` / "" (no verdict))."""
    a, b = _total(ours), _total(theirs)
    if a is None or b is None:
        return "-", ""
    diff = a - b
    if abs(diff) < 1e-9:
        return "0", "same" if row.better else ""
    if row.kind == "percent":
        points = diff * 100
        text = f"{points:+.0f} pp" if abs(points) >= 0.5 else f"{points:+.1f} pp"
    else:
        kind = "count" if row.kind == "counts" else row.kind
        text = _number(diff, kind)
        text = text if text.startswith("-") else "+" + text
        if b and row.kind not in ("count", "counts", "rate"):
            text += f" ({diff / b:+.0%})"
    text = text.replace("-", "−")  # a minus sign, not a hyphen
    if not row.better:
        return text, ""
    lower = diff < 0
    return text, "better" if lower == (row.better == LOWER) else "worse"


def savings_breakdown(runs: Mapping[str, Mapping[str, Any]]) -> dict[str, float] | None:
    """The cost difference to Cluster Autoscaler split by cause, when the ablation runs exist.

    ``packing`` = CA − karpy without spot and consolidation (instance choice and bin packing),
    ``consolidation`` = that − karpy without spot, ``spot`` = that − karpy.
    """
    needed = (CLUSTER_AUTOSCALER, "karpy-no-spot-no-consolidation", "karpy-no-spot", KARPY)
    if not all(name in runs for name in needed):
        return None
    cost = {name: float(runs[name]["cost_usd"]) for name in needed}
    return {
        "total": round(cost[CLUSTER_AUTOSCALER] - cost[KARPY], 4),
        "instance_choice_and_packing": round(
            cost[CLUSTER_AUTOSCALER] - cost["karpy-no-spot-no-consolidation"], 4
        ),
        "consolidation": round(cost["karpy-no-spot-no-consolidation"] - cost["karpy-no-spot"], 4),
        "spot": round(cost["karpy-no-spot"] - cost[KARPY], 4),
    }


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # the backend is chosen above, before pyplot loads

    return plt


def figure(runs: Mapping[str, Mapping[str, Any]], key: str, title: str, unit: str, kind: str) -> Any:
    """One plot (a matplotlib Figure): a line per run, the y axis from 0 (integer ticks for
    counts, percent for utilisation), the legend to the right of the axes."""
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    fig, ax = _pyplot().subplots(figsize=(9, 3.2), dpi=90)
    top = 0.0
    for name, figures in runs.items():
        series = figures.get("series") or {}
        t = [x / 3600.0 for x in series.get("t", [])]
        ys = series.get(key, [])
        if t and ys:
            ax.plot(t[: len(ys)], ys, label=name, linewidth=1.4)
            top = max(top, *ys)
    ax.set_title(title)
    ax.set_xlabel("hours since start")
    ax.set_ylabel(unit)
    ax.grid(alpha=0.3)
    if kind == "percent":
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
        ax.set_ylim(0.0, max(1.0, top * 1.05))
    else:
        if kind == "count":
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0.0, top * 1.08 if top > 0 else 1.0)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small")
    return fig


def _plot(runs: Mapping[str, Mapping[str, Any]], key: str, title: str, unit: str, kind: str) -> str:
    """One plot as base64 PNG (the legend included: the image grows to the right)."""
    fig = figure(runs, key, title, unit, kind)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _table_html(
    header: Sequence[str], rows: Sequence[Sequence[str]], classes: Sequence[str] | None = None
) -> str:
    """A table; ``classes`` (one per row) styles each row's last cell (better / worse)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        css = classes[index] if classes is not None else ""
        cells = [f"<td>{html.escape(c)}</td>" for c in row]
        if css and cells:
            cells[-1] = f"<td class='{css}'>{html.escape(row[-1])}</td>"
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _span(seconds: float) -> str:
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    return "".join(parts) + (f"{secs}s" if secs or not any(parts) else "")


def _window(document: Mapping[str, Any]) -> str:
    start, end = document.get("start"), document.get("end")
    if not start or not end:
        return "simulated window not recorded"
    try:
        length = datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))
    except ValueError:
        return f"simulated window {start} to {end}"
    return f"simulated window {start} to {end} ({_span(length.total_seconds())})"


def _figures_table(runs: Mapping[str, Mapping[str, Any]]) -> str:
    names = list(runs)
    base = baseline(runs)
    rows = table_rows(runs)
    if base is None:
        return _table_html(["figure", *names], rows)
    header = ["figure", *names, f"karpy vs {base}"]
    classes = []
    for row, cells in zip(rows_for(runs), rows, strict=True):
        text, verdict = delta(row, _get(runs[KARPY], row), _get(runs[base], row))
        cells.append(verdict if verdict == "same" else f"{text} {verdict}".strip())
        classes.append(verdict)
    return _table_html(header, rows, classes)


def _comparison_html(rows: Sequence[Mapping[str, Any]]) -> str:
    """A backtest's comparison: simulated, recorded, their difference and its percent of recorded."""

    def cell(value: Any, digits: int, sign: str = "") -> str:
        return "-" if value is None else f"{value:{sign},.{digits}f}".replace("-", "−")

    body = [
        [
            str(r["label"]),
            cell(r["simulated"], r.get("digits", 2)),
            cell(r["recorded"], r.get("digits", 2)),
            cell(r["delta"], r.get("digits", 2), "+"),
            "-" if r["percent"] is None else f"{r['percent']:+.1f}%".replace("-", "−"),
        ]
        for r in rows
    ]
    return _table_html(["figure", "simulated", "recorded", "difference", "percent of recorded"], body)


def write_html(document: Mapping[str, Any], path: Path) -> None:
    """Write a self-contained HTML report (plots embedded; opens offline in a browser)."""
    if document.get("kind") == BACKTEST:
        _write_backtest(document, path)
        return
    runs: Mapping[str, Mapping[str, Any]] = document["runs"]
    scenario = html.escape(str(document.get("scenario", "")))
    base = baseline(runs)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>karpy simulation: {scenario}</title>",
        _STYLE,
        "</head><body>",
        f"<h1>Simulation: {scenario}</h1>",
        f"<p>{html.escape(_window(document))}; seed {html.escape(str(document.get('seed', '')))}; "
        f"runs: {html.escape(', '.join(runs))}. Every figure comes from the run (billing log, "
        "bindings, node events); wall time, which depends on the machine, is not part of it.</p>",
        _figures_table(runs),
    ]
    if base is not None:
        parts.append(
            f"<p class='note'>The last column is karpy minus {html.escape(base)}: "
            "<span class='better'>better</span> or <span class='worse'>worse</span> where a direction "
            "is better (lower cost, latency, node-hours and evictions; higher utilisation); pp = "
            "percentage points.</p>"
        )
    parts.append(f"<p class='note'>{html.escape(PODS_CREATED_NOTE)}</p>")
    split = savings_breakdown(runs)
    if split is not None:
        parts.append("<h2>Savings against Cluster Autoscaler, by cause</h2>")
        parts.append(_table_html(["cause", "USD"], [[k, f"{v:,.2f}"] for k, v in split.items()]))
    parts.extend(_plots(runs, PLOTS))
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")


_STYLE = (
    "<style>body{font-family:sans-serif;margin:2em;max-width:1200px}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
    "text-align:right}td:first-child,th:first-child{text-align:left}img{max-width:100%}"
    ".better{color:#137333;font-weight:bold}.worse{color:#b3261e;font-weight:bold}"
    ".note{color:#444;max-width:60em}</style>"
)


def _plots(runs: Mapping[str, Mapping[str, Any]], plots: Sequence[tuple[str, str, str, str]]) -> list[str]:
    parts = []
    for key, title, unit, kind in plots:
        parts.append(f"<h2>{html.escape(title)}</h2>")
        image = _plot(runs, key, title, unit, kind)
        parts.append(f"<img alt='{html.escape(title)}' src='data:image/png;base64,{image}'>")
    return parts


def _write_backtest(document: Mapping[str, Any], path: Path) -> None:
    """The page of a ``karpy backtest`` document (see the module docstring)."""
    runs: Mapping[str, Mapping[str, Any]] = document["runs"]
    scenario = html.escape(str(document.get("scenario", "")))
    autoscaler = html.escape(str(document.get("autoscaler", "")))
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>karpy backtest: {scenario}</title>",
        _STYLE,
        "</head><body>",
        f"<h1>Backtest: {scenario}</h1>",
        f"<p>{html.escape(_window(document))}; seed {html.escape(str(document.get('seed', '')))}; the "
        f"recorded workload replayed through {autoscaler} and compared with what the cluster did "
        "(the recorded nodes, priced with the simulator's catalog).</p>",
        _comparison_html(document.get("comparison") or []),
    ]
    parts.extend(_plots(runs, BACKTEST_PLOTS))
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
