"""The simulation report: table rows, deltas against the baseline, savings split, and a
self-contained HTML page."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from karpy.sim import report


def _figures(cost: float, nodes: list[int], memory: float = 0.4) -> dict[str, object]:
    return {
        "cost_usd": cost,
        "pending_seconds": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "max": 4.0},
        "ready_seconds": {"p50": 5.0, "p95": 6.0, "p99": 7.0, "max": 8.0},
        "pods_created": 10,
        "pods_never_scheduled": 0,
        "nodes_created": 3,
        "nodes_removed": 1,
        "peak_nodes": max(nodes),
        "evictions": 2,
        "disruptions": {"underutilized": 1},
        "node_hours": 12.5,
        "node_hours_by_capacity_type": {"on-demand": 2.5, "spot": 10.0},
        "utilization": {"cpu": 0.5, "memory": memory},
        "series": {
            "t": [0, 60, 120],
            "nodes": nodes,
            "pending": [3, 0, 0],
            "cost": [0, 0.1, 0.2],
            "cpu": [0, 0.5, 0.6],
            "memory": [0, memory, memory],
            "disruptions": [0, 0, 0],
        },
    }


def _document() -> dict[str, object]:
    return {
        "scenario": "s",
        "seed": 7,
        "start": "2026-03-02T07:00:00Z",
        "end": "2026-03-03T07:00:00Z",
        "runs": {
            "karpy": _figures(1.0, [1, 2, 2], memory=0.85),
            "cluster-autoscaler": _figures(2.0, [2, 3, 3], memory=0.49),
        },
    }


def test_table_has_one_column_per_run_formatted_as_the_cli() -> None:
    rows = report.table_rows(
        {"karpy": _figures(1.0, [1, 2, 2]), "cluster-autoscaler": _figures(2.0, [2, 3, 3])}
    )
    assert rows[0] == ["cost (USD)", "1.00", "2.00"]
    assert ["disruptions", "underutilized 1", "underutilized 1"] in rows
    assert ["memory utilisation", "40%", "40%"] in rows
    assert ["node-hours (spot)", "10.0", "10.0"] in rows


def test_every_figure_of_the_terminal_table_has_a_row() -> None:
    labels = {row.label for row in report.ROWS}
    terminal = [  # the rows of `karpy simulate`'s table, each split into its figures
        ["cost (USD)"],
        ["pending p50 (s)", "pending p95 (s)"],
        ["pending p99 (s)", "pending max (s)"],
        ["ready p50 (s)", "ready p95 (s)"],
        ["pods created"],
        ["pods never scheduled"],
        ["nodes created", "nodes removed"],
        ["peak nodes"],
        ["node-hours", "node-hours (spot)"],
        ["cpu utilisation", "memory utilisation"],
        ["disruptions"],
        ["evictions"],
    ]
    assert [label for row in terminal for label in row if label not in labels] == []


def test_delta_says_better_or_worse_by_the_figure_s_direction() -> None:
    rows = {row.label: row for row in report.ROWS}
    assert report.delta(rows["cost (USD)"], 1.0, 2.0) == ("−1.00 (−50%)", "better")
    assert report.delta(rows["memory utilisation"], 0.85, 0.49) == ("+36 pp", "better")
    assert report.delta(rows["cpu utilisation"], 0.49, 0.5) == ("−1 pp", "worse")
    assert report.delta(rows["cpu utilisation"], 0.497, 0.5) == ("−0.3 pp", "worse")
    assert report.delta(rows["evictions"], 6, 5) == ("+1", "worse")
    assert report.delta(rows["pods created"], 31, 30) == ("+1", "")  # no direction: no verdict
    assert report.delta(rows["pending p50 (s)"], 0.0, 0.0) == ("0", "same")
    assert report.delta(rows["disruptions"], {"a": 2, "b": 1}, {"a": 1}) == ("+2", "")
    assert report.delta(rows["scheduler divergence rate"], 0.1, None) == ("-", "")


def test_the_baseline_is_cluster_autoscaler_else_another_configuration() -> None:
    karpy = _figures(1.0, [1])
    assert report.baseline({"karpy": karpy, "cluster-autoscaler": karpy, "karpy:other": karpy}) == (
        "cluster-autoscaler"
    )
    assert report.baseline({"karpy": karpy, "karpy-no-spot": karpy, "karpy:other": karpy}) == "karpy:other"
    assert report.baseline({"karpy": karpy, "karpy-no-spot": karpy}) is None


def test_savings_split_adds_up() -> None:
    runs = {
        "cluster-autoscaler": _figures(10.0, [1]),
        "karpy-no-spot-no-consolidation": _figures(8.0, [1]),
        "karpy-no-spot": _figures(7.0, [1]),
        "karpy": _figures(4.0, [1]),
    }
    split = report.savings_breakdown(runs)
    assert split == {"total": 6.0, "instance_choice_and_packing": 2.0, "consolidation": 1.0, "spot": 3.0}
    assert report.savings_breakdown({"karpy": _figures(1.0, [1])}) is None


def test_html_states_window_seed_deltas_and_why_pods_created_differ(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    report.write_html(_document(), out)
    text = html.unescape(out.read_text())
    assert "simulated window 2026-03-02T07:00:00Z to 2026-03-03T07:00:00Z (1d); seed 7" in text
    assert "<th>karpy vs cluster-autoscaler</th>" in text
    assert "<td class='better'>−1.00 (−50%) better</td>" in text
    assert "<td>85%</td><td>49%</td><td class='better'>+36 pp better</td>" in text
    assert "evicted by a disruption" in text and "recreated" in text
    for row in report.ROWS:
        assert f"<td>{row.label}</td>" in text


def test_html_is_self_contained_with_one_decodable_plot_per_series(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    report.write_html({"scenario": "s", "seed": 1, "runs": {"karpy": _figures(1.0, [1, 2, 2])}}, out)
    text = out.read_text()
    assert "http://" not in text and "https://" not in text
    assert "simulated window not recorded" in text and "karpy vs" not in text  # no baseline: no delta
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)
    assert len(images) == len(report.PLOTS) == 6
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "Memory utilisation" in text


def test_a_zero_count_plot_starts_at_zero_and_the_legend_is_beside_it() -> None:
    runs = {"karpy": _figures(1.0, [1, 2, 2]), "cluster-autoscaler": _figures(2.0, [2, 3, 3])}
    for key, kind in (("disruptions", "count"), ("memory", "percent"), ("nodes", "count")):
        fig = report.figure(runs, key, key, "unit", kind)
        ax = fig.axes[0]
        assert ax.get_ylim()[0] == 0.0, key
        fig.canvas.draw()
        legend = ax.get_legend().get_window_extent().transformed(ax.transAxes.inverted())
        assert legend.x0 > 1.0, key  # right of the axes: over no curve
    zero = report.figure(runs, "disruptions", "d", "disruptions", "count").axes[0]
    assert zero.get_ylim() == (0.0, 1.0)  # an all-zero count plot: 0..1, not -0.04..0.04
    assert all(float(t).is_integer() for t in zero.get_yticks())
    memory = report.figure(runs, "memory", "m", "utilisation", "percent").axes[0]
    assert memory.get_ylim() == (0.0, 1.0)
    assert memory.yaxis.get_major_formatter()(0.5, 0) == "50%"
