"""The simulation report: table rows, savings split, and a self-contained HTML page."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from karpy.sim import report


def _figures(cost: float, nodes: list[int]) -> dict[str, object]:
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
        "utilization": {"cpu": 0.5, "memory": 0.4},
        "series": {
            "t": [0, 60, 120],
            "nodes": nodes,
            "pending": [3, 0, 0],
            "cost": [0, 0.1, 0.2],
            "cpu": [0, 0.5, 0.6],
            "memory": [0, 0.4, 0.5],
            "disruptions": [0, 0, 1],
        },
    }


def test_table_has_one_column_per_run() -> None:
    rows = report.table_rows(
        {"karpy": _figures(1.0, [1, 2, 2]), "cluster-autoscaler": _figures(2.0, [2, 3, 3])}
    )
    assert rows[0] == ["cost (USD)", "1.0000", "2.0000"]
    assert ["disruptions", "underutilized 1", "underutilized 1"] in rows


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


def test_html_is_self_contained_with_decodable_plots(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    report.write_html({"scenario": "s", "seed": 1, "runs": {"karpy": _figures(1.0, [1, 2, 2])}}, out)
    text = out.read_text()
    assert "http://" not in text and "https://" not in text
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)
    assert len(images) == 5
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
