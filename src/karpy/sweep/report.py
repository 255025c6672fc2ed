"""The HTML report of a sweep (``karpy sweep --report FILE.html``): one self-contained page.

Input is the merged document (:func:`karpy.sweep.merge.document`). The page has the sweep's
table (per scenario, configuration and grid point: runs, and mean ± half the 95% interval of
cost, pending p95, ready p95, evictions and node churn), the failed runs with their errors, per
scenario a scatter plot of cost against pending p95 (one point per seed, one colour per
configuration and grid point) and, when the grid has exactly two parameters, per scenario and
configuration a heatmap of the mean cost and one of the mean pending p95 over the two
parameters. Plots are PNG embedded as base64 (matplotlib, Agg backend, loaded only here), so
the page needs no network; PNGs carry no software/date metadata, so the page is reproducible.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from karpy.sweep import merge

__all__ = ["heatmap", "scatter", "write_html"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # (after the backend is chosen)

    return plt


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _series_name(group: Mapping[str, Any]) -> str:
    return str(group["configuration"]) + (f" [{group['label']}]" if group["label"] else "")


def scatter(groups: Sequence[Mapping[str, Any]], title: str) -> Any:
    """Cost against pending p95: a point per seed, a colour and marker per configuration and grid point."""
    fig, ax = _pyplot().subplots(figsize=(9, 5), dpi=90)
    markers = "osD^v<>Ph*X"
    for i, group in enumerate(groups):
        cost = group["figures"]["cost_usd"]["values"]
        pending = group["figures"]["pending_p95_seconds"]["values"]
        points = [(p, c) for p, c in zip(pending, cost, strict=True) if p is not None and c is not None]
        if points:
            ax.scatter(
                [p for p, _ in points],
                [c for _, c in points],
                label=_series_name(group),
                marker=markers[i % len(markers)],
                alpha=0.8,
            )
    ax.set_title(title)
    ax.set_xlabel("pending p95 (s)")
    ax.set_ylabel("cost (USD)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small")
    return fig


def heatmap(groups: Sequence[Mapping[str, Any]], parameters: Sequence[str], figure: str, title: str) -> Any:
    """The mean of ``figure`` over two grid parameters (rows: the first, columns: the second)."""
    first, second = parameters
    rows = list(dict.fromkeys(str(g["grid"][first]) for g in groups))
    cols = list(dict.fromkeys(str(g["grid"][second]) for g in groups))
    values: list[list[float]] = [[float("nan")] * len(cols) for _ in rows]
    for g in groups:
        mean = g["figures"][figure]["mean"]
        if mean is not None:
            values[rows.index(str(g["grid"][first]))][cols.index(str(g["grid"][second]))] = mean
    fig, ax = _pyplot().subplots(figsize=(1.6 * len(cols) + 3, 0.7 * len(rows) + 2), dpi=90)
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel(second)
    ax.set_ylabel(first)
    ax.set_title(title)
    for r, row in enumerate(values):
        for c, value in enumerate(row):
            if value == value:  # (not NaN)
                ax.text(c, r, f"{value:,.2f}", ha="center", va="center", color="white", fontsize="small")
    fig.colorbar(image, ax=ax)
    return fig


def _table(doc: Mapping[str, Any]) -> str:
    head = ["scenario", "configuration", "grid", "runs", *(label for label, _, _ in merge.COLUMNS)]
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for g in doc["groups"]:
        runs = f"{len(g['runs'])}" + (f" ({g['failed']} failed)" if g["failed"] else "")
        cells = [g["scenario"], g["configuration"], g["label"] or "-", runs]
        cells += [merge.cell(g["figures"][key], digits) for _, key, digits in merge.COLUMNS]
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return "\n".join([*out, "</table>"])


def _failed(doc: Mapping[str, Any]) -> str:
    if not doc["failedRuns"]:
        return "<p>Every run succeeded.</p>"
    items = "".join(
        f"<li><code>{html.escape(f['name'])}</code>: {html.escape(f['error'])}</li>"
        for f in doc["failedRuns"]
    )
    return f"<h2>Failed runs</h2><ul>{items}</ul>"


def _img(data: str, alt: str) -> str:
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></p>'


def _plots(doc: Mapping[str, Any]) -> list[str]:
    parts: list[str] = []
    scenarios = list(dict.fromkeys(g["scenario"] for g in doc["groups"]))
    parameters = list(doc["parameters"])
    for scenario in scenarios:
        groups = [g for g in doc["groups"] if g["scenario"] == scenario]
        parts.append(f"<h2>{html.escape(scenario)}</h2>")
        title = f"{scenario}: cost vs pending p95 (one point per seed)"
        parts.append(_img(_png(scatter(groups, title)), title))
        if len(parameters) != 2:
            continue
        for configuration in dict.fromkeys(g["configuration"] for g in groups if g["grid"]):
            mine = [g for g in groups if g["configuration"] == configuration]
            for figure, label in (
                ("cost_usd", "mean cost (USD)"),
                ("pending_p95_seconds", "mean pending p95 (s)"),
            ):
                title = f"{scenario} / {configuration}: {label}"
                parts.append(_img(_png(heatmap(mine, parameters, figure, title)), title))
    return parts


_STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:nth-child(-n+3){text-align:left}"
)


def write_html(doc: Mapping[str, Any], path: Path) -> None:
    """Write the report page of the merged document ``doc`` to ``path``."""
    runs = doc["runs"]
    body = [
        f"<h1>karpy sweep — {html.escape(doc['sweep'])}</h1>",
        f"<p>karpy {html.escape(doc['karpyVersion'])}; seeds {html.escape(str(doc['seeds']))}; "
        f"grid parameters: {html.escape(', '.join(doc['parameters']) or 'none')}; "
        f"simulated: {html.escape(doc['until'] or 'each scenario its duration')}; "
        f"runs: {runs['succeeded']} succeeded, {runs['failed']} failed.</p>",
        "<p>Each cell: the mean over the seeds ± half the 95% confidence interval (Student t).</p>",
        _table(doc),
        _failed(doc),
        *_plots(doc),
    ]
    page = (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>karpy sweep — {html.escape(doc['sweep'])}</title><style>{_STYLE}</style></head>"
        "<body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
    path.write_text(page, encoding="utf-8")
